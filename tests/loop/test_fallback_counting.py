"""Model fallback after 3 consecutive overloaded answers (issue 12, item 3), counted
inside the retry loop: the client's own retries of a 529 count, so the primary gets
exactly 3 requests whatever the retry policy; an in-stream ``overloaded_error``
counts too; another error breaks the streak; the primary's thinking signatures are
left out of what the fallback model sees."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from trio_agent import (
    AssistantMessage,
    AttemptDiscarded,
    ModelFallback,
    RetryPolicy,
    Session,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Transition,
    TransitionReason,
    TurnEndReason,
    TurnOptions,
    UserMessage,
)
from trio_agent.testing import (
    Faults,
    HTTPErrorAnswer,
    ScriptedAnswer,
    ScriptedModel,
    Timing,
    check_history,
)

OVERLOADED = HTTPErrorAnswer(status=529)
SERVER_ERROR = HTTPErrorAnswer(status=500)
OK = ScriptedAnswer(blocks=[TextBlock("From whoever answered.")])

POLICIES = {
    "never": RetryPolicy.never(),
    "default": RetryPolicy(jitter=(1.0, 1.0)),
    "claude_code": RetryPolicy.claude_code(jitter=(1.0, 1.0)),
}
#: The primary is "big"; the turns of this module fall back to "small".
FALLBACK = TurnOptions(fallback_model="small")


def models_asked(model: ScriptedModel) -> list[str]:
    return [r.body["model"] for r in model.requests]


@pytest.mark.parametrize("policy", sorted(POLICIES))
async def test_three_529_from_the_primary_then_the_fallback(
    autojump_clock: Any, policy: str, turn: Any
) -> None:
    model = ScriptedModel([OVERLOADED] * 3 + [OK] + [OVERLOADED] * 20)
    events, end = await turn(model.client(retry=POLICIES[policy]), model="big", options=FALLBACK)
    assert end.reason is TurnEndReason.COMPLETED
    # exactly 3 requests to the primary (not 9, not 33), then one to the fallback
    assert models_asked(model) == ["big", "big", "big", "small"]
    assert [r.body["max_tokens"] for r in model.requests] == [100] * 4
    (notice,) = [e for e in events if isinstance(e, ModelFallback)]
    assert (notice.from_model, notice.to_model) == ("big", "small")
    assert [e.reason for e in events if isinstance(e, Transition)][-1] is (
        TransitionReason.MODEL_FALLBACK
    )
    # nothing had been shown: no tombstone
    assert not [e for e in events if isinstance(e, AttemptDiscarded)]


async def test_without_a_fallback_the_client_policy_decides(autojump_clock: Any, turn: Any) -> None:
    model = ScriptedModel([OVERLOADED] * 3 + [OK])
    _, end = await turn(model.client(retry=POLICIES["claude_code"]), model="big")
    assert end.reason is TurnEndReason.COMPLETED
    assert models_asked(model) == ["big"] * 4  # the client's 4th attempt succeeded


async def test_an_in_stream_overloaded_error_counts_and_is_tombstoned(
    autojump_clock: Any, turn: Any
) -> None:
    broken = ScriptedAnswer(
        blocks=[TextBlock("Half an answer that will be dropped.")],
        timing=Timing(token_delay=0.1),
        faults=Faults(error_event_after=3, error_type="overloaded_error"),
    )
    model = ScriptedModel([OVERLOADED, OVERLOADED, broken, OK])
    events, end = await turn(model.client(retry=POLICIES["default"]), model="big", options=FALLBACK)
    assert end.reason is TurnEndReason.COMPLETED
    # 2 x 529 retried by the client, then the in-stream error: the third in a row
    assert models_asked(model) == ["big", "big", "big", "small"]
    (tombstone,) = [e for e in events if isinstance(e, AttemptDiscarded)]
    assert tombstone.reason is TransitionReason.MODEL_FALLBACK
    assert tombstone.model_call == 1  # the client's retries are inside one call
    assert [m.text for m in end.messages if isinstance(m, AssistantMessage)] == [
        "From whoever answered."
    ]


async def test_another_error_breaks_the_streak(autojump_clock: Any, turn: Any) -> None:
    model = ScriptedModel([OVERLOADED, OVERLOADED, SERVER_ERROR, OVERLOADED, OVERLOADED, OK])
    _, end = await turn(model.client(retry=POLICIES["claude_code"]), model="big", options=FALLBACK)
    assert end.reason is TurnEndReason.COMPLETED
    assert models_asked(model) == ["big"] * 6


async def test_overloaded_on_the_fallback_ends_the_turn(autojump_clock: Any, turn: Any) -> None:
    model = ScriptedModel([OVERLOADED] * 30)
    _, end = await turn(model.client(retry=POLICIES["default"]), model="big", options=FALLBACK)
    assert end.reason is TurnEndReason.ERROR
    # 3 on the primary, then the fallback's own streak of 3 (the client's attempts)
    assert models_asked(model) == ["big"] * 3 + ["small"] * 3


async def test_thinking_signatures_are_left_out_for_the_fallback(
    autojump_clock: Any, turn: Any
) -> None:
    signed = AssistantMessage(
        id="msg_1",
        model="big",
        content=[
            ThinkingBlock("Let me think.", "sig-from-big"),
            TextBlock("Reading."),
            ToolUseBlock("r1", "Read", {}),
        ],
        stop_reason="tool_use",
    )
    history = [
        UserMessage("go"),
        signed,
        UserMessage([ToolResultBlock("r1", "the file")]),
    ]
    model = ScriptedModel([OVERLOADED] * 3 + [OK])
    _, end = await turn(
        model.client(retry=POLICIES["never"]), history, model="big", options=FALLBACK
    )
    assert end.reason is TurnEndReason.COMPLETED
    sent = [r.body["messages"][1]["content"] for r in model.requests]
    assert [b["type"] for b in sent[0]] == ["thinking", "text", "tool_use"]
    assert [b["type"] for b in sent[3]] == ["text", "tool_use"]
    assert models_asked(model) == ["big", "big", "big", "small"]
    # the history itself is not rewritten
    assert end.messages[1] == signed


async def test_the_session_falls_back_after_three(autojump_clock: Any) -> None:
    model = ScriptedModel([OVERLOADED] * 3 + [OK, OK])
    session = Session(
        model.client(retry=POLICIES["claude_code"]),
        [],
        model="big",
        max_tokens=100,
        options=TurnOptions(fallback_model="small"),
    )
    async with session.submit("go") as events:
        async for _ in events:
            await trio.lowlevel.checkpoint()
    # each submitted prompt starts on the primary again
    async with session.submit("again") as events:
        async for _ in events:
            pass
    assert models_asked(model) == ["big", "big", "big", "small", "big"]
    check_history(session.messages, strict=True)
