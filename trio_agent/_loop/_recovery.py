"""The loop's decisions as pure functions of :class:`~trio_agent._loop._state.State`.

Nothing here awaits: :func:`trio_agent.query` streams, runs tools, calls hooks and
the compactor, and asks these functions what comes next. Each ``State -> State``
function appends what the history gains and records the transition.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

import attrs

from .._messages import AssistantMessage, Message, ToolUseBlock, Usage, UserMessage
from ._state import State, Transition, TransitionReason

__all__ = [
    "CONTINUE_PROMPT",
    "ESCALATED_MAX_TOKENS",
    "MAX_CONSECUTIVE_OVERLOADED",
    "MAX_OUTPUT_TOKENS_RECOVERY_LIMIT",
    "Outcome",
    "after_tools",
    "classify_answer",
    "compacted",
    "escalate",
    "exceeds_max_turns",
    "merge_paused",
    "on_overloaded",
    "pause",
    "recover",
    "stop_hook_block",
    "succeeded",
]

#: ``max_tokens`` of the one escalated retry (Claude Code's 8k -> 64k).
ESCALATED_MAX_TOKENS = 64_000
#: How many "continue" messages one turn may send after ``max_tokens``.
MAX_OUTPUT_TOKENS_RECOVERY_LIMIT = 3
#: Overloaded errors in a row (each after the client's own retries) before falling back.
MAX_CONSECUTIVE_OVERLOADED = 3
#: The user message that asks a truncated answer to go on.
CONTINUE_PROMPT = (
    "Output token limit hit. Resume directly, with no apology and no recap of what you "
    "were doing. Pick up mid-thought if that is where the cut happened. Break the "
    "remaining work into smaller pieces."
)


class Outcome(enum.Enum):
    """What a complete answer asks the loop to do."""

    #: The answer has tool uses: append it with its results, call again.
    TOOLS = enum.auto()
    #: Truncated by ``max_tokens``: retry the same request with more output tokens.
    ESCALATE = enum.auto()
    #: Truncated again: keep it, ask the model to continue.
    RECOVER = enum.auto()
    #: Truncated and no recovery left: the turn ends with an error.
    EXHAUSTED = enum.auto()
    #: ``pause_turn``: send it back so the model continues.
    PAUSE = enum.auto()
    #: A final answer: run the stop hooks, then end.
    END = enum.auto()


def classify_answer(state: State, message: AssistantMessage) -> Outcome:
    """Decide what a complete answer asks for.

    Tool uses come first, even with ``stop_reason == "max_tokens"`` (as in Claude
    Code): their tools already ran, and a truncated tool input gets an error
    result the model can read.
    """
    if message.tool_uses:
        return Outcome.TOOLS
    if message.stop_reason == "max_tokens":
        if state.max_tokens_override is None and state.max_tokens < ESCALATED_MAX_TOKENS:
            return Outcome.ESCALATE
        if state.max_output_tokens_recovery_count < MAX_OUTPUT_TOKENS_RECOVERY_LIMIT:
            return Outcome.RECOVER
        return Outcome.EXHAUSTED
    if message.stop_reason == "pause_turn":
        return Outcome.PAUSE
    return Outcome.END


def merge_paused(paused: AssistantMessage | None, message: AssistantMessage) -> AssistantMessage:
    """The continuation of a paused answer, merged with it into one message."""
    if paused is None:
        return message
    return attrs.evolve(
        message, content=paused.content + message.content, usage=paused.usage + message.usage
    )


def _go(state: State, reason: TransitionReason, **changes: object) -> State:
    new = attrs.evolve(state, **changes)
    return attrs.evolve(
        new, transition=Transition(reason, new.turn_count, new.model, new.effective_max_tokens)
    )


def succeeded(state: State, usage: Usage) -> State:
    """A model call completed: count its usage; the overloaded streak is over."""
    return attrs.evolve(
        state, usage=state.usage + usage, consecutive_overloaded=0, dropped_started=()
    )


def after_tools(state: State, message: AssistantMessage, results: UserMessage) -> State:
    """Append the answer and its tool results; a new turn starts with fresh recovery."""
    return _go(
        state,
        TransitionReason.NEXT_TURN,
        messages=(*state.messages, message, results),
        turn_count=state.turn_count + 1,
        max_tokens_override=None,
        max_output_tokens_recovery_count=0,
        has_attempted_compact=False,
        paused=None,
    )


def escalate(state: State) -> State:
    """Retry the same request (the truncated answer dropped) with 64k output tokens."""
    return _go(
        state, TransitionReason.MAX_OUTPUT_TOKENS_ESCALATE, max_tokens_override=ESCALATED_MAX_TOKENS
    )


def recover(state: State, message: AssistantMessage) -> State:
    """Keep the truncated answer and ask the model to continue.

    The escalated ``max_tokens`` (if any) is kept: this answer is known to be long.
    """
    return _go(
        state,
        TransitionReason.MAX_OUTPUT_TOKENS_RECOVERY,
        messages=(*state.messages, message, UserMessage(CONTINUE_PROMPT)),
        turn_count=state.turn_count + 1,
        max_output_tokens_recovery_count=state.max_output_tokens_recovery_count + 1,
        paused=None,
    )


def pause(state: State, message: AssistantMessage) -> State:
    """Keep the paused answer aside; the next request ends with it."""
    return _go(state, TransitionReason.PAUSE_TURN, turn_count=state.turn_count + 1, paused=message)


def stop_hook_block(state: State, message: AssistantMessage, text: str) -> State:
    """A stop hook refused the end: append the answer and the hook's message."""
    return _go(
        state,
        TransitionReason.STOP_HOOK_BLOCKING,
        messages=(*state.messages, message, UserMessage(text)),
        turn_count=state.turn_count + 1,
        max_output_tokens_recovery_count=0,
        paused=None,
    )


def compacted(state: State, messages: Sequence[Message]) -> State:
    """The compactor replaced the history; retry once."""
    return _go(
        state,
        TransitionReason.PROMPT_TOO_LONG_COMPACT,
        messages=tuple(messages),
        has_attempted_compact=True,
    )


def on_overloaded(
    state: State, fallback_model: str | None, started: Sequence[ToolUseBlock] = ()
) -> State | None:
    """The next state after an overloaded error, or None: the turn ends with it.

    Without a fallback model the client's own retries were the last word. With
    one, the same request is retried until :data:`MAX_CONSECUTIVE_OVERLOADED`
    errors in a row, then the model switches once (the streak starts again on it).
    *started* are the tools of the dropped attempt that had started; they are kept
    in ``dropped_started`` until a call succeeds.
    """
    if fallback_model is None:
        return None
    state = attrs.evolve(state, dropped_started=(*state.dropped_started, *started))
    count = state.consecutive_overloaded + 1
    if count < MAX_CONSECUTIVE_OVERLOADED:
        return _go(state, TransitionReason.OVERLOADED_RETRY, consecutive_overloaded=count)
    if state.has_fallen_back or fallback_model == state.model:
        return None
    return _go(
        state,
        TransitionReason.MODEL_FALLBACK,
        model=fallback_model,
        has_fallen_back=True,
        consecutive_overloaded=0,
    )


def exceeds_max_turns(state: State, max_turns: int | None) -> bool:
    """Whether the next call would go past ``max_turns``."""
    return max_turns is not None and state.turn_count > max_turns
