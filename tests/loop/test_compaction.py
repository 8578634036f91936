"""The built-in compactor (issue 12, item 6): the model summarises the earlier
history, keeping the last messages and every tool_use/tool_result pair; used
reactively on prompt-too-long and proactively past ``auto_compact``; a failing
compactor surfaces the original PromptTooLongError with its error attached."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from hypothesis import example, given, settings
from hypothesis import strategies as st

from trio_agent import (
    AssistantMessage,
    Compacted,
    CompactionError,
    InternalServerError,
    Message,
    PromptTooLongError,
    Session,
    TextBlock,
    Tool,
    ToolContext,
    ToolResultBlock,
    ToolUseBlock,
    Transition,
    TransitionReason,
    TurnEndReason,
    TurnOptions,
    Usage,
    UserMessage,
    summarizing_compactor,
)
from trio_agent._loop._compact import SUMMARY_PREFIX, SUMMARY_PROMPT, split_for_compaction
from trio_agent._loop._recovery import MAX_CONSECUTIVE_COMPACT_FAILURES
from trio_agent.testing import HTTPErrorAnswer, ScriptedAnswer, ScriptedModel, check_history

TOO_LONG = HTTPErrorAnswer(
    status=400,
    body={
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "prompt is too long: 9 > 8"},
    },
)
SUMMARY = ScriptedAnswer(blocks=[TextBlock("The user asked for r1 and r2; both were read.")])
DONE = ScriptedAnswer(blocks=[TextBlock("Done.")])


def round_trip(n: int) -> tuple[AssistantMessage, UserMessage]:
    use = AssistantMessage(
        id=f"msg_{n}",
        model="m",
        content=[TextBlock(f"Reading {n}."), ToolUseBlock(f"r{n}", "Read", {})],
        stop_reason="tool_use",
    )
    return use, UserMessage([ToolResultBlock(f"r{n}", f"contents {n}")])


HISTORY: tuple[Message, ...] = (
    UserMessage("Read r1, r2 and r3."),
    *round_trip(1),
    *round_trip(2),
    *round_trip(3),
)


def read_tool() -> Tool:
    async def read(input: Mapping[str, Any], ctx: ToolContext) -> str:
        return "contents"

    return Tool("Read", "Read.", {"type": "object"}, read, concurrency_safe=True)


@pytest.fixture(scope="module")
def compacting_turn(turn: Any) -> Callable[..., Awaitable[list[Any]]]:
    """``await compacting_turn(scripted, messages=HISTORY, options=None)``: the
    events of a turn with the Read tool and the built-in compactor (on the same
    scripted client, summarising with claude-haiku-4-5), over ``turn``."""

    async def compacting_turn(
        scripted: ScriptedModel,
        messages: Any = HISTORY,
        options: TurnOptions | None = None,
        **kw: Any,
    ) -> list[Any]:
        client = scripted.client()
        compactor = summarizing_compactor(client, model="claude-haiku-4-5", keep_last=2)
        events, _ = await turn(
            client,
            messages,
            tools=[read_tool()],
            model="claude-sonnet-5-5",
            # claude-sonnet-5-5 has a 1M window: these usages are sized for 200k.
            options=attrs.evolve(
                options or TurnOptions(), compactor=compactor, context_window=200_000
            ),
            **kw,
        )
        return events

    return compacting_turn


async def test_prompt_too_long_is_summarised_by_the_model(
    autojump_clock: Any, compacting_turn: Any
) -> None:
    scripted = ScriptedModel([TOO_LONG, SUMMARY, DONE])
    events = await compacting_turn(scripted)
    end = events[-1]
    assert end.reason is TurnEndReason.COMPLETED
    assert [e.reason for e in events if isinstance(e, Transition)] == [
        TransitionReason.PROMPT_TOO_LONG_COMPACT
    ]
    # 3 requests: the one too long, the summary (no tools), the retry
    assert len(scripted.requests) == 3
    summary_request = scripted.requests[1].body
    assert summary_request["model"] == "claude-haiku-4-5"
    assert "tools" not in summary_request
    assert summary_request["messages"][-1]["content"][-1] == {
        "type": "text",
        "text": SUMMARY_PROMPT,
    }
    # the retry sees the summary, then the last round trip intact
    (compacted,) = [e for e in events if isinstance(e, Compacted)]
    assert compacted.messages[0] == UserMessage(
        SUMMARY_PREFIX + "The user asked for r1 and r2; both were read."
    )
    assert compacted.messages[1:] == HISTORY[-2:]
    assert len(scripted.requests[2].body["messages"]) == 3
    assert end.messages == (*compacted.messages, end.messages[-1])


async def test_a_failing_compactor_surfaces_the_original_error(
    autojump_clock: Any, compacting_turn: Any
) -> None:
    scripted = ScriptedModel(
        [TOO_LONG, HTTPErrorAnswer(status=500, headers={"x-should-retry": "false"})]
    )
    events = await compacting_turn(scripted)
    end = events[-1]
    assert end.reason is TurnEndReason.ERROR
    assert isinstance(end.error, PromptTooLongError)
    assert isinstance(end.error.__cause__, InternalServerError)
    assert end.messages == HISTORY  # not replaced
    assert len(scripted.requests) == 2


async def test_nothing_to_compact_is_a_compaction_error(
    autojump_clock: Any, compacting_turn: Any
) -> None:
    scripted = ScriptedModel([TOO_LONG])
    events = await compacting_turn(scripted, messages=[UserMessage("A prompt far too long.")])
    end = events[-1]
    assert isinstance(end.error, PromptTooLongError)
    assert isinstance(end.error.__cause__, CompactionError)
    assert len(scripted.requests) == 1


async def test_auto_compact_past_the_threshold(autojump_clock: Any, compacting_turn: Any) -> None:
    heavy = ScriptedAnswer(
        blocks=[ToolUseBlock("r4", "Read", {})],
        usage=Usage(input_tokens=150_000, output_tokens=10, cache_read_input_tokens=20_000),
    )
    scripted = ScriptedModel([heavy, SUMMARY, DONE])
    events = await compacting_turn(scripted, options=TurnOptions(auto_compact=0.8))
    end = events[-1]
    assert end.reason is TurnEndReason.COMPLETED
    # 170k of 200k > 80%: compacted before the next call, which says why
    assert [e.reason for e in events if isinstance(e, Transition)] == [
        TransitionReason.AUTO_COMPACT
    ]
    assert len(scripted.requests) == 3
    assert scripted.requests[1].body["model"] == "claude-haiku-4-5"
    (compacted,) = [e for e in events if isinstance(e, Compacted)]
    assert [m.tool_uses[0].id for m in compacted.messages if isinstance(m, AssistantMessage)] == [
        "r4"
    ]
    assert scripted.requests[2].body["messages"][0]["content"].startswith(SUMMARY_PREFIX)


async def test_under_the_threshold_no_compaction(autojump_clock: Any, compacting_turn: Any) -> None:
    light = ScriptedAnswer(
        blocks=[ToolUseBlock("r4", "Read", {})], usage=Usage(input_tokens=1000, output_tokens=5)
    )
    scripted = ScriptedModel([light, DONE])
    events = await compacting_turn(scripted, options=TurnOptions(auto_compact=0.8))
    assert not [e for e in events if isinstance(e, Compacted)]
    assert len(scripted.requests) == 2


async def test_a_failing_auto_compaction_goes_on(autojump_clock: Any, compacting_turn: Any) -> None:
    heavy = ScriptedAnswer(
        blocks=[ToolUseBlock("r4", "Read", {})], usage=Usage(input_tokens=190_000)
    )
    failing = HTTPErrorAnswer(status=500, headers={"x-should-retry": "false"})
    scripted = ScriptedModel([heavy, failing, DONE])
    events = await compacting_turn(scripted, options=TurnOptions(auto_compact=0.8))
    assert events[-1].reason is TurnEndReason.COMPLETED
    assert [e.reason for e in events if isinstance(e, Transition)] == [TransitionReason.NEXT_TURN]


def heavy_call(n: int) -> ScriptedAnswer:
    """An answer asking for one more tool call, past 80% of the 200k window."""
    return ScriptedAnswer(
        blocks=[ToolUseBlock(f"h{n}", "Read", {})], usage=Usage(input_tokens=190_000)
    )


async def test_auto_compaction_stops_after_three_failures_in_a_row(
    autojump_clock: Any, compacting_turn: Any
) -> None:
    # Claude Code's circuit breaker: the summary call fails 3 times, then the turn
    # stops asking for summaries although every answer stays past the threshold.
    failing = HTTPErrorAnswer(status=500, headers={"x-should-retry": "false"})
    answers: list[Any] = []
    for n in range(MAX_CONSECUTIVE_COMPACT_FAILURES):
        answers += [heavy_call(n), failing]
    answers += [heavy_call(n) for n in range(3, 6)]
    scripted = ScriptedModel([*answers, DONE])
    events = await compacting_turn(scripted, options=TurnOptions(auto_compact=0.8))
    assert events[-1].reason is TurnEndReason.COMPLETED
    summary_calls = [r for r in scripted.requests if r.body["model"] == "claude-haiku-4-5"]
    assert len(summary_calls) == MAX_CONSECUTIVE_COMPACT_FAILURES == 3
    assert len(scripted.requests) == 3 * 2 + 3 + 1
    assert not [e for e in events if isinstance(e, Compacted)]
    assert {e.reason for e in events if isinstance(e, Transition)} == {TransitionReason.NEXT_TURN}


def expected_compactor_calls(outcomes: list[bool], opportunities: int) -> int:
    """How many times the loop should call a compactor whose n-th call succeeds
    when ``outcomes[n]``, given *opportunities* answers past the threshold."""
    calls = streak = 0
    for _ in range(opportunities):
        if streak >= MAX_CONSECUTIVE_COMPACT_FAILURES:
            break
        succeeded = outcomes[calls]
        calls += 1
        streak = 0 if succeeded else streak + 1
    return calls


@settings(max_examples=40, deadline=None)
@given(outcomes=st.lists(st.booleans(), min_size=8, max_size=8), heavy=st.integers(0, 8))
@example(outcomes=[False] * 8, heavy=8)
@example(outcomes=[False, False, True, False, False, False, True, True], heavy=8)
def test_the_breaker_counts_failures_in_a_row(outcomes: list[bool], heavy: int, turn: Any) -> None:
    calls: list[int] = []

    async def compactor(messages: tuple[Message, ...]) -> list[Message]:
        calls.append(len(messages))
        if not outcomes[len(calls) - 1]:
            raise CompactionError(f"failure {len(calls)}")
        return list(messages)  # a success that keeps the history

    scripted = ScriptedModel([*(heavy_call(n) for n in range(heavy)), DONE])
    events, _ = trio.run(
        lambda: turn(
            scripted.client(),
            HISTORY,
            tools=[read_tool()],
            model="claude-sonnet-5-5",
            options=TurnOptions(compactor=compactor, auto_compact=0.8, context_window=200_000),
        ),
        clock=trio.testing.MockClock(autojump_threshold=0),
    )
    assert events[-1].reason is TurnEndReason.COMPLETED
    assert len(scripted.requests) == heavy + 1
    assert len(calls) == expected_compactor_calls(outcomes, heavy)
    assert len([e for e in events if isinstance(e, Compacted)]) == sum(outcomes[: len(calls)])


async def test_the_breaker_leaves_the_reactive_compaction_alone(
    autojump_clock: Any, compacting_turn: Any
) -> None:
    # After the breaker tripped, a prompt-too-long still asks the compactor once,
    # and its failure is attached to the original error, as before.
    failing = HTTPErrorAnswer(status=500, headers={"x-should-retry": "false"})
    answers: list[Any] = []
    for n in range(MAX_CONSECUTIVE_COMPACT_FAILURES):
        answers += [heavy_call(n), failing]
    scripted = ScriptedModel([*answers, TOO_LONG, failing])
    events = await compacting_turn(scripted, options=TurnOptions(auto_compact=0.8))
    end = events[-1]
    assert end.reason is TurnEndReason.ERROR
    assert isinstance(end.error, PromptTooLongError)
    assert isinstance(end.error.__cause__, InternalServerError)
    assert len(scripted.requests) == 3 * 2 + 2
    assert scripted.requests[-1].body["model"] == "claude-haiku-4-5"


async def test_the_session_keeps_the_compacted_history(autojump_clock: Any) -> None:
    scripted = ScriptedModel([TOO_LONG, SUMMARY, DONE])
    client = scripted.client()
    session = Session(
        client,
        [read_tool()],
        model="claude-sonnet-5-5",
        messages=list(HISTORY[:-1]),
        options=TurnOptions(
            compactor=summarizing_compactor(client, model="claude-haiku-4-5", keep_last=2)
        ),
    )
    async with session.submit([ToolResultBlock("r3", "contents 3")]) as events:
        async for _ in events:
            pass
    assert session.messages[0].content.startswith(SUMMARY_PREFIX)  # type: ignore[union-attr]
    check_history(session.messages, strict=True)


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    messages: list[Message] = [UserMessage("start")]
    for n in range(draw(st.integers(1, 6))):
        uses = draw(st.integers(0, 3))
        blocks: list[Any] = [TextBlock(f"a{n}")]
        blocks += [ToolUseBlock(f"t{n}_{k}", "Read", {}) for k in range(uses)]
        messages.append(AssistantMessage(id=f"m{n}", model="m", content=blocks))
        if uses:
            messages.append(UserMessage([ToolResultBlock(f"t{n}_{k}", "x") for k in range(uses)]))
        else:
            messages.append(UserMessage(f"prompt {n}"))
    return messages


@settings(max_examples=80, deadline=None)
@given(messages=histories(), keep_last=st.integers(1, 12))
def test_the_split_keeps_every_pair_and_the_alternation(
    messages: list[Message], keep_last: int
) -> None:
    earlier, kept = split_for_compaction(messages, keep_last)
    assert (*earlier, *kept) == tuple(messages)
    assert isinstance(kept[0], AssistantMessage)
    assert isinstance(earlier[-1], UserMessage)
    assert len(kept) >= min(keep_last, 2) or kept[0] is messages[-2]
    check_history([UserMessage(SUMMARY_PREFIX + "..."), *kept], strict=True)


def test_bad_compactor_arguments() -> None:
    scripted = ScriptedModel([])
    with pytest.raises(ValueError, match="keep_last"):
        summarizing_compactor(scripted.client(), model="m", keep_last=0)
    with pytest.raises(ValueError, match="max_tokens"):
        summarizing_compactor(scripted.client(), model="m", max_tokens=0)
