"""Mid-stream recovery (issue 12, items 1 and 2): a call that fails after content was
delivered is discarded with an AttemptDiscarded tombstone and retried with backoff,
then once without streaming; a failure before any content is retried invisibly.

Every case runs in virtual time against the scripted model, through ``query()`` and
``Session``, and asserts the exact requests (count, ``stream`` flag, ``max_tokens``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import pytest
import trio

from trio_agent import (
    AbortReason,
    AssistantMessage,
    AttemptDiscarded,
    BlockFinished,
    InternalServerError,
    OverloadedError,
    RetryPolicy,
    Session,
    StreamIdleTimeoutError,
    StreamTruncatedError,
    TextBlock,
    TextDelta,
    Tool,
    ToolContext,
    ToolResult,
    ToolUseBlock,
    Transition,
    TransitionReason,
    TurnEnd,
    TurnEndReason,
    UserMessage,
)
from trio_agent.testing import (
    Faults,
    RawAnswer,
    ScriptedAnswer,
    ScriptedModel,
    Timing,
    encode_event,
    no_leaks,
)

SLOW = Timing(token_delay=0.1, block_delay=0.1)
#: Exact backoff: 0.5 s, 1 s, 2 s...
EXACT = RetryPolicy(max_retries=2, jitter=(1.0, 1.0))


def act_tool(started: list[str], *, duration: float = 5.0) -> Tool:
    async def run(input: Mapping[str, Any], ctx: ToolContext) -> str:
        started.append(ctx.tool_use_id)
        await trio.sleep(duration)
        return "acted"

    return Tool("Act", "A side effect.", {"type": "object"}, run)


def acting(tool_id: str, text: str = "Working on it.", **kw: Any) -> ScriptedAnswer:
    return ScriptedAnswer(blocks=[TextBlock(text), ToolUseBlock(tool_id, "Act", {})], **kw)


def cut_after_block(answer: ScriptedAnswer, block: int) -> int:
    """The byte length of *answer*'s stream up to its *block*-th content_block_stop."""
    events = answer.events()
    stops = [i for i, e in enumerate(events) if e["type"] == "content_block_stop"]
    return len(b"".join(encode_event(e) for e in events[: stops[block] + 1]))


def faulty(tool_id: str, how: str) -> ScriptedAnswer:
    """An answer whose text and tool_use stream fully, then *how* breaks it."""
    plain = acting(tool_id, timing=SLOW)
    stops = [i for i, e in enumerate(plain.events()) if e["type"] == "content_block_stop"]
    faults = {
        "reset": Faults(disconnect_after_byte=cut_after_block(plain, 1)),
        "truncated": Faults(truncate=True),
        "overloaded": Faults(error_event_after=stops[1], error_type="overloaded_error"),
        "api_error": Faults(error_event_after=stops[1], error_type="api_error"),
        "idle_timeout": Faults(stall_before_event=stops[1] + 1, stall_seconds=1000),
    }[how]
    return acting(tool_id, timing=SLOW, faults=faults)


ERRORS: dict[str, type[Exception]] = {
    "reset": StreamTruncatedError,
    "truncated": StreamTruncatedError,
    "overloaded": OverloadedError,
    "api_error": InternalServerError,
    "idle_timeout": StreamIdleTimeoutError,
}


@pytest.fixture(scope="module")
def timed_turn(turn: Any) -> Callable[..., Awaitable[tuple[list[Any], list[float], TurnEnd]]]:
    """``events, times, end = await timed_turn(model, tools, retry=EXACT, **query_kw)``:
    ``turn`` on a client with *retry* and a 20 s idle timeout, with the (virtual)
    time each event arrived, every finished tool_use answered (``check_answered``)."""

    async def timed_turn(
        model: ScriptedModel, tools: Sequence[Tool], *, retry: RetryPolicy = EXACT, **kw: Any
    ) -> tuple[list[Any], list[float], TurnEnd]:
        times: list[float] = []
        events, end = await turn(
            model.client(retry=retry, idle_timeout=20),
            tools=tools,
            on_event=lambda _: times.append(trio.current_time()),
            **kw,
        )
        check_answered(events)
        return events, times, end

    return timed_turn


def check_answered(events: Sequence[Any]) -> None:
    """Every tool_use the consumer saw finish streaming got exactly one ToolResult."""
    announced = [
        e.block.id for e in events if isinstance(e, BlockFinished) and e.block.type == "tool_use"
    ]
    answered = [e.tool_use_id for e in events if isinstance(e, ToolResult)]
    assert sorted(answered) == sorted(announced)
    assert len(set(answered)) == len(answered)


# -- item 1: after content, discard, tombstone, retry -------------------------------------


