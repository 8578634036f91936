"""The asyncio bridge itself (trio_agent.aio), under plain asyncio.run: the same
events as Trio, backpressure with bounded memory, cancellation both ways,
exceptions kept, consumers that leave early, the run's start and stop.

Real time with zero-delay scripts (a MockClock would autojump while Trio waits on
asyncio, which virtual time cannot see); the subprocesses are real.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trio_agent
import trio_agent.aio as aio
from trio_agent import (
    AuthenticationError,
    TextBlock,
    TextDelta,
    ToolProgress,
    ToolUseBlock,
    TurnEnd,
    TurnEndReason,
    UserMessage,
)
from trio_agent.testing import (
    HTTPErrorAnswer,
    ScriptedAnswer,
    ScriptedModel,
    Timing,
    check_history,
    process_exited,
)
from trio_agent.tools import Bash, Workspace

from .conftest import MODEL

RunAsyncio = Callable[..., Any]


def _tool_turn(tmp_path: Path, command: str) -> tuple[ScriptedModel, list[trio_agent.Tool]]:
    model = ScriptedModel(
        [
            ScriptedAnswer(
                blocks=[
                    TextBlock("Let me run it."),
                    ToolUseBlock("toolu_1", "Bash", {"command": command}),
                ]
            ),
            ScriptedAnswer(blocks=[TextBlock("Done.")]),
        ]
    )
    return model, [Bash(Workspace(tmp_path))]


def _kinds(events: list[Any]) -> list[str]:
    return [type(e).__name__ for e in events]


def test_submit_gives_the_events_trio_gives(run_asyncio: RunAsyncio, tmp_path: Path) -> None:
    async def in_trio() -> list[Any]:
        model, tools = _tool_turn(tmp_path, "echo hi")
        session = trio_agent.Session(model.client(), tools, model=MODEL)
        async with session.submit("go") as events:
            return [e async for e in events]

    async def in_asyncio() -> tuple[list[Any], aio.Session]:
        model, tools = _tool_turn(tmp_path, "echo hi")
        session = aio.Session(model.client(), tools, model=MODEL)
        async with session.submit("go") as events:
            got = [e async for e in events]
        assert not session.running
        return got, session

    expected = trio.run(in_trio)
    got, session = run_asyncio(in_asyncio)
    assert _kinds(got) == _kinds(expected)
    assert isinstance(got[-1], TurnEnd)
    assert got[-1].reason == TurnEndReason.COMPLETED
    assert got[-1].messages == session.messages == expected[-1].messages
    progress = [e for e in got if isinstance(e, ToolProgress)]
    assert [p.data for p in progress] == ["hi"]


def test_run_returns_the_result_and_raises_the_turns_error(run_asyncio: RunAsyncio) -> None:
    async def main() -> None:
        model = ScriptedModel(
            [ScriptedAnswer(blocks=[TextBlock("Hello.")]), HTTPErrorAnswer(status=401)]
        )
        session = aio.Session(model.client(), [], model=MODEL)
        result = await session.run("hi")
        assert result.end.reason == TurnEndReason.COMPLETED
        assert result.text == "Hello."
        with pytest.raises(AuthenticationError):
            await session.run("again")
        check_history(session.messages)
        assert len(model.requests) == 2

    run_asyncio(main)


def test_an_error_of_the_trio_side_is_the_same_exception(run_asyncio: RunAsyncio) -> None:
    class Boom(Exception):
        pass

    boom = Boom("in trio")

    async def fails() -> None:
        await trio.sleep(0)
        raise boom

    async def main() -> None:
        with pytest.raises(Boom) as info:
            await aio.run_in_trio(fails)
        assert info.value is boom
        assert await aio.run_in_trio(trio.to_thread.run_sync, lambda: 42) == 42
        # The turn's own refusals raise at the async with, as in Trio.
        model = ScriptedModel(
            [ScriptedAnswer(blocks=[TextBlock("x")], timing=Timing(token_delay=0.01))]
        )
        session = aio.Session(model.client(), [], model=MODEL)
        async with session.submit("one") as events:
            with pytest.raises(trio.BusyResourceError):
                async with session.submit("two"):
                    pass  # pragma: no cover
            async for _ in events:
                pass
        with pytest.raises(trio_agent.ApprovalError):
            async with session.submit(approvals={}):
                pass  # pragma: no cover

    run_asyncio(main)


def test_an_error_raised_in_the_turn_reaches_the_consumer(run_asyncio: RunAsyncio) -> None:
    """A transcript that cannot be written fails the turn in Trio (``receive``
    raises); asyncio gets that exception object from its ``async for``."""

    async def main() -> None:
        model = ScriptedModel([ScriptedAnswer(blocks=[TextBlock("Hello there.")])])
        session = aio.Session(model.client(), [], model=MODEL, transcript_path="/proc/nope/t.jsonl")

        async def consume() -> None:
            async with session.submit("hi") as events:
                async for _ in events:
                    pass  # pragma: no cover - the transcript fails at the prompt

        with pytest.raises(OSError):
            await consume()
        assert not session.running
        check_history(session.messages)

    run_asyncio(main)


def test_backpressure_bounds_the_buffer(run_asyncio: RunAsyncio) -> None:
    text = "word " * 1500  # ~1900 TextDelta events at 4 characters each

    async def main() -> None:
        model = ScriptedModel([ScriptedAnswer(blocks=[TextBlock(text)])])
        session = aio.Session(model.client(), [], model=MODEL)
        waited = 0
        async with session.submit("talk", max_buffered=8) as events:
            async for event in events:
                stats = events.statistics()
                assert stats.buffered <= 8
                assert stats.sent - stats.received <= 8
                waited += stats.sender_waiting
                for _ in range(3):  # a slow consumer: Trio runs meanwhile
                    await asyncio.sleep(0)
                if isinstance(event, TurnEnd):
                    assert event.reason == TurnEndReason.COMPLETED
        stats = events.statistics()
        assert stats.max_buffered <= 8
        assert stats.sent == stats.received > 1500
        assert waited > 100  # the turn did wait for the consumer, many times
        assert (
            "".join(b.text for b in session.messages[-1].content if isinstance(b, TextBlock))
            == text
        )

    run_asyncio(main)


def test_a_consumer_leaving_early_aborts_the_turn(run_asyncio: RunAsyncio, tmp_path: Path) -> None:
    async def main() -> None:
        model, tools = _tool_turn(tmp_path, "echo $$; exec sleep 30")
        session = aio.Session(model.client(), tools, model=MODEL)
        async with session.submit("go") as events:
            async for event in events:
                if isinstance(event, ToolProgress):
                    pid = int(event.data)
                    break
        # The block is left only once the turn ended: the process is gone.
        assert process_exited(pid, timeout=0)
        assert not session.running
        check_history(session.messages)
        last = session.messages[-1]
        assert isinstance(last, UserMessage)
        assert len(model.requests) == 1  # the turn did not go on
        # The run stays up for the next turn, with nothing of this one left in it.
        assert (await aio.current_guest_run()).statistics().tasks == 0

    run_asyncio(main)


async def _cancel_at_pid(
    session: aio.Session, cancel: Callable[[asyncio.Task[Any]], None]
) -> tuple[int, BaseException | None]:
    pid_seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def consume() -> None:
        async with session.submit("go") as events:
            async for event in events:
                if isinstance(event, ToolProgress) and not pid_seen.done():
                    pid_seen.set_result(int(event.data))

    task = asyncio.create_task(consume())
    pid = await pid_seen
    assert not process_exited(pid, timeout=0)
    cancel(task)
    try:
        await task
    except BaseException as exc:
        return pid, exc
    return pid, None  # pragma: no cover - the test fails on it


def test_cancelling_the_asyncio_task_aborts_the_turn_first(
    run_asyncio: RunAsyncio, tmp_path: Path
) -> None:
    async def main() -> None:
        model, tools = _tool_turn(tmp_path, "echo $$; exec sleep 30")
        session = aio.Session(model.client(), tools, model=MODEL)
        pid, exc = await _cancel_at_pid(session, lambda task: task.cancel())
        assert isinstance(exc, asyncio.CancelledError)
        # When the await returned, the abort had completed.
        assert process_exited(pid, timeout=0)
        assert not session.running
        check_history(session.messages, strict=True)
        result = session.messages[-1]
        assert isinstance(result, UserMessage)
        assert result.content[0].is_error  # type: ignore[union-attr]

    run_asyncio(main)


def test_anyio_level_cancellation_waits_for_the_abort_too(
    run_asyncio: RunAsyncio, tmp_path: Path
) -> None:
    """anyio (so Starlette) cancels the task again at every loop iteration until it
    leaves the scope: the wait for the abort holds through every one."""

    async def main() -> None:
        model, tools = _tool_turn(tmp_path, "echo $$; exec sleep 30")
        session = aio.Session(model.client(), tools, model=MODEL)
        pid = 0
        with anyio.CancelScope() as scope:
            async with session.submit("go") as events:
                async for event in events:
                    if isinstance(event, ToolProgress):
                        pid = int(event.data)
                        scope.cancel()
        assert scope.cancelled_caught
        assert pid
        assert process_exited(pid, timeout=0)
        assert not session.running
        check_history(session.messages, strict=True)

    run_asyncio(main)


def test_run_cancelled_aborts_the_turn(run_asyncio: RunAsyncio, tmp_path: Path) -> None:
    async def main() -> None:
        fifo = tmp_path / "pid"
        os.mkfifo(fifo)
        model, tools = _tool_turn(tmp_path, f"echo $$ > {fifo}; exec sleep 30")
        session = aio.Session(model.client(), tools, model=MODEL)
        task = asyncio.create_task(session.run("go"))
        # Blocks (in a thread) until the command has written its pid: no polling.
        pid = int(await asyncio.to_thread(fifo.read_text))
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert process_exited(pid, timeout=0)
        assert not session.running
        check_history(session.messages, strict=True)

    run_asyncio(main)


def test_stopping_the_run_ends_its_turns_and_calls(run_asyncio: RunAsyncio, tmp_path: Path) -> None:
    """Trio -> asyncio: the run stopping (an app's shutdown) aborts the turn, whose
    consumer sees its TurnEnd; a call in flight gets GuestRunClosedError."""

    async def main() -> None:
        model, tools = _tool_turn(tmp_path, "echo $$; exec sleep 30")
        session = aio.Session(model.client(), tools, model=MODEL)
        async with aio.open_guest_run() as run:
            sleeper = asyncio.create_task(aio.run_in_trio(trio.sleep_forever))
            got: list[Any] = []
            async with session.submit("go") as events:
                async for event in events:
                    got.append(event)
                    if isinstance(event, ToolProgress):
                        stopper = asyncio.create_task(run.aclose())
        await stopper
        assert run.stopped
        assert run.statistics() == aio.GuestRunStatistics("stopped", 0, 0)
        end = got[-1]
        assert isinstance(end, TurnEnd)
        assert end.reason == TurnEndReason.ABORTED_TOOLS
        pid = int(next(e.data for e in got if isinstance(e, ToolProgress)))
        assert process_exited(pid, timeout=0)
        with pytest.raises(aio.GuestRunClosedError):
            await sleeper
        check_history(session.messages, strict=True)
        # A new use starts a new run.
        assert await aio.run_in_trio(trio.sleep, 0) is None
        assert await aio.current_guest_run() is not run

    run_asyncio(main)


def test_the_loops_shutdown_stops_the_run(tmp_path: Path) -> None:
    """asyncio.run cancels the tasks it left at its end: the turn still running is
    aborted and the run stops before asyncio.run returns."""
    seen: dict[str, Any] = {}

    async def main() -> None:
        model, tools = _tool_turn(tmp_path, "echo $$; exec sleep 30")
        session = seen["session"] = aio.Session(model.client(), tools, model=MODEL)
        pid: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        async def consume() -> None:
            async with session.submit("go") as events:
                async for event in events:
                    if isinstance(event, ToolProgress):
                        pid.set_result(int(event.data))

        seen["task"] = asyncio.create_task(consume())
        seen["pid"] = await pid
        seen["run"] = await aio.current_guest_run()
        # main returns with the turn still running

    asyncio.run(main())
    assert seen["run"].stopped
    assert seen["task"].cancelled()
    assert process_exited(seen["pid"], timeout=0)
    assert not seen["session"].running
    check_history(seen["session"].messages, strict=True)


def test_open_in_trio_holds_a_trio_context(run_asyncio: RunAsyncio) -> None:
    log: list[str] = []

    class Broken(Exception):
        pass

    class Manager:
        def __init__(self, fail: bool) -> None:
            self.fail = fail

        async def __aenter__(self) -> trio.Nursery:
            self.cm = trio.open_nursery()
            nursery = await self.cm.__aenter__()
            if self.fail:
                await self.cm.__aexit__(None, None, None)
                raise Broken
            log.append("enter")
            return nursery

        async def __aexit__(self, *exc: object) -> None:
            await self.cm.__aexit__(None, None, None)
            log.append("exit")

    async def main() -> None:
        async with aio.open_in_trio(Manager, False) as nursery:
            assert isinstance(nursery, trio.Nursery)
            assert log == ["enter"]
        assert log == ["enter", "exit"]
        with pytest.raises(Broken):
            async with aio.open_in_trio(Manager, True):
                pass  # pragma: no cover

    run_asyncio(main)


def test_bad_arguments_raise_clear_errors(run_asyncio: RunAsyncio) -> None:
    async def main() -> None:
        session = aio.Session(ScriptedModel().client(), [], model=MODEL)
        for bad, error in [
            (0, ValueError),
            (-3, ValueError),
            (1.5, TypeError),
            (True, TypeError),
            ("8", TypeError),
        ]:
            with pytest.raises(error, match="max_buffered"):
                session.submit("x", max_buffered=bad)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="TurnControl"):
            aio.query(
                ScriptedModel().client(),
                [],
                tools=[],
                model=MODEL,
                control=trio_agent.TurnControl(),
            )
        with pytest.raises(TypeError):
            aio.Session(ScriptedModel().client(), [], model=MODEL, bogus=1)
        with pytest.raises(TypeError, match="wrap"):
            aio.Session.wrap(object())  # type: ignore[arg-type]

    run_asyncio(main)


def test_query_streams_a_turn(run_asyncio: RunAsyncio) -> None:
    async def main() -> None:
        model = ScriptedModel([ScriptedAnswer(blocks=[TextBlock("Four.")])])
        async with aio.query(
            model.client(), [UserMessage("2+2?")], tools=[], model=MODEL
        ) as events:
            got = [e async for e in events]
        assert "".join(e.text for e in got if isinstance(e, TextDelta)) == "Four."
        assert isinstance(got[-1], TurnEnd)
        assert got[-1].reason == TurnEndReason.COMPLETED

    run_asyncio(main)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(leave_at=st.integers(0, 40), how=st.sampled_from(["break", "cancel", "raise", "abort"]))
def test_leaving_at_any_event_keeps_the_history_valid(
    run_asyncio: RunAsyncio, tmp_path: Path, leave_at: int, how: str
) -> None:
    """Leave (break, cancellation, an exception, or abort()) after any event of a
    two-tool turn: the block is left with the turn over and the history valid."""

    class Leave(Exception):
        pass

    async def main() -> None:
        model = ScriptedModel(
            [
                ScriptedAnswer(
                    blocks=[
                        TextBlock("Two commands."),
                        ToolUseBlock("toolu_a", "Bash", {"command": "echo a"}),
                        ToolUseBlock("toolu_b", "Bash", {"command": "echo $$; exec sleep 30"}),
                    ]
                ),
                ScriptedAnswer(blocks=[TextBlock("Both ran.")]),
            ]
        )
        session = aio.Session(model.client(), [Bash(Workspace(tmp_path))], model=MODEL)
        pids: list[int] = []
        ended: TurnEndReason | None = None

        async def consume() -> None:
            nonlocal ended
            async with session.submit("go", max_buffered=2) as events:
                index = 0
                async for event in events:
                    sleeper = isinstance(event, ToolProgress) and re.fullmatch(
                        r"\d+", str(event.data)
                    )
                    if sleeper:
                        pids.append(int(event.data))
                    if isinstance(event, TurnEnd):
                        ended = event.reason
                    # At event leave_at, or at the sleeper's pid at the latest (the
                    # turn goes no further on its own).
                    if index == leave_at or (sleeper and index < leave_at):
                        if how == "break":
                            break
                        if how == "raise":
                            raise Leave
                        if how == "abort":
                            session.abort()
                        if how == "cancel":
                            asyncio.current_task().cancel()  # type: ignore[union-attr]
                    index += 1

        with contextlib.suppress(Leave, asyncio.CancelledError):
            await consume()
        assert not session.running
        for pid in pids:
            assert process_exited(pid, timeout=0)
        check_history(session.messages, strict=True)
        assert len(model.requests) == 1  # the sleeper never finished: no second call
        if how == "abort":  # the consumer read on: the turn's own end came
            assert ended in (TurnEndReason.ABORTED_STREAMING, TurnEndReason.ABORTED_TOOLS)
        else:
            assert ended is None

    run_asyncio(main)


def test_a_cancelled_run_in_trio_waits_for_the_trio_side(run_asyncio: RunAsyncio) -> None:
    log: list[str] = []

    async def sleeper(started: asyncio.Future[None]) -> None:
        try:
            started.set_result(None)  # an asyncio future: Trio runs in the loop's thread
            await trio.sleep_forever()
        finally:
            log.append("trio side cancelled")
            with trio.CancelScope(shield=True):
                await trio.sleep(0.01)  # a cleanup that takes time
            log.append("trio side done")

    async def main() -> None:
        started = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(aio.run_in_trio(sleeper, started))
        await started
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert log == ["trio side cancelled", "trio side done"]

    run_asyncio(main)


def test_leaving_an_aio_query_early_aborts_it(run_asyncio: RunAsyncio, tmp_path: Path) -> None:
    async def main() -> None:
        model, tools = _tool_turn(tmp_path, "echo $$; exec sleep 30")
        got: list[Any] = []
        async with aio.query(
            model.client(), [UserMessage("go")], tools=tools, model=MODEL
        ) as events:
            async for event in events:
                got.append(event)
                if isinstance(event, ToolProgress):
                    break
        assert process_exited(int(got[-1].data), timeout=0)
        assert (await aio.current_guest_run()).statistics().tasks == 0
        assert len(model.requests) == 1

    run_asyncio(main)


def test_aio_run_returns_raises_and_aborts(run_asyncio: RunAsyncio, tmp_path: Path) -> None:
    async def main() -> None:
        model = ScriptedModel(
            [ScriptedAnswer(blocks=[TextBlock("Four.")]), HTTPErrorAnswer(status=401)]
        )
        result = await aio.run(model.client(), "2+2?", model=MODEL)
        assert result.text == "Four."
        with pytest.raises(AuthenticationError):
            await aio.run(model.client(), "again", model=MODEL)
        with pytest.raises(TypeError, match="TurnControl"):
            await aio.run(model.client(), "x", model=MODEL, control=trio_agent.TurnControl())
        # Cancelled mid-tool: the turn is aborted and over (its process gone) first.
        fifo = tmp_path / "pid"
        os.mkfifo(fifo)
        slow, tools = _tool_turn(tmp_path, f"echo $$ > {fifo}; exec sleep 30")
        task = asyncio.create_task(aio.run(slow.client(), "go", tools=tools, model=MODEL))
        pid = int(await asyncio.to_thread(fifo.read_text))
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert process_exited(pid, timeout=0)
        assert len(slow.requests) == 1

    run_asyncio(main)
