"""Properties of the bridge under hypothesis: any items, buffer size and consumer
pace cross in order with the buffer bounded; an error at the end arrives once, as
itself; a consumer leaving at any point leaves no Trio task. Plus what the Trio API
does with bad prompts (the same exception types), interrupt() and resume()."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trio_agent
import trio_agent.aio as aio
from trio_agent import TextBlock, ToolProgress, ToolUseBlock, TurnEnd, TurnEndReason
from trio_agent.testing import ScriptedAnswer, ScriptedModel, check_history

from .conftest import MODEL

RunAsyncio = Callable[..., Any]


class Failed(Exception):
    """The producer's error."""


def _producer(items: list[Any], error: BaseException | None, sent: list[Any]) -> Any:
    @contextlib.asynccontextmanager
    async def open_events() -> AsyncIterator[trio.MemoryReceiveChannel[Any]]:
        send, receive = trio.open_memory_channel[Any](0)

        async def produce() -> None:
            async with send:
                for item in items:
                    await send.send(item)
                    sent.append(item)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(produce)
            async with receive:
                yield receive
            nursery.cancel_scope.cancel()
        if error is not None:
            raise error

    return open_events


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    items=st.lists(st.one_of(st.integers(), st.text(max_size=5)), max_size=120),
    capacity=st.integers(1, 9),
    pauses=st.lists(st.integers(0, 4), min_size=1, max_size=20),
    fail=st.booleans(),
    leave_at=st.none() | st.integers(0, 130),
)
def test_items_cross_in_order_bounded(
    run_asyncio: RunAsyncio,
    items: list[Any],
    capacity: int,
    pauses: list[int],
    fail: bool,
    leave_at: int | None,
) -> None:
    error = Failed("at the end") if fail else None
    sent: list[Any] = []
    aborts: list[int] = []

    async def main() -> None:
        got: list[Any] = []
        raised: BaseException | None = None
        stream = aio.TurnStream(_producer(items, error, sent), lambda: aborts.append(1), capacity)
        try:
            async with stream as events:
                async for item in events:
                    stats = events.statistics()
                    assert stats.buffered <= capacity
                    assert stats.max_buffered <= capacity
                    got.append(item)
                    for _ in range(pauses[len(got) % len(pauses)]):
                        await asyncio.sleep(0)  # Trio runs meanwhile
                    if leave_at is not None and len(got) > leave_at:
                        break
        except Failed as exc:
            raised = exc
        run = await aio.current_guest_run()
        assert run.statistics().tasks == 0  # the Trio side ended before the block did
        left = leave_at is not None and leave_at + 1 < len(items)
        if left:
            assert got == items[: leave_at + 1]
            # Aborted, unless the producer had already sent everything (buffered).
            assert aborts == [1] or (aborts == [] and sent == items)
        else:
            assert got == items
            assert sent == items
            # Read to the end: no abort (a break at the last item may still abort,
            # if the producer had not ended yet).
            assert aborts == [] or (aborts == [1] and leave_at is not None)
        # The error, once and as itself: from the stream, or (the consumer left
        # before it) from the block's exit; never lost.
        assert raised is error

    run_asyncio(main)


@pytest.mark.parametrize("bad", [123, b"x", [object()], None])
def test_a_bad_prompt_raises_what_trio_raises(run_asyncio: RunAsyncio, bad: Any) -> None:
    async def consume(session: Any) -> None:
        async with session.submit(bad) as events:
            async for _ in events:
                pass  # pragma: no cover - refused

    def in_trio() -> tuple[type[BaseException], Any]:
        session = trio_agent.Session(ScriptedModel().client(), [], model=MODEL)
        with pytest.raises(Exception) as info:
            trio.run(consume, session)
        return info.type, session.messages

    async def in_asyncio() -> tuple[type[BaseException], Any]:
        session = aio.Session(ScriptedModel().client(), [], model=MODEL)
        with pytest.raises(Exception) as info:
            await consume(session)
        assert not session.running
        return info.type, session.messages

    # The same exception type, and the history left as Trio leaves it.
    assert run_asyncio(in_asyncio) == in_trio()


def test_interrupt_stops_a_cancellable_tool(run_asyncio: RunAsyncio) -> None:
    @trio_agent.tool(interrupt_behavior="cancel")
    async def wait_forever(ctx: trio_agent.ToolContext) -> str:
        """Wait until cancelled."""
        ctx.progress("waiting")
        await trio.sleep_forever()
        return "never"  # pragma: no cover

    async def main() -> None:
        model = ScriptedModel(
            [ScriptedAnswer(blocks=[ToolUseBlock("toolu_1", "wait_forever", {})])]
        )
        session = aio.Session(model.client(), [wait_forever], model=MODEL)
        async with session.submit("wait") as events:
            async for event in events:
                if isinstance(event, ToolProgress):
                    session.interrupt()
        assert isinstance(event, TurnEnd)
        assert event.reason == TurnEndReason.ABORTED_TOOLS
        assert event.abort_reason == "interrupt"
        check_history(session.messages, strict=True)

    run_asyncio(main)


def test_resume_continues_a_transcript(run_asyncio: RunAsyncio, tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"

    async def main() -> None:
        model = ScriptedModel(
            [ScriptedAnswer(blocks=[TextBlock("One.")]), ScriptedAnswer(blocks=[TextBlock("Two.")])]
        )
        async with aio.Session(model.client(), [], model=MODEL, transcript_path=path) as first:
            assert (await first.run("count")).text == "One."
        again = aio.Session.resume(path, model.client(), [])
        assert again.messages == first.messages
        assert (await again.run("go on")).text == "Two."
        assert len(again.messages) == 4
        assert trio_agent.read_transcript(path).messages == again.messages

    run_asyncio(main)
