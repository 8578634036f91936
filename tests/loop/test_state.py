import attrs
import pytest

from trio_agent import (
    AssistantMessage,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
    UserMessage,
)
from trio_agent._loop._recovery import (
    CONTINUE_PROMPT,
    ESCALATED_MAX_TOKENS,
    Outcome,
    after_tools,
    classify_answer,
    compacted,
    escalate,
    exceeds_max_turns,
    merge_paused,
    on_overloaded,
    pause,
    recover,
    stop_hook_block,
    succeeded,
)
from trio_agent._loop._state import State, Transition, TransitionReason, TurnEndReason


def answer(*blocks: object, stop: str = "end_turn", usage: Usage | None = None) -> AssistantMessage:
    return AssistantMessage(
        id="msg", model="m", content=blocks, stop_reason=stop, usage=usage or Usage(1, 2)
    )  # type: ignore[arg-type]


START = State(messages=[UserMessage("hi")], model="big", max_tokens=8192)
#: A caller who left max_tokens at its default, with a model whose cap is known.
DEFAULTED = attrs.evolve(START, default_max_tokens=True, output_cap=64_000)


def test_state_is_frozen_and_starts_clean() -> None:
    assert START.messages == (UserMessage("hi"),)
    assert START.turn_count == 1
    assert START.transition is None
    assert START.effective_max_tokens == 8192
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        START.turn_count = 2  # type: ignore[misc]


def test_reasons_are_the_documented_strings() -> None:
    assert {r.value for r in TransitionReason} == {
        "next_turn",
        "max_output_tokens_escalate",
        "max_output_tokens_recovery",
        "prompt_too_long_compact",
        "stop_hook_blocking",
        "model_fallback",
        "pause_turn",
        "overloaded_retry",
        "stream_retry",
        "non_streaming_fallback",
        "token_budget_continuation",
        "auto_compact",
        "output_retry",
    }
    assert {r.value for r in TurnEndReason} == {
        "completed",
        "max_turns",
        "aborted_streaming",
        "aborted_tools",
        "permission_rejected",
        "error",
        "stop_hook_limit",
        "awaiting_approval",
        "budget_exhausted",
        "output_invalid",
        "prompt_denied",
    }
    assert TurnEndReason.COMPLETED == "completed"


def test_classify() -> None:
    tool_answer = answer(ToolUseBlock("t1", "Read", {}), stop="max_tokens")
    assert classify_answer(START, tool_answer) is Outcome.TOOLS
    assert classify_answer(START, answer(TextBlock("x"))) is Outcome.END
    assert classify_answer(START, answer(TextBlock("x"), stop="stop_sequence")) is Outcome.END
    assert classify_answer(START, answer(stop="pause_turn")) is Outcome.PAUSE
    cut = answer(TextBlock("x"), stop="max_tokens")
    # an explicit max_tokens goes straight to the continuation recovery
    assert classify_answer(START, cut) is Outcome.RECOVER
    assert classify_answer(DEFAULTED, cut) is Outcome.ESCALATE
    escalated = escalate(DEFAULTED)
    assert classify_answer(escalated, cut) is Outcome.RECOVER
    # a caller already at 64k never escalates
    assert classify_answer(attrs.evolve(DEFAULTED, max_tokens=64_000), cut) is Outcome.RECOVER
    state = escalated
    for _ in range(3):
        assert classify_answer(state, cut) is Outcome.RECOVER
        state = recover(state, cut)
    assert classify_answer(state, cut) is Outcome.EXHAUSTED