@pytest.mark.parametrize("how", sorted(ERRORS))
async def test_a_mid_stream_failure_is_discarded_and_retried(
    autojump_clock: Any, how: str, timed_turn: Any
) -> None:
    model = ScriptedModel([faulty("x1", how), ScriptedAnswer(blocks=[TextBlock("All done.")])])
    started: list[str] = []
    with no_leaks(models=[model], processes=False):
        events, times, end = await timed_turn(model, [act_tool(started, duration=5000)])
    assert end.reason is TurnEndReason.COMPLETED
    # one tombstone for the first call, naming the error and the started tool
    (tombstone,) = [e for e in events if isinstance(e, AttemptDiscarded)]
    assert tombstone.reason is TransitionReason.STREAM_RETRY
    assert tombstone.model_call == 1
    assert isinstance(tombstone.error, ERRORS[how])
    assert [b.id for b in tombstone.started_tools] == ["x1"]
    assert started == ["x1"]
    # its tool was cancelled as a streaming fallback, and still answered
    (result,) = [e for e in events if isinstance(e, ToolResult)]
    assert result.abort_reason is AbortReason.STREAMING_FALLBACK
    assert result.started
    assert result.is_error
    # the tombstone comes after everything of the attempt, before the retry's events
    at = events.index(tombstone)
    assert isinstance(events[at + 1], Transition)
    assert events[at + 1].reason is TransitionReason.STREAM_RETRY
    assert not any(isinstance(e, TextDelta | BlockFinished) for e in events[at : at + 2])
    # the retry waited the policy's first backoff (exactly 0.5 s) before its request
    first_after = next(i for i in range(at + 1, len(events)) if isinstance(events[i], TextDelta))
    assert times[first_after] - times[at] >= 0.5
    # exactly one assistant message for the call: the successful one
    assert end.messages == (UserMessage("go"), model_message(end, "All done."))
    assert [e for e in events if isinstance(e, AssistantMessage)] == [end.messages[1]]
    # two streamed requests of the same body
    assert [r.body["stream"] for r in model.requests] == [True, True]
    assert [r.body["max_tokens"] for r in model.requests] == [100, 100]
    assert model.requests[0].body["messages"] == model.requests[1].body["messages"]


def model_message(end: TurnEnd, text: str) -> AssistantMessage:
    (message,) = [m for m in end.messages if isinstance(m, AssistantMessage)]
    assert message.text == text
    return message


async def test_after_the_retries_one_non_streaming_request_whose_tools_run_after_it(
    autojump_clock: Any, timed_turn: Any
) -> None:
    answers = [faulty(f"x{i}", "reset") for i in range(3)]
    final = ScriptedAnswer(blocks=[TextBlock("Acting."), ToolUseBlock("a1", "Act", {})])
    model = ScriptedModel([*answers, final, ScriptedAnswer(blocks=[TextBlock("Done.")])])
    started: list[str] = []
    events, times, end = await timed_turn(model, [act_tool(started, duration=3)])
    assert end.reason is TurnEndReason.COMPLETED
    transitions = [e.reason for e in events if isinstance(e, Transition)]
    assert transitions == [
        TransitionReason.STREAM_RETRY,
        TransitionReason.STREAM_RETRY,
        TransitionReason.NON_STREAMING_FALLBACK,
        TransitionReason.NEXT_TURN,
    ]
    tombstones = [e for e in events if isinstance(e, AttemptDiscarded)]
    assert [t.model_call for t in tombstones] == [1, 2, 3]
    assert [t.reason for t in tombstones] == transitions[:3]
    # 3 streamed attempts (max_retries=2), then stream: false, then the next turn
    assert [r.body["stream"] for r in model.requests] == [True, True, True, False, True]
    assert [r.body["max_tokens"] for r in model.requests] == [100] * 5
    # the non-streamed answer's tool ran once it had arrived, and only then
    assert started == ["x0", "x1", "x2", "a1"]
    last_tombstone = events.index(tombstones[-1])
    finished = next(
        i
        for i, e in enumerate(events)
        if isinstance(e, BlockFinished) and isinstance(e.block, ToolUseBlock) and e.block.id == "a1"
    )
    # the non-streamed answer came whole: no delta between the tombstone and its blocks
    assert last_tombstone < finished
    assert not any(isinstance(e, TextDelta) for e in events[last_tombstone:finished])
    # the history: one assistant message per successful call, every tool answered
    kinds = [type(m).__name__ for m in end.messages]
    assert kinds == ["UserMessage", "AssistantMessage", "UserMessage", "AssistantMessage"]
    assert [u.id for u in end.messages[1].tool_uses] == ["a1"]  # type: ignore[union-attr]
    # backoffs 0.5 s then 1 s, and no backoff is skipped
    assert times[-1] >= 0.5 + 1.0 + 3


