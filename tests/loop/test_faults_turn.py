"""Fault matrix rows 7, 11-15: faults during a whole turn (query / Session), nothing lost.

Every case checks the pairing of the history (``check_pairing``) and runs under a
leak check.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import (
    Allow,
    APIStatusError,
    AssistantMessage,
    AttemptDiscarded,
    InternalServerError,
    StreamIdleTimeoutError,
    StreamTruncatedError,
    TextBlock,
    TextDelta,
    Tool,
    ToolContext,
    ToolResult,
    ToolUseBlock,
    TurnControl,
    TurnEnd,
    TurnEndReason,
    TurnOptions,
    UserMessage,
    query,
)
from trio_agent._session._session import Session
from trio_agent._session._transcript import read_transcript
from trio_agent.testing import (
    Faults,
    LeakCheck,
    ScriptedAnswer,
    ScriptedModel,
    Timing,
    check_history,
    no_leaks,
    run_virtual,
)

SLOW = Timing(token_delay=0.1, block_delay=0.1)


class Log:
    def __init__(self) -> None:
        self.started: list[str] = []
        self.ended: dict[str, float] = {}


def act_tool(log: Log, *, duration: float = 5.0, name: str = "Act", safe: bool = False) -> Tool:
    async def run(input: Mapping[str, Any], ctx: ToolContext) -> str:
        log.started.append(ctx.tool_use_id)
        await trio.sleep(duration)
        log.ended[ctx.tool_use_id] = trio.current_time()
        return "acted"

    return Tool(name, "A side effect.", {"type": "object"}, run, concurrency_safe=safe)


def index_of_stop(answer: ScriptedAnswer, block: int) -> int:
    stops = [i for i, e in enumerate(answer.events()) if e["type"] == "content_block_stop"]
    return stops[block]


# -- row 7: in-stream error after text and a finished tool_use ------------------------


async def test_error_event_after_text_and_a_finished_tool_use(
    autojump_clock: Any, turn: Any
) -> None:
    blocks = [TextBlock("Working on it."), ToolUseBlock("a1", "Act", {})]
    plain = ScriptedAnswer(blocks=blocks, timing=SLOW)
    answer = ScriptedAnswer(
        blocks=blocks,
        timing=SLOW,
        faults=Faults(error_event_after=index_of_stop(plain, 1), error_type="api_error"),
    )
    model = ScriptedModel([answer])
    log = Log()
    with no_leaks(models=[model], processes=False):
        events, end = await turn(model.client(), tools=[act_tool(log)])
    assert end.reason is TurnEndReason.ERROR
    assert isinstance(end.error, APIStatusError)
    assert end.error.error_type == "api_error"
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Working on it."
    assert log.started == ["a1"]  # it had started at its content_block_stop
    # (that the started tool's result and the text reach the history: xfail below)


def _cut_after(answer: ScriptedAnswer, k: int) -> int:
    """The byte length of the rendered stream up to and including event *k*."""
    from trio_agent.testing import encode_event

    return len(b"".join(encode_event(e) for e in answer.events()[: k + 1]))


FAILURES = {
    "error_event": (
        lambda plain, k: Faults(error_event_after=k, error_type="api_error"),
        APIStatusError,
    ),
    "disconnect": (
        lambda plain, k: Faults(disconnect_after_byte=_cut_after(plain, k)),
        StreamTruncatedError,
    ),
    "truncated": (lambda plain, k: Faults(truncate=True), StreamTruncatedError),
    "idle_timeout": (
        lambda plain, k: Faults(stall_before_event=k + 1, stall_seconds=1000),
        StreamIdleTimeoutError,
    ),
}


@pytest.mark.parametrize("failure", sorted(FAILURES))
async def test_error_after_a_started_tool_keeps_text_and_pair_in_history(
    autojump_clock: Any, failure: str, turn: Any
) -> None:
    """Nothing lost when every recovery fails: the attempt is discarded (a tombstone
    with the typed error), the last-resort non-streaming request fails too, and
    the turn ends with the text, the started tool's result event, and the finished
    blocks with a result for each tool use in the history."""
    blocks = [TextBlock("Working on it."), ToolUseBlock("a1", "Act", {})]
    plain = ScriptedAnswer(blocks=blocks, timing=SLOW)
    make_faults, error_type = FAILURES[failure]
    answer = ScriptedAnswer(
        blocks=blocks, timing=SLOW, faults=make_faults(plain, index_of_stop(plain, 1))
    )
    model = ScriptedModel([answer])
    log = Log()
    with no_leaks(models=[model], processes=False):
        events, end = await turn(model.client(), tools=[act_tool(log, duration=5000)])
    assert end.reason is TurnEndReason.ERROR
    (tombstone,) = [e for e in events if isinstance(e, AttemptDiscarded)]
    assert isinstance(tombstone.error, error_type)
    assert [b.id for b in tombstone.started_tools] == ["a1"]
    assert [r.body["stream"] for r in model.requests] == [True, False]
    assert isinstance(end.error, InternalServerError)  # the script had no answer left
    assert log.started == ["a1"]
    (result,) = [e for e in events if isinstance(e, ToolResult)]
    assert result.tool_use_id == "a1"
    assert result.started  # it was cancelled while running
    assert result.is_error
    assert "may have partly completed" in str(result.content)
    _, kept, answered = end.messages
    assert isinstance(kept, AssistantMessage)
    assert kept.text == "Working on it."
    assert [u.id for u in kept.tool_uses] == ["a1"]
    assert answered == UserMessage((result.to_block(),))
    # the consumer saw both messages as events, in history order
    assert [e for e in events if isinstance(e, (AssistantMessage, UserMessage))] == [
        kept,
        answered,
    ]


# -- row 11: refusal / error after a side-effecting tool_use block --------------------


@pytest.mark.parametrize("how", ["error", "truncated"])
async def test_error_after_a_queued_side_effect_never_starts_it(
    autojump_clock: Any, how: str, turn: Any
) -> None:
    blocks = [ToolUseBlock("w1", "Act", {}), ToolUseBlock("w2", "Act", {})]
    plain = ScriptedAnswer(blocks=blocks, timing=SLOW)
    k = index_of_stop(plain, 1)
    faults = (
        Faults(error_event_after=k, error_type="overloaded_error")
        if how == "error"
        else Faults(
            disconnect_after_byte=len(
                b"".join(
                    __import__("trio_agent.testing", fromlist=["encode_event"]).encode_event(e)
                    for e in plain.events()[: k + 1]
                )
            )
        )
    )
    model = ScriptedModel([ScriptedAnswer(blocks=blocks, timing=SLOW, faults=faults)])
    log = Log()
    with no_leaks(models=[model], processes=False):
        events, end = await turn(model.client(), tools=[act_tool(log, duration=50)])
    assert log.started == ["w1"]  # w2 waited for w1 (not safe) and never started
    assert end.reason is TurnEndReason.ERROR
    results = {e.tool_use_id: e for e in events if isinstance(e, ToolResult)}
    assert results.get("w2") is None or not results["w2"].started


async def test_refusal_after_a_queued_side_effect_never_starts_it(
    autojump_clock: Any, turn: Any
) -> None:
    blocks = [ToolUseBlock("w1", "Act", {}), ToolUseBlock("w2", "Act", {})]
    model = ScriptedModel([ScriptedAnswer(blocks=blocks, timing=SLOW, stop_reason="refusal")])
    log = Log()
    with no_leaks(models=[model], processes=False):
        events, _end = await turn(model.client(), tools=[act_tool(log, duration=50)])
    assert log.started == ["w1"]  # w1 was running: left alone; w2 was queued behind it
    results = {e.tool_use_id: e for e in events if isinstance(e, ToolResult)}
    assert results["w1"].content == "acted"
    assert results["w2"].is_error
    assert not results["w2"].started
    assert results["w2"].abort_reason is None
    assert "refusal" in str(results["w2"].content)


# -- row 12: cancellation at every checkpoint; KeyboardInterrupt ---------------------


class CancelAfterSteps(trio.abc.Instrument):
    """Cancels *scope* after the k-th task step of the run (any task)."""

    def __init__(self, k: int) -> None:
        self.k = k
        self.steps = 0
        self.scope: trio.CancelScope | None = None

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        self.steps += 1
        if self.steps == self.k and self.scope is not None:
            self.scope.cancel(reason="test")


def session_script() -> list[ScriptedAnswer]:
    return [
        ScriptedAnswer(
            blocks=[
                TextBlock("Two things."),
                ToolUseBlock("r1", "Look", {}),
                ToolUseBlock("w1", "Act", {}),
            ],
            timing=SLOW,
        ),
        ScriptedAnswer(blocks=[TextBlock("Done.")], timing=SLOW),
    ]


def run_cancelled_at(k: int, tmp: Path) -> tuple[int, Session]:
    model = ScriptedModel(session_script())
    log = Log()
    tools = [act_tool(log, name="Look", safe=True, duration=1), act_tool(log, duration=2)]
    session = Session(model.client(), tools, model="m", transcript_path=tmp / f"t{k}.jsonl")
    cancel = CancelAfterSteps(k)

    async def main() -> None:
        trio.lowlevel.add_instrument(cancel)
        with trio.CancelScope() as scope:
            cancel.scope = scope
            async with session.submit("go") as events:
                async for _ in events:
                    pass
        trio.lowlevel.remove_instrument(cancel)

    run_virtual(main, check=LeakCheck(models=[model], processes=False, fds=False))
    session.close()
    check_history(session.messages)
    check_history(read_transcript(tmp / f"t{k}.jsonl").messages)
    return cancel.steps, session


def test_cancellation_at_every_checkpoint_of_a_turn(tmp_path: Path) -> None:
    total, session = run_cancelled_at(10**9, tmp_path)  # never cancelled: count the steps
    assert session.messages[-1].text == "Done."
    stride = max(1, total // 150)
    for k in range(1, total + 1, stride):
        run_cancelled_at(k, tmp_path)


def test_keyboard_interrupt_kills_the_subprocess_and_reraises(tmp_path: Path) -> None:
    """A real SIGINT while a real Bash command runs (real time, a few ms)."""
    from trio_agent.tools import Bash, Workspace

    answer = ScriptedAnswer(
        blocks=[
            TextBlock("Sleeping."),
            ToolUseBlock("b1", "Bash", {"command": "sleep 60 & echo started; sleep 60"}),
        ]
    )
    model = ScriptedModel([answer])
    bash = Bash(Workspace(tmp_path))
    session = Session(model.client(), [bash], model="m", transcript_path=tmp_path / "t.jsonl")

    async def main() -> None:
        async with session.submit("go") as events:
            async for event in events:
                # "started" is printed once bash has started its children
                if type(event).__name__ == "ToolProgress" and "started" in str(event.data):
                    signal.raise_signal(signal.SIGINT)
                    await trio.sleep(5)  # the KeyboardInterrupt comes at this checkpoint
        raise AssertionError("bash never said it started")  # pragma: no cover

    check = LeakCheck(models=[model], adopt_orphans=True, fds=False)  # the transcript stays open
    with check, pytest.raises(KeyboardInterrupt):
        trio.run(main, instruments=[check])
    session.close()
    check_history(session.messages)
    check_history(read_transcript(tmp_path / "t.jsonl").messages)
    assert os.getpid()  # (the leak check above found no process left)


# -- row 13: tools that raise, hang shielded, return garbage -------------------------


async def test_shielded_tool_delays_the_abort_but_loses_nothing(
    autojump_clock: Any, turn: Any
) -> None:
    async def stubborn(input: Any, ctx: ToolContext) -> str:
        try:
            await trio.sleep(100)
        except trio.Cancelled:
            with trio.CancelScope(shield=True):
                await trio.sleep(7)  # cleans up for a while, ignoring the cancel
            raise
        return "never"

    async def raises(input: Any, ctx: ToolContext) -> str:
        raise RuntimeError("tool exploded")

    async def garbage(input: Any, ctx: ToolContext) -> Any:
        return object()

    tools = [
        Tool("Stubborn", "", {"type": "object"}, stubborn, concurrency_safe=True),
        Tool("Raises", "", {"type": "object"}, raises, concurrency_safe=True),
        Tool("Garbage", "", {"type": "object"}, garbage, concurrency_safe=True),
    ]
    model = ScriptedModel(
        [
            ScriptedAnswer(
                blocks=[ToolUseBlock(n.lower(), n, {}) for n in ("Raises", "Garbage", "Stubborn")]
            )
        ]
    )
    control = TurnControl()
    with no_leaks(models=[model], processes=False):
        async with trio.open_nursery() as nursery:

            async def abort_later() -> None:
                await trio.sleep(1)
                control.abort()

            nursery.start_soon(abort_later)
            events, end = await turn(model.client(), tools=tools, control=control)
    assert end.reason is TurnEndReason.ABORTED_TOOLS
    assert trio.current_time() == pytest.approx(8)  # 1 s, then the 7 s shield
    from trio_agent import ToolResultBlock

    answered = end.messages[-1]
    assert isinstance(answered, UserMessage)
    results = {b.tool_use_id: b for b in answered.content if isinstance(b, ToolResultBlock)}
    assert results["raises"].is_error
    assert "tool exploded" in str(results["raises"].content)
    assert results["garbage"].is_error
    assert results["stubborn"].is_error  # a synthetic "cancelled" result
    assert len(events) > 0


# -- row 14: a permission callback that raises or hangs; a consumer that stops ---------


async def test_permission_callback_that_hangs_then_aborted(autojump_clock: Any, turn: Any) -> None:
    async def hangs(tool: Tool, input: Any, ctx: Any) -> Allow:
        await trio.sleep_forever()
        raise AssertionError

    log = Log()
    model = ScriptedModel([ScriptedAnswer(blocks=[ToolUseBlock("a", "Act", {})])])
    control = TurnControl()
    with no_leaks(models=[model], processes=False):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: _abort_at(control, 30))
            _, end = await turn(
                model.client(),
                tools=[act_tool(log)],
                options=TurnOptions(can_use_tool=hangs),
                control=control,
            )
    assert log.started == []
    assert end.reason is TurnEndReason.ABORTED_TOOLS


async def _abort_at(control: TurnControl, t: float) -> None:
    await trio.sleep(t)
    control.abort()


async def test_permission_callback_that_raises_denies(autojump_clock: Any, turn: Any) -> None:
    async def broken(tool: Tool, input: Any, ctx: Any) -> Allow:
        raise ValueError("policy server down")

    log = Log()
    model = ScriptedModel(
        [
            ScriptedAnswer(blocks=[ToolUseBlock("a", "Act", {})]),
            ScriptedAnswer(blocks=[TextBlock("ok")]),
        ]
    )
    events, end = await turn(
        model.client(),
        tools=[act_tool(log)],
        options=TurnOptions(can_use_tool=broken),
    )
    assert log.started == []
    (result,) = [e for e in events if isinstance(e, ToolResult)]
    assert result.is_error
    assert end.reason is TurnEndReason.COMPLETED


async def test_a_consumer_that_stops_reading_does_not_stall_the_tools(
    autojump_clock: Any,
) -> None:
    blocks = [ToolUseBlock(f"r{i}", "Look", {}) for i in range(5)]
    model = ScriptedModel([ScriptedAnswer(blocks=blocks), ScriptedAnswer(blocks=[TextBlock("ok")])])
    log = Log()
    with no_leaks(models=[model], processes=False):
        async with query(
            model.client(),
            [UserMessage("go")],
            tools=[act_tool(log, name="Look", safe=True, duration=1)],
            model="m",
            max_tokens=10,
        ) as stream:
            first_result_at = None
            async for event in stream:
                if isinstance(event, ToolResult) and first_result_at is None:
                    first_result_at = trio.current_time()
                    await trio.sleep(100)  # the consumer goes away for a while
                if isinstance(event, TurnEnd):
                    check_history(event.messages)
    assert sorted(log.ended.values()) == [1.0] * 5  # none waited for the consumer


# -- row 15: transcript crash mid-write ---------------------------------------------
# Covered by tests/test_transcript.py::test_crash_at_every_byte_of_the_last_line and
# ::test_any_crash_point_resumes_to_a_valid_prefix (hypothesis); one gap:


HOSTILE_LINES = {
    "deep": b"[" * 100_000 + b"]" * 100_000,
    "deep_in_a_message": b'{"type":"user","message":{"role":"user","content":'
    + b"[" * 100_000
    + b"]" * 100_000
    + b"}}",
    "huge_int": b'{"type":"user","n":' + b"9" * 5000 + b"}",
}


@pytest.mark.parametrize("hostile", sorted(HOSTILE_LINES))
def test_hostile_transcript_line_is_a_transcript_error(tmp_path: Path, hostile: str) -> None:
    from trio_agent import TranscriptError

    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"type":"user","message":{"role":"user","content":"hi"}}\n')
    with path.open("ab") as f:
        f.write(HOSTILE_LINES[hostile] + b"\n" + b"{}\n")
    with pytest.raises(TranscriptError, match=r"^line 2: "):
        read_transcript(path)


@pytest.mark.parametrize("hostile", sorted(HOSTILE_LINES))
def test_hostile_torn_last_line_is_dropped(tmp_path: Path, hostile: str) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(
        b'{"type":"user","message":{"role":"user","content":"hi"}}\n' + HOSTILE_LINES[hostile]
    )
    transcript = read_transcript(path)
    assert transcript.torn_line
    assert transcript.messages == (UserMessage("hi"),)


@settings(max_examples=25, deadline=None)
@given(at=st.floats(0, 3))
def test_abort_at_any_time_keeps_the_session_paired(at: float, run_turn_acting_at: Any) -> None:
    model = ScriptedModel(session_script())
    log = Log()
    session = Session(
        model.client(),
        [act_tool(log, name="Look", safe=True, duration=1), act_tool(log, duration=2)],
        model="m",
    )

    async def main() -> list[Any]:
        return await run_turn_acting_at(session.submit("go"), session.abort, after=at)

    events = run_virtual(main, check=LeakCheck(models=[model], processes=False))
    assert isinstance(events[-1], TurnEnd)
    check_history(session.messages)