def test_escalate_then_recover() -> None:
    cut = answer(TextBlock("part"), stop="max_tokens")
    state = escalate(DEFAULTED)
    assert state.messages == START.messages  # the truncated answer is dropped
    assert state.effective_max_tokens == ESCALATED_MAX_TOKENS
    assert state.transition == Transition(
        TransitionReason.MAX_OUTPUT_TOKENS_ESCALATE, 1, "big", ESCALATED_MAX_TOKENS
    )
    state = recover(state, cut)
    assert state.messages == (UserMessage("hi"), cut, UserMessage(CONTINUE_PROMPT))
    assert state.max_output_tokens_recovery_count == 1
    assert state.turn_count == 2
    assert state.effective_max_tokens == ESCALATED_MAX_TOKENS
    assert state.transition is not None
    assert state.transition.reason is TransitionReason.MAX_OUTPUT_TOKENS_RECOVERY


def test_after_tools_resets_recovery() -> None:
    state = recover(
        escalate(attrs.evolve(DEFAULTED, has_attempted_compact=True)), answer(stop="max_tokens")
    )
    use = answer(ToolUseBlock("t1", "Read", {}), stop="tool_use")
    results = UserMessage([ToolResultBlock("t1", "ok")])
    state = after_tools(state, use, results)
    assert state.messages[-2:] == (use, results)
    assert state.turn_count == 3
    assert state.max_tokens_override is None
    assert state.max_output_tokens_recovery_count == 0
    assert not state.has_attempted_compact
    assert state.transition == Transition(TransitionReason.NEXT_TURN, 3, "big", 8192)


def test_pause_and_merge() -> None:
    first = answer(TextBlock("a"), stop="pause_turn", usage=Usage(1, 1))
    state = pause(START, first)
    assert state.paused == first
    assert state.messages == START.messages  # kept aside, not in the history yet
    assert state.turn_count == 2
    second = answer(TextBlock("b"), usage=Usage(2, 3))
    merged = merge_paused(state.paused, second)
    assert [b.text for b in merged.content] == ["a", "b"]  # type: ignore[union-attr]
    assert merged.usage == Usage(3, 4)
    assert merged.stop_reason == "end_turn"
    assert merge_paused(None, second) is second
    # a hook or tool turn clears the pause
    assert stop_hook_block(state, merged, "no").paused is None


def test_stop_hook_block() -> None:
    final = answer(TextBlock("done"))
    state = stop_hook_block(START, final, "Run the tests first.")
    assert state.messages == (UserMessage("hi"), final, UserMessage("Run the tests first."))
    assert state.transition is not None
    assert state.transition.reason is TransitionReason.STOP_HOOK_BLOCKING


def test_compacted() -> None:
    state = compacted(START, [UserMessage("summary")])
    assert state.messages == (UserMessage("summary"),)
    assert state.has_attempted_compact
    assert state.turn_count == 1


def test_overloaded() -> None:
    assert on_overloaded(START, None) is None
    state = START
    for expected in (1, 2):
        next_state = on_overloaded(state, "small")
        assert next_state is not None
        assert next_state.transition is not None
        assert next_state.transition.reason is TransitionReason.OVERLOADED_RETRY
        assert next_state.consecutive_overloaded == expected
        state = next_state
    fallen = on_overloaded(state, "small")
    assert fallen is not None
    assert fallen.model == "small"
    assert fallen.has_fallen_back
    assert fallen.consecutive_overloaded == 0
    assert fallen.transition == Transition(TransitionReason.MODEL_FALLBACK, 1, "small", 8192)
    # a success resets the streak
    assert succeeded(state, Usage(5, 5)).consecutive_overloaded == 0
    assert succeeded(state, Usage(5, 5)).usage == Usage(5, 5)
    # on the fallback model: retries again, then gives up
    state = fallen
    for _ in range(2):
        state = on_overloaded(state, "small")
        assert state is not None
    assert on_overloaded(state, "small") is None
    # the fallback model equal to the model: nothing to switch to
    assert on_overloaded(attrs.evolve(START, consecutive_overloaded=2), "big") is None


def test_max_turns() -> None:
    assert not exceeds_max_turns(START, None)
    assert not exceeds_max_turns(START, 1)
    assert exceeds_max_turns(attrs.evolve(START, turn_count=2), 1)