async def test_when_every_recovery_fails_the_turn_ends_with_the_last_error(
    autojump_clock: Any, timed_turn: Any
) -> None:
    # three broken streams; the non-streaming request finds the script exhausted
    model = ScriptedModel([faulty(f"x{i}", "reset") for i in range(3)])
    started: list[str] = []
    events, _, end = await timed_turn(model, [act_tool(started, duration=50)])
    assert started == ["x0", "x1", "x2"]
    assert len([e for e in events if isinstance(e, AttemptDiscarded)]) == 3
    assert end.reason is TurnEndReason.ERROR
    assert isinstance(end.error, InternalServerError)
    assert len(model.requests) == 4
    assert model.requests[-1].body["stream"] is False
    # the last discarded attempt's finished blocks are kept, their tool answered
    _, kept, answered = end.messages
    assert isinstance(kept, AssistantMessage)
    assert [u.id for u in kept.tool_uses] == ["x2"]
    assert isinstance(answered, UserMessage)
    assert [b.tool_use_id for b in answered.tool_results] == ["x2"]


async def test_without_retries_the_non_streaming_request_comes_at_once(
    autojump_clock: Any, timed_turn: Any
) -> None:
    model = ScriptedModel([faulty("x1", "truncated"), ScriptedAnswer(blocks=[TextBlock("Ok.")])])
    events, _, end = await timed_turn(model, [act_tool([])], retry=RetryPolicy.never())
    assert end.reason is TurnEndReason.COMPLETED
    assert [e.reason for e in events if isinstance(e, Transition)] == [
        TransitionReason.NON_STREAMING_FALLBACK
    ]
    assert [r.body["stream"] for r in model.requests] == [True, False]
    assert model_message(end, "Ok.").text == "Ok."


async def test_an_abort_during_the_backoff_ends_the_turn(autojump_clock: Any, turn: Any) -> None:
    from trio_agent import TurnControl

    control = TurnControl()
    model = ScriptedModel([faulty("x1", "reset"), ScriptedAnswer(blocks=[TextBlock("never")])])

    def abort_at_the_tombstone(event: Any) -> None:
        if isinstance(event, AttemptDiscarded):
            control.abort()

    events, end = await turn(
        model.client(retry=RetryPolicy(max_retries=2, initial_delay=30, jitter=(1.0, 1.0))),
        tools=[act_tool([])],
        control=control,
        on_event=abort_at_the_tombstone,
    )
    assert end.reason is TurnEndReason.ABORTED_STREAMING
    assert len(model.requests) == 1
    check_answered(events)


async def test_the_session_keeps_one_assistant_message_per_call(
    autojump_clock: Any, tmp_path: Any
) -> None:
    model = ScriptedModel([faulty("x1", "api_error"), ScriptedAnswer(blocks=[TextBlock("Done.")])])
    session = Session(
        model.client(retry=EXACT),
        [act_tool([])],
        model="m",
        max_tokens=100,
        transcript_path=tmp_path / "t.jsonl",
    )
    async with session.submit("go") as events:
        seen = [e async for e in events]
    assert any(isinstance(e, AttemptDiscarded) for e in seen)
    assert [type(m).__name__ for m in session.messages] == ["UserMessage", "AssistantMessage"]
    assert session.messages[-1].text == "Done."  # type: ignore[union-attr]
    assert [r.body["stream"] for r in model.requests] == [True, True]
    resumed = Session.resume(tmp_path / "t.jsonl", model.client(), [])
    assert resumed.messages == session.messages


# -- item 2: before any content, retried invisibly -----------------------------------------


def _start_only(cut: int | None) -> RawAnswer:
    """A 200 whose body stops inside (or right after) ``message_start``."""
    start = encode_event(ScriptedAnswer(blocks=[TextBlock("x")]).events()[0])
    data = start if cut is None else start[:cut]
    return RawAnswer(chunks=[(0.0, data)], disconnect=cut is not None)


@pytest.mark.parametrize("cut", [None, 0, 10, 40])
async def test_a_body_cut_before_content_is_retried_invisibly(
    autojump_clock: Any, cut: int | None, timed_turn: Any
) -> None:
    model = ScriptedModel([_start_only(cut), ScriptedAnswer(blocks=[TextBlock("Fine.")])])
    events, _, end = await timed_turn(model, [])
    assert end.reason is TurnEndReason.COMPLETED
    # nothing to drop, nothing to say: no tombstone, no transition
    assert not [e for e in events if isinstance(e, AttemptDiscarded | Transition)]
    assert len(model.requests) == 2
    assert [r.body["stream"] for r in model.requests] == [True, True]


async def test_an_empty_body_is_retried_invisibly(autojump_clock: Any, timed_turn: Any) -> None:
    model = ScriptedModel(
        [RawAnswer(chunks=[(0.0, b"")]), ScriptedAnswer(blocks=[TextBlock("Fine.")])]
    )
    events, _, end = await timed_turn(model, [])
    assert end.reason is TurnEndReason.COMPLETED
    assert not [e for e in events if isinstance(e, AttemptDiscarded)]
    assert len(model.requests) == 2
