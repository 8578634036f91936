"""The loop's decisions as pure functions of :class:`~trio_agent._loop._state.State`.

Nothing here awaits: :func:`trio_agent.query` streams, runs tools, calls hooks and
the compactor, and asks these functions what comes next. Each ``State -> State``
function appends what the history gains and records the transition.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence

import attrs

from .._exceptions import (
    APIStatusError,
    StreamIdleTimeoutError,
    StreamStalledError,
    StreamTruncatedError,
)
from .._messages import (
    AssistantMessage,
    Message,
    RedactedThinkingBlock,
    ThinkingBlock,
    ToolUseBlock,
    Usage,
    UserMessage,
)
from .._model import RETRYABLE_ERROR_TYPES
from .._models import OUTPUT_CAPS, context_window, output_cap
from ._state import State, Transition, TransitionReason

__all__ = [
    "CONTINUE_PROMPT",
    "DEFAULT_MAX_TOKENS",
    "ESCALATED_MAX_TOKENS",
    "MAX_CONSECUTIVE_COMPACT_FAILURES",
    "MAX_CONSECUTIVE_OVERLOADED",
    "MAX_OUTPUT_TOKENS_RECOVERY_LIMIT",
    "MODEL_OUTPUT_CAPS",
    "Outcome",
    "after_tools",
    "auto_compacted",
    "budget_continue",
    "can_fall_back",
    "classify_answer",
    "compact_failed",
    "compacted",
    "escalate",
    "exceeds_max_turns",
    "fails_mid_stream",
    "initial_state",
    "may_auto_compact",
    "merge_paused",
    "model_context_window",
    "model_output_cap",
    "needs_auto_compact",
    "on_overloaded",
    "over_budget",
    "pause",
    "recover",
    "request_messages",
    "retry_call",
    "stop_hook_block",
    "succeeded",
    "wants_budget_continuation",
]

#: ``max_tokens`` of the one escalated retry (Claude Code's 8k -> 64k), capped by
#: the model's output cap.
ESCALATED_MAX_TOKENS = 64_000
#: ``max_tokens`` when the caller leaves it unset (capped by the model's output cap).
DEFAULT_MAX_TOKENS = 8192
#: Known models' output-token caps, by name prefix: :data:`trio_agent.OUTPUT_CAPS`
#: (its source and date are there).
MODEL_OUTPUT_CAPS: Mapping[str, int] = OUTPUT_CAPS
#: Stop reasons that cut an answer short: it is continued ("continue" messages).
#: ``model_context_window_exceeded`` takes the same path as ``max_tokens`` (without
#: the escalation, which cannot help), never ``completed`` with a cut answer.
_CUT_STOP_REASONS = frozenset({"max_tokens", "model_context_window_exceeded"})
#: The token-budget nudge stops at this fraction of the budget...
BUDGET_COMPLETION_THRESHOLD = 0.9
#: ... or when, after this many continuations, one added fewer output tokens than
#: :data:`BUDGET_DIMINISHING_TOKENS` (diminishing returns, as in Claude Code).
BUDGET_DIMINISHING_AFTER = 3
BUDGET_DIMINISHING_TOKENS = 500
#: How many "continue" messages one turn may send after ``max_tokens``.
MAX_OUTPUT_TOKENS_RECOVERY_LIMIT = 3
#: Overloaded errors in a row (each after the client's own retries) before falling back.
MAX_CONSECUTIVE_OVERLOADED = 3
#: Compactor failures in a row after which a turn stops auto-compacting (Claude
#: Code's ``MAX_CONSECUTIVE_AUTOCOMPACT_FAILURES``).
MAX_CONSECUTIVE_COMPACT_FAILURES = 3
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
    if message.stop_reason in _CUT_STOP_REASONS:
        if message.stop_reason == "max_tokens" and _escalation(state) is not None:
            return Outcome.ESCALATE
        if state.max_output_tokens_recovery_count < MAX_OUTPUT_TOKENS_RECOVERY_LIMIT:
            return Outcome.RECOVER
        return Outcome.EXHAUSTED
    if message.stop_reason == "pause_turn":
        return Outcome.PAUSE
    return Outcome.END


def model_output_cap(model: str, override: int | None = None) -> int | None:
    """The output-token cap of *model*: *override* if given, else the model data's
    (:func:`trio_agent.output_cap`), else None (no escalation)."""
    return output_cap(model, override)


def initial_state(
    messages: Sequence[Message],
    model: str,
    *,
    max_tokens: int | None = None,
    output_token_cap: int | None = None,
    context: object = None,
) -> State:
    """The state before the first call: ``max_tokens`` resolved (the default is
    :data:`DEFAULT_MAX_TOKENS`, or the model's cap if lower)."""
    cap = model_output_cap(model, output_token_cap)
    # The turn's cost starts known (0): each call's priced usage is added to it.
    usage = Usage(cost_usd=0.0)
    if max_tokens is None:
        resolved = DEFAULT_MAX_TOKENS if cap is None else min(DEFAULT_MAX_TOKENS, cap)
        return State(
            messages=tuple(messages),
            model=model,
            max_tokens=resolved,
            default_max_tokens=True,
            output_cap=cap,
            context=context,
            usage=usage,
        )
    return State(
        messages=tuple(messages),
        model=model,
        max_tokens=max_tokens,
        output_cap=cap,
        context=context,
        usage=usage,
    )


def model_context_window(model: str, override: int | None = None) -> int:
    """The context window of *model* in tokens: *override*, else genai-prices', else a
    conservative window (:data:`trio_agent._models.CONSERVATIVE_CONTEXT_WINDOW`)."""
    return context_window(model, override)


def over_budget(state: State, budget: float) -> bool:
    """Whether the turn may not make another call under ``max_budget_usd`` *budget*:
    its cost so far reached it, or is unknown (a call's price was not known)."""
    cost = state.usage.cost_usd
    return cost is None or cost >= budget


def needs_auto_compact(usage: Usage, fraction: float | None, window: int | None) -> bool:
    """Whether a request whose answer reported *usage* filled more than *fraction* of
    the context *window* (its input, cached parts included)."""
    if fraction is None or window is None:
        return False
    used = (
        usage.input_tokens
        + (usage.cache_creation_input_tokens or 0)
        + (usage.cache_read_input_tokens or 0)
    )
    return used > fraction * window


def auto_compacted(state: State, messages: Sequence[Message]) -> State:
    """The history was compacted before the next call (the transition says so)."""
    return _go(
        state,
        TransitionReason.AUTO_COMPACT,
        messages=tuple(messages),
        consecutive_compact_failures=0,
    )


def compact_failed(state: State) -> State:
    """The compactor failed once more (the history stays as it is)."""
    return attrs.evolve(state, consecutive_compact_failures=state.consecutive_compact_failures + 1)


def may_auto_compact(state: State) -> bool:
    """Whether auto-compaction may still be tried in this turn: not after
    :data:`MAX_CONSECUTIVE_COMPACT_FAILURES` compactor failures in a row (Claude
    Code's circuit breaker), so a broken compactor is not called on every call."""
    return state.consecutive_compact_failures < MAX_CONSECUTIVE_COMPACT_FAILURES


def _escalation(state: State) -> int | None:
    """The escalated ``max_tokens``, or None: the caller chose ``max_tokens``, the
    escalation was used, the model's cap is unknown or not above the current value."""
    if not state.default_max_tokens or state.max_tokens_override is not None:
        return None
    if state.output_cap is None:
        return None
    target = min(ESCALATED_MAX_TOKENS, state.output_cap)
    return target if target > state.max_tokens else None


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
    """A model call completed: count its usage; the overloaded streak and the
    call's retries are over."""
    return attrs.evolve(
        state,
        usage=state.usage + usage,
        consecutive_overloaded=0,
        dropped_started=(),
        call_retries=0,
        non_streaming=False,
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


def approved(state: State, results: UserMessage) -> State:
    """The deferred calls of the history's last answer were answered: append the
    answer's results; the model answers them in this turn's first call."""
    return _go(state, TransitionReason.NEXT_TURN, messages=(*state.messages, results))


def escalate(state: State) -> State:
    """Retry the same request (the truncated answer dropped) with 64k output tokens
    (or the model's cap, if lower)."""
    target = _escalation(state)
    assert target is not None, "escalate() after classify_answer() said ESCALATE"
    return _go(state, TransitionReason.MAX_OUTPUT_TOKENS_ESCALATE, max_tokens_override=target)


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


def stop_hook_block(
    state: State, message: AssistantMessage, text: str, results: UserMessage | None = None
) -> State:
    """A stop hook refused the end: append the answer (and its tool *results*, when
    it ended with the final-result tool) and the hook's message; the hooks see
    ``stop_hook_active`` from now on in this turn."""
    added = (
        (message, UserMessage(text)) if results is None else (message, results, UserMessage(text))
    )
    return _go(
        state,
        TransitionReason.STOP_HOOK_BLOCKING,
        messages=(*state.messages, *added),
        turn_count=state.turn_count + 1,
        max_output_tokens_recovery_count=0,
        stop_hook_active=True,
        stop_hook_blocks=state.stop_hook_blocks + 1,
        paused=None,
    )


def output_retry(
    state: State,
    message: AssistantMessage,
    feedback: UserMessage | None,
    results: UserMessage | None,
) -> State:
    """The typed output was refused: append the answer and what tells the model why
    (its tool results, where the final-result tool answered; else *feedback*), and
    ask again."""
    added = (message, results) if results is not None else (message, feedback)
    return _go(
        state,
        TransitionReason.OUTPUT_RETRY,
        messages=(*state.messages, *(m for m in added if m is not None)),
        turn_count=state.turn_count + 1,
        max_tokens_override=None,
        max_output_tokens_recovery_count=0,
        has_attempted_compact=False,
        output_attempts=state.output_attempts + 1,
        paused=None,
    )


def wants_budget_continuation(state: State, budget: int | None, last_output: int) -> bool:
    """Whether an answer that ended the turn should go on for the output-token
    *budget*: the turn is under 90% of it, and the continuations still pay off
    (after 3, one that added fewer than 500 output tokens ends it)."""
    if budget is None:
        return False
    if state.usage.output_tokens >= BUDGET_COMPLETION_THRESHOLD * budget:
        return False
    return not (
        state.budget_continuations >= BUDGET_DIMINISHING_AFTER
        and last_output < BUDGET_DIMINISHING_TOKENS
    )


def budget_continue(state: State, message: AssistantMessage, budget: int) -> State:
    """Append the answer and a nudge to keep working toward the budget."""
    used = state.usage.output_tokens
    nudge = (
        f"Stopped at {100 * used // budget}% of the output token target ({used} / {budget})."
        " Keep working; do not summarize."
    )
    return _go(
        state,
        TransitionReason.TOKEN_BUDGET_CONTINUATION,
        messages=(*state.messages, message, UserMessage(nudge)),
        turn_count=state.turn_count + 1,
        max_output_tokens_recovery_count=0,
        budget_continuations=state.budget_continuations + 1,
        paused=None,
    )


def compacted(state: State, messages: Sequence[Message]) -> State:
    """The compactor replaced the history; retry once."""
    return _go(
        state,
        TransitionReason.PROMPT_TOO_LONG_COMPACT,
        messages=tuple(messages),
        has_attempted_compact=True,
        consecutive_compact_failures=0,
    )


def on_overloaded(
    state: State,
    fallback_model: str | None,
    started: Sequence[ToolUseBlock] = (),
    count: int | None = None,
) -> State | None:
    """The next state after an overloaded error, or None: not this path.

    Without a fallback model the retry policy decides (the client's own retries,
    :func:`retry_call` for an answer cut mid-stream). With one, the same request
    is retried until :data:`MAX_CONSECUTIVE_OVERLOADED` overloaded answers in a
    row (*count*, the client's own retries included; by default one more than
    the state's), then the model switches once (the streak starts again on it),
    and the primary's thinking signatures are left out of the requests.
    *started* are the tools of the dropped attempt that had started; they are
    kept in ``dropped_started`` until a call succeeds.
    """
    if fallback_model is None:
        return None
    state = attrs.evolve(state, dropped_started=(*state.dropped_started, *started))
    count = state.consecutive_overloaded + 1 if count is None else count
    if count < MAX_CONSECUTIVE_OVERLOADED:
        return _go(state, TransitionReason.OVERLOADED_RETRY, consecutive_overloaded=count)
    if not can_fall_back(state, fallback_model):
        return None
    cap = model_output_cap(fallback_model) if state.default_max_tokens else state.output_cap
    override = state.max_tokens_override
    if override is not None and cap is not None:
        override = min(override, cap)
    return _go(
        state,
        TransitionReason.MODEL_FALLBACK,
        model=fallback_model,
        has_fallen_back=True,
        consecutive_overloaded=0,
        call_retries=0,
        output_cap=cap,
        max_tokens=min(state.max_tokens, cap) if cap is not None else state.max_tokens,
        max_tokens_override=override,
        strip_thinking_before=len(state.messages),
    )


def can_fall_back(state: State, fallback_model: str | None) -> bool:
    """Whether an overloaded streak may still switch to *fallback_model*."""
    return (
        fallback_model is not None and not state.has_fallen_back and fallback_model != state.model
    )


def fails_mid_stream(error: Exception) -> bool:
    """Whether *error*, met after content was delivered, deserves another attempt:
    a reset, a truncation, an idle timeout, too many stalls, or a retryable
    in-stream error event (``overloaded_error``, ``api_error``...)."""
    if isinstance(error, APIStatusError):
        return error.status_code is None and error.error_type in RETRYABLE_ERROR_TYPES
    return isinstance(error, (StreamTruncatedError, StreamIdleTimeoutError, StreamStalledError))


def retry_call(
    state: State, max_retries: int, can_create: bool, reason: TransitionReason | None = None
) -> State | None:
    """The next state after a call failed mid-stream (its attempt discarded), or
    None: the turn ends with the error.

    Streamed again while ``call_retries < max_retries``; then, once, the last resort
    of a non-streaming request (if the client has one).
    """
    if state.non_streaming:
        return None
    if state.call_retries < max_retries:
        return _go(
            state, reason or TransitionReason.STREAM_RETRY, call_retries=state.call_retries + 1
        )
    if can_create:
        return _go(state, TransitionReason.NON_STREAMING_FALLBACK, non_streaming=True)
    return None


def request_messages(state: State) -> list[Message]:
    """The messages of the next request: the history (the primary's thinking
    blocks left out after a fallback), then the paused answer if any."""
    messages: list[Message] = list(state.messages)
    for i in range(min(state.strip_thinking_before, len(messages))):
        message = messages[i]
        if isinstance(message, AssistantMessage):
            kept = tuple(
                b
                for b in message.content
                if not isinstance(b, (ThinkingBlock, RedactedThinkingBlock))
            )
            if kept != message.content and kept:
                messages[i] = attrs.evolve(message, content=kept)
    if state.paused is not None:
        messages.append(state.paused)
    return messages


def exceeds_max_turns(state: State, max_turns: int | None) -> bool:
    """Whether the next call would go past ``max_turns``."""
    return max_turns is not None and state.turn_count > max_turns
