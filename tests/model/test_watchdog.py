"""fail_after_parked: the idle deadline of a read, held only while the read waits.

Each test checks it against what ``trio.fail_after`` would do (the bound it promises),
in virtual time, and that the inner coroutine really ran (its steps are recorded).
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import AnthropicClient, RetryPolicy, StreamIdleTimeoutError, TextBlock
from trio_agent._model import _watchdog as watchdog
from trio_agent._model._watchdog import (
    MAX_FREE_YIELDS,
    fail_after_parked,
)
from trio_agent.lowlevel import StreamEvent, StreamResult
from trio_agent.testing import ScriptedAnswer, Timing, encode_event


async def test_a_ready_read_returns_its_value_at_once(autojump_clock: Any) -> None:
    steps: list[str] = []

    async def ready() -> str:
        await trio.lowlevel.checkpoint()
        steps.append("read")
        return "chunk"

    assert await fail_after_parked(ready(), 5.0) == "chunk"
    assert steps == ["read"]
    assert trio.current_time() == 0.0


async def test_a_read_that_waits_too_long_times_out_at_the_deadline(autojump_clock: Any) -> None:
    steps: list[str] = []

    async def stuck() -> None:
        steps.append("waiting")
        await trio.sleep_forever()

    with pytest.raises(trio.TooSlowError):
        await fail_after_parked(stuck(), 5.0)
    assert steps == ["waiting"]
    assert trio.current_time() == pytest.approx(5.0)


async def test_the_deadline_counts_from_the_first_wait_across_waits(autojump_clock: Any) -> None:
    # Three waits of 2 s with a 5 s bound: the third is cut at 5 s, not reset per wait.
    waited: list[float] = []

    async def dribble() -> None:
        for _ in range(3):
            await trio.sleep(2.0)
            waited.append(trio.current_time())

    with pytest.raises(trio.TooSlowError):
        await fail_after_parked(dribble(), 5.0)
    assert waited == [pytest.approx(2.0), pytest.approx(4.0)]
    assert trio.current_time() == pytest.approx(5.0)


async def test_scopes_and_nurseries_opened_by_the_read_nest_correctly(
    autojump_clock: Any,
) -> None:
    # The read opens its own cancel scope and a nursery, then waits inside them: the
    # deadline's scope must nest under them (entering one lazily at the wait, over
    # them, corrupted Trio's scope stack).
    steps: list[str] = []

    async def child() -> None:
        await trio.sleep(1.0)
        steps.append("child")

    async def nested(wait: float) -> str:
        with trio.move_on_after(100.0):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(child)
                await trio.sleep(wait)
                steps.append("slept")
        return "done"

    assert await fail_after_parked(nested(2.0), 5.0) == "done"
    assert steps == ["child", "slept"]
    steps.clear()
    with pytest.raises(trio.TooSlowError):
        await fail_after_parked(nested(50.0), 5.0)
    assert steps == ["child"]
    assert trio.current_time() == pytest.approx(2.0 + 5.0)


async def test_children_of_the_read_are_cancelled_at_the_deadline(autojump_clock: Any) -> None:
    steps: list[str] = []

    async def child() -> None:
        try:
            await trio.sleep(100.0)
        finally:
            steps.append("child cancelled")

    async def with_child() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(child)
        steps.append("not reached")

    with pytest.raises(trio.TooSlowError):
        await fail_after_parked(with_child(), 5.0)
    assert steps == ["child cancelled"]
    assert trio.current_time() == pytest.approx(5.0)


async def test_outer_cancellation_passes_through_as_cancelled(autojump_clock: Any) -> None:
    steps: list[str] = []

    async def stuck() -> None:
        steps.append("waiting")
        await trio.sleep_forever()

    with trio.move_on_after(3.0) as outer:
        await fail_after_parked(stuck(), 5.0)
    assert outer.cancelled_caught
    assert steps == ["waiting"]
    assert trio.current_time() == pytest.approx(3.0)


async def test_errors_and_values_pass_through(autojump_clock: Any) -> None:
    async def fails() -> None:
        await trio.sleep(1.0)
        raise ValueError("bad chunk")

    with pytest.raises(ValueError, match="bad chunk"):
        await fail_after_parked(fails(), 5.0)

    async def thrown_into(inbox: trio.MemoryReceiveChannel[int]) -> int:
        return await inbox.receive()

    send, receive = trio.open_memory_channel[int](1)
    async with trio.open_nursery() as nursery:

        async def later() -> None:
            await trio.sleep(1.0)
            await send.send(42)

        nursery.start_soon(later)
        assert await fail_after_parked(thrown_into(receive), 5.0) == 42


async def test_a_read_that_wraps_the_error_of_its_wait(autojump_clock: Any) -> None:
    # The read sees TooSlowError at its wait (never a Cancelled its own scopes could
    # swallow); whatever it makes of it, TooSlowError comes out.
    seen: list[BaseException] = []

    async def wraps() -> None:
        try:
            await trio.sleep_forever()
        except BaseException as exc:
            seen.append(exc)
            raise OSError("read aborted") from exc

    with pytest.raises(trio.TooSlowError) as info:
        await fail_after_parked(wraps(), 5.0)
    assert [type(e) for e in seen] == [trio.TooSlowError]
    assert isinstance(info.value.__cause__, OSError)


async def test_waits_after_the_deadline_end_at_once(autojump_clock: Any) -> None:
    # As under fail_after: a clean-up that waits after the deadline is cut at once.
    steps: list[str] = []

    async def cleans_up() -> None:
        try:
            await trio.sleep_forever()
        finally:
            steps.append("cleaning")
            await trio.sleep(1.0)
            steps.append("not reached")

    with pytest.raises(trio.TooSlowError):
        await fail_after_parked(cleans_up(), 5.0)
    assert steps == ["cleaning"]
    assert trio.current_time() == pytest.approx(5.0)


async def test_a_busy_poll_is_bounded_too(autojump_clock: Any) -> None:
    clock = autojump_clock
    polls = 0

    async def busy() -> None:
        nonlocal polls
        while True:  # never waits: checkpoints only, while time goes by
            polls += 1
            clock.jump(0.5)
            await trio.lowlevel.checkpoint()

    with pytest.raises(trio.TooSlowError):
        await fail_after_parked(busy(), 5.0)
    assert polls > MAX_FREE_YIELDS
    assert trio.current_time() <= 0.5 * (MAX_FREE_YIELDS + 1) + 5.0 + 0.5


# -- against trio.fail_after, over programs of waits, scopes and nurseries ---------------

Step = tuple[str, float]
steps_strategy = st.lists(
    st.tuples(st.sampled_from(["checkpoint", "sleep", "scoped_sleep", "nursery"]), st.floats(0, 4)),
    max_size=6,
)


def program(steps: list[Step], log: list[tuple[str, float]]) -> Callable[[], Awaitable[int]]:
    async def run() -> int:
        for kind, seconds in steps:
            if kind == "checkpoint":
                await trio.lowlevel.checkpoint()
            elif kind == "sleep":
                await trio.sleep(seconds)
            elif kind == "scoped_sleep":
                with trio.move_on_after(seconds / 2 + 0.25):
                    await trio.sleep(seconds)
            else:  # a child that sleeps, the parent waiting in the nursery's exit
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(trio.sleep, seconds)
            log.append((kind, trio.current_time()))
        return len(steps)

    return run


@settings(max_examples=150, deadline=None)
@given(steps=steps_strategy, timeout=st.floats(0.1, 10))
def test_same_outcome_as_fail_after(steps: list[Step], timeout: float) -> None:
    def run(bounded: Callable[[Awaitable[int]], Awaitable[int]]) -> tuple[Any, list[Any]]:
        log: list[tuple[str, float]] = []

        async def main() -> Any:
            try:
                return await bounded(program(steps, log)())
            except trio.TooSlowError:
                return ("timeout", trio.current_time())

        return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0)), log

    async def reference(coro: Awaitable[int]) -> int:
        with trio.fail_after(timeout):
            return await coro

    ours = run(lambda coro: fail_after_parked(coro, timeout))  # type: ignore[arg-type]
    assert ours == run(reference)
    assert len(ours[1]) == len(steps) or ours[0][0] == "timeout"
    assert not math.isnan(timeout)


async def test_only_a_wait_costs_a_cancel_scope(
    autojump_clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The point of it all: a read whose data is ready enters no cancel scope; one that
    # waits enters one per wait.
    entered: list[float] = []
    real = trio.CancelScope

    def counting(**kwargs: Any) -> trio.CancelScope:
        entered.append(kwargs.get("deadline", math.inf))
        return real(**kwargs)

    async def ready() -> str:
        await trio.lowlevel.checkpoint()
        return "ready"

    async def waits() -> str:
        await trio.sleep(1.0)
        await trio.sleep(1.0)
        return "waited"

    class TrioCountingScopes:  # the watchdog module's view of trio
        CancelScope = staticmethod(counting)

        def __getattr__(self, name: str) -> Any:
            return getattr(trio, name)

    monkeypatch.setattr(watchdog, "trio", TrioCountingScopes())
    assert await fail_after_parked(ready(), 5.0) == "ready"
    assert entered == []
    assert await fail_after_parked(waits(), 5.0) == "waited"
    monkeypatch.undo()
    assert entered == [pytest.approx(5.0), pytest.approx(5.0)]  # one deadline for both


# -- in the client: a body that waits on a memory channel (no scope of its own) ----------


class _ChannelBody(httpx.AsyncByteStream):
    def __init__(self, receive: trio.MemoryReceiveChannel[bytes]) -> None:
        self._receive = receive

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._receive:
            yield chunk

    async def aclose(self) -> None:
        await self._receive.aclose()


class _ChannelTransport(httpx.AsyncBaseTransport):
    """Answers with a body read from a channel a test task feeds (as a proxy, or an
    ASGI app's stream, would)."""

    def __init__(self, receive: trio.MemoryReceiveChannel[bytes]) -> None:
        self.receive = receive
        self.requests = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        headers = {"content-type": "text/event-stream"}
        return httpx.Response(200, headers=headers, stream=_ChannelBody(self.receive))


def _event_bytes() -> list[bytes]:
    answer = ScriptedAnswer(blocks=[TextBlock("one two three")], timing=Timing(text_chunk_size=4))
    return [encode_event(e) for e in answer.events()]


async def _stream_through_channel(
    gaps: list[float], consumer_sleep: float
) -> tuple[list[Any], BaseException | None, float]:
    send, receive = trio.open_memory_channel[bytes](math.inf)
    transport = _ChannelTransport(receive)
    chunks = _event_bytes()
    items: list[Any] = []
    error: BaseException | None = None

    async def produce() -> None:
        async with send:
            for chunk, gap in zip(chunks, [*gaps, *[0.0] * len(chunks)], strict=False):
                await trio.sleep(gap)
                await send.send(chunk)
            await trio.sleep_forever()  # the connection stays open

    async with trio.open_nursery() as nursery, httpx.AsyncClient(transport=transport) as http:
        nursery.start_soon(produce)
        client = AnthropicClient(
            api_key="k", http_client=http, idle_timeout=10.0, retry=RetryPolicy.never()
        )
        try:
            async with client.stream(model="m", max_tokens=8, messages=[]) as stream:
                async for item in stream:
                    items.append(item)
                    await trio.sleep(consumer_sleep)
        except StreamIdleTimeoutError as exc:
            error = exc
        nursery.cancel_scope.cancel()
    assert transport.requests == 1
    return items, error, trio.current_time()


async def test_a_body_that_waits_too_long_times_out_in_the_client(autojump_clock: Any) -> None:
    # Three events, then a 25 s gap against a 10 s idle timeout: cut at 10 s.
    items, error, now = await _stream_through_channel([0.0, 0.0, 0.0, 25.0], 0.0)
    assert isinstance(error, StreamIdleTimeoutError)
    assert len(items) == 3
    assert now == pytest.approx(10.0)


async def test_consumer_time_is_not_idle_time_for_a_waiting_body(autojump_clock: Any) -> None:
    # Gaps of 6 s (under the timeout), a consumer taking 30 s per item (over it): no
    # timeout, every item read.
    gaps = [6.0] * len(_event_bytes())
    items, error, _ = await _stream_through_channel(gaps, 30.0)
    assert error is None
    assert isinstance(items[-1], StreamResult)
    assert sum(isinstance(i, StreamEvent) for i in items) == len(_event_bytes())
