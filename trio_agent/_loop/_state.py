"""The loop's values: its frozen :class:`State`, the reasons it goes on or ends, and the
events :func:`trio_agent.query` sends besides messages and tool notices.

Every value here is ``attrs.frozen``; the loop moves :class:`State` forward with
``attrs.evolve`` and records why in ``State.transition``.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Sequence
from typing import Any, TypeAlias

import attrs

from .._exceptions import TranscriptError
from .._executor import AbortReason, ToolFinished, ToolProgress, ToolResult
from .._messages import (
    AssistantMessage,
    ContentBlock,
    Message,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
    UserMessage,
)
from ._output import PartialOutput
from ._tool_input import ToolInputDelta

__all__ = [
    "AttemptDiscarded",
    "BlockFinished",
    "CacheBust",
    "Compacted",
    "ModelFallback",
    "PendingApprovals",
    "QueryEvent",
    "Stall",
    "State",
    "SubagentTurn",
    "TextDelta",
    "ThinkingDelta",
    "Transition",
    "TransitionReason",
    "TurnEnd",
    "TurnEndReason",
]


class TransitionReason(enum.StrEnum):
    """Why the loop calls the model again."""

    #: Tool results were appended; the model answers them.
    NEXT_TURN = "next_turn"
    #: The answer hit ``max_tokens``: the same request again with 64k output tokens.
    MAX_OUTPUT_TOKENS_ESCALATE = "max_output_tokens_escalate"
    #: The answer hit ``max_tokens`` again: it is kept and the model asked to go on.
    MAX_OUTPUT_TOKENS_RECOVERY = "max_output_tokens_recovery"
    #: The prompt was too long: the history was compacted, the request retried.
    PROMPT_TOO_LONG_COMPACT = "prompt_too_long_compact"
    #: A stop hook refused the end of the turn and added a message.
    STOP_HOOK_BLOCKING = "stop_hook_blocking"
    #: Overloaded too often: the attempt was dropped and the fallback model used.
    MODEL_FALLBACK = "model_fallback"
    #: The API paused a long turn (``stop_reason == "pause_turn"``): continue it.
    PAUSE_TURN = "pause_turn"
    #: Overloaded: the attempt was dropped and the same request is tried again,
    #: before falling back (3 overloaded answers in a row, the client's own retries
    #: included).
    OVERLOADED_RETRY = "overloaded_retry"
    #: The stream failed after content was delivered (a reset, a truncation, an idle
    #: timeout, a retryable in-stream error, too many stalls): the attempt was
    #: discarded and the call is streamed again after a backoff.
    STREAM_RETRY = "stream_retry"
    #: The streamed retries failed too: one last non-streaming request.
    NON_STREAMING_FALLBACK = "non_streaming_fallback"
    #: The answer ended under the turn's output-token budget: the model is asked
    #: to go on.
    TOKEN_BUDGET_CONTINUATION = "token_budget_continuation"
    #: The last request's input passed the auto-compact threshold: the history was
    #: compacted before the next call.
    AUTO_COMPACT = "auto_compact"
    #: The typed output was invalid (or an output validator rejected it): the
    #: reason was sent back and the model answers again (``output_retries``).
    OUTPUT_RETRY = "output_retry"


class TurnEndReason(enum.StrEnum):
    """Why the turn ended."""

    #: The model finished and no stop hook objected.
    COMPLETED = "completed"
    #: ``max_turns`` model turns were used.
    MAX_TURNS = "max_turns"
    #: Aborted (or interrupted) before the model's answer was complete.
    ABORTED_STREAMING = "aborted_streaming"
    #: Aborted (or interrupted) after the answer, while tools ran.
    ABORTED_TOOLS = "aborted_tools"
    #: The user rejected a tool use (a :class:`~trio_agent.Reject` decision).
    PERMISSION_REJECTED = "permission_rejected"
    #: An API or stream error, or a recovery that ran out of attempts.
    ERROR = "error"
    #: The stop hooks kept blocking the end of the turn past ``max_stop_hook_blocks``.
    STOP_HOOK_LIMIT = "stop_hook_limit"
    #: ``can_use_tool`` deferred some tool calls (:class:`~trio_agent.Defer`): they
    #: wait for approval (:attr:`TurnEnd.pending`).
    AWAITING_APPROVAL = "awaiting_approval"
    #: The turn's cost reached ``max_budget_usd`` before the next model call (every
    #: tool use of the history answered).
    BUDGET_EXHAUSTED = "budget_exhausted"
    #: The typed output stayed invalid (or rejected) past ``output_retries``;
    #: :attr:`TurnEnd.error` is the last :class:`~trio_agent.OutputValidationError`.
    OUTPUT_INVALID = "output_invalid"
    #: The ``user_prompt_submit`` hook denied the prompt: it is not in the history
    #: and no model call was made.
    PROMPT_DENIED = "prompt_denied"


@attrs.frozen
class TextDelta:
    """A piece of text of the content block at *index*, as it streams."""

    text: str
    index: int


@attrs.frozen
class ThinkingDelta:
    """A piece of thinking of the content block at *index*, as it streams."""

    thinking: str
    index: int


@attrs.frozen
class BlockFinished:
    """A content block finished streaming (its ``content_block_stop``).

    Sent for every block; a tool_use block is handed to the executor as soon as
    this is received. The block is not yet part of the history: the complete
    :class:`~trio_agent.AssistantMessage` follows when the answer ends.
    """

    index: int
    block: ContentBlock


@attrs.frozen
class Transition:
    """The loop calls the model again, and why.

    Attributes:
        reason: why.
        turn: the turn count after this transition (1 for the first call).
        model: the model of the next call.
        max_tokens: the ``max_tokens`` of the next call.
    """

    reason: TransitionReason
    turn: int
    model: str
    max_tokens: int


@attrs.frozen
class AttemptDiscarded:
    """A tombstone: everything the model call *model_call* streamed is void.

    A UI drops what it rendered for that call (its text and thinking deltas, its
    blocks); none of it is in the history. Its tools that had started (and so may
    have had effects) are in *started_tools*, each answered by a ``ToolResult``
    event (running ones cancelled with ``streaming_fallback``); the others never
    ran. A :class:`Transition` with *reason* follows: the call is made again.

    Attributes:
        reason: why the attempt was discarded (the transition that follows).
        model_call: the number of the discarded model call in this turn (1 for the
            first call; every call counts, retries included).
        error: the failure that discarded it, if any (none for an escalation).
        started_tools: the attempt's tools that had started.
    """

    reason: TransitionReason
    model_call: int
    error: Exception | None = None
    started_tools: tuple[ToolUseBlock, ...] = ()


@attrs.frozen
class Stall:
    """No content event came for *duration* seconds (pings do not count).

    Sent when the stream resumes (or fails); *count* is the stalls of this model
    call so far. With ``max_stalls``, the call is aborted and retried at the limit.
    """

    duration: float
    model_call: int
    count: int


@attrs.frozen
class CacheBust:
    """A model call read far less of its prompt from the cache than the previous call
    had cached (*expected* tokens, read or written), so most of it was paid again.

    *changed* names the parts of the prompt that differ from the previous request's,
    in prompt order (``"model"``, ``"tools"``, ``"system"``, ``"history"``: an earlier
    part's change busts every later part); empty when none did (the entries expired
    or were evicted). Sent when the call's usage arrives (its ``message_start``), with
    a log line; a compaction's or a model fallback's bust is logged at INFO, any other
    at WARNING.
    """

    model_call: int
    expected: int
    read: int
    changed: tuple[str, ...]


@attrs.frozen
class Compacted:
    """The compactor replaced the history; *messages* is the new history."""

    messages: tuple[Message, ...]


@attrs.frozen
class ModelFallback:
    """The model was overloaded too often; the loop switches to *to_model*.

    The partial answers of the dropped attempts (this one and the overloaded
    retries before it) are not in the history. Their tools that had already
    started (and so may have had effects) are listed in *started_tools*; the
    others never ran. (An error that *ends* the turn keeps its attempt's finished
    blocks in the history instead, each tool use answered.)
    """

    from_model: str
    to_model: str
    started_tools: tuple[ToolUseBlock, ...]


@attrs.frozen
class PendingApprovals:
    """Tool calls of the history's last answer that wait for the user's approval.

    While calls are pending, the history ends with that answer, its tool uses not
    yet answered; ``query(..., pending=..., approvals=...)`` (or
    ``Session.submit(approvals=...)``) answers them and goes on.

    Attributes:
        calls: the deferred tool uses, in the answer's order.
        results: the results of the answer's other tool uses (they ran, or were
            answered, before the turn ended), in the answer's order.
    """

    calls: tuple[ToolUseBlock, ...] = attrs.field(converter=tuple)
    results: tuple[ToolResultBlock, ...] = attrs.field(converter=tuple, default=())

    @property
    def ids(self) -> tuple[str, ...]:
        """The pending tool_use ids."""
        return tuple(c.id for c in self.calls)

    def belongs_to(self, message: Message | None) -> bool:
        """Whether these are the calls (and results) of *message*'s tool uses: the same
        ids, and each call the very tool use of *message* with its id (name, input and
        all), since approving an id runs the call held here."""
        if not isinstance(message, AssistantMessage):
            return False
        uses = sorted(u.id for u in message.tool_uses)
        if uses != sorted([*self.ids, *(r.tool_use_id for r in self.results)]):
            return False
        by_id = {u.id: u for u in message.tool_uses}
        return all(_same_call(c, by_id[c.id]) for c in self.calls)

    def to_api(self) -> dict[str, Any]:
        """The JSON form (a transcript line's payload)."""
        return {
            "calls": [c.to_api() for c in self.calls],
            "results": [r.to_api() for r in self.results],
        }

    @classmethod
    def from_api(cls, data: Any) -> PendingApprovals:
        """The value of :meth:`to_api`'s JSON.

        Raises:
            TranscriptError: *data* is not that JSON.
        """
        try:
            calls = tuple(ToolUseBlock.from_api(c) for c in data["calls"])
            results = tuple(ToolResultBlock.from_api(r) for r in data["results"])
        except Exception as exc:
            raise TranscriptError(f"bad pending approvals: {exc!r:.200}") from exc
        if not calls:
            raise TranscriptError("bad pending approvals: no tool calls")
        return cls(calls, results)


def _same_call(call: ToolUseBlock, use: ToolUseBlock) -> bool:
    """Whether *call* is *use* exactly: compared as JSON, so that ``1`` and ``True``
    (equal in Python) or ``1`` and ``1.0`` differ as they do for a tool."""
    if (call.id, call.name, call.invalid_input) != (use.id, use.name, use.invalid_input):
        return False
    try:
        return _canonical(call) == _canonical(use)
    except (TypeError, ValueError, RecursionError):  # not JSON (built in memory)
        return call == use


def _canonical(block: ToolUseBlock) -> str:
    return json.dumps(block.to_api(), sort_keys=True, default=repr)


@attrs.frozen
class TurnEnd:
    """The last event of a turn.

    Attributes:
        reason: why the turn ended.
        usage: the usage of every model call of the turn, summed (dropped attempts
            included: they were billed).
        messages: the whole history after the turn (the messages passed to
            ``query`` plus every message the turn sent); valid for the API: each
            tool_use has its tool_result, so the conversation can go on from it.
        turns: the number of model turns used.
        error: the exception that ended the turn, for ``reason == "error"``; the
            finished blocks of the answer it cut are in *messages*.
        message: a short human-readable explanation, when there is one.
        abort_reason: for aborted turns, the cancel reason (``user_interrupted``,
            ``interrupt`` or ``permission_rejected``).
        context: the tools' shared context after the turn (as the context
            modifiers of its non-safe tools left it); pass it as ``context=`` to
            the next turn.
        pending: for ``reason == "awaiting_approval"``, the deferred calls (then
            *messages* ends with their answer, its tool uses not yet answered).
        output: with ``TurnOptions.output_type``, the validated typed output of a
            completed turn (an instance of that type); else None.
        subagents: the subagents' turns this turn's tools ran
            (:func:`trio_agent.subagent`), in the order they ended; their usage is in
            *usage*.
    """

    reason: TurnEndReason
    usage: Usage
    messages: tuple[Message, ...]
    turns: int
    error: Exception | None = None
    message: str | None = None
    abort_reason: AbortReason | None = None
    context: Any = None
    pending: PendingApprovals | None = None
    output: Any = None
    subagents: tuple[SubagentTurn, ...] = ()

    @property
    def subagent_turns(self) -> int:
        """How many subagent turns ran in this turn, at every depth."""
        return sum(1 + run.end.subagent_turns for run in self.subagents)


@attrs.frozen
class SubagentTurn:
    """A subagent's turn that a tool call of the turn ran (:attr:`TurnEnd.subagents`).

    Attributes:
        agent: the subagent's name.
        tool_use_id: the call that ran it.
        end: its own :class:`TurnEnd`: its history, usage (its own subagents'
            included), reason, and its subagents' turns.
    """

    agent: str
    tool_use_id: str
    end: TurnEnd


def _messages(value: Sequence[Message]) -> tuple[Message, ...]:
    return tuple(value)


@attrs.frozen
class State:
    """The loop's state between two model calls.

    Attributes:
        messages: the history so far (the request's messages).
        model: the model of the next call.
        max_tokens: the caller's ``max_tokens`` (or the default).
        default_max_tokens: the caller left ``max_tokens`` at its default, so it
            may be escalated (up to the model's output cap).
        output_cap: the model's output-token cap when known (or the caller's
            override), else None: no escalation past ``max_tokens``.
        turn_count: model turns started (1 for the first call).
        max_tokens_override: ``max_tokens`` after an escalation, else None.
        max_output_tokens_recovery_count: "continue" messages sent in this turn.
        has_attempted_compact: the compactor already ran for this turn.
        consecutive_compact_failures: compactor failures in a row; at
            ``MAX_CONSECUTIVE_COMPACT_FAILURES`` the turn stops auto-compacting.
        consecutive_overloaded: overloaded errors in a row.
        has_fallen_back: the fallback model is in use.
        dropped_started: the tools that had started in the attempts dropped since
            the last successful call (overloaded retries); a fallback reports them.
        call_retries: streamed retries of the current call after mid-stream failures.
        non_streaming: the next call is the last-resort non-streaming request.
        strip_thinking_before: thinking blocks of the first this many messages are
            left out of requests (they were signed by the primary model, before a
            fallback).
        stop_hook_active: a stop hook has blocked in this turn (the model is going on
            because of one); hooks receive it.
        stop_hook_blocks: how many times the stop hooks blocked in this turn.
        budget_continuations: token-budget continuations sent in this turn.
        output_attempts: typed outputs refused in this turn (invalid, or rejected by
            a validator); at ``output_retries`` the next refusal ends the turn.
        context: the tools' shared context (carried across calls and turns).
        paused: the answer that stopped with ``pause_turn``; it is sent as the last
            (assistant) message of the next request and merged with the
            continuation, so two assistant messages never follow each other.
        usage: usage of every call so far, summed.
        transition: why the previous iteration went on (None before the first).
    """

    messages: tuple[Message, ...] = attrs.field(converter=_messages)
    model: str
    max_tokens: int
    default_max_tokens: bool = False
    output_cap: int | None = None
    turn_count: int = 1
    max_tokens_override: int | None = None
    max_output_tokens_recovery_count: int = 0
    has_attempted_compact: bool = False
    consecutive_compact_failures: int = 0
    consecutive_overloaded: int = 0
    has_fallen_back: bool = False
    dropped_started: tuple[ToolUseBlock, ...] = ()
    call_retries: int = 0
    non_streaming: bool = False
    strip_thinking_before: int = 0
    stop_hook_active: bool = False
    stop_hook_blocks: int = 0
    budget_continuations: int = 0
    output_attempts: int = 0
    context: Any = None
    paused: AssistantMessage | None = None
    usage: Usage = attrs.field(factory=Usage)
    transition: Transition | None = None

    @property
    def effective_max_tokens(self) -> int:
        """The ``max_tokens`` of the next call."""
        return self.max_tokens if self.max_tokens_override is None else self.max_tokens_override


#: Everything :func:`trio_agent.query` sends.
QueryEvent: TypeAlias = (
    TextDelta
    | ThinkingDelta
    | ToolInputDelta
    | PartialOutput
    | BlockFinished
    | AssistantMessage
    | UserMessage
    | ToolProgress
    | ToolFinished
    | ToolResult
    | Compacted
    | AttemptDiscarded
    | Stall
    | CacheBust
    | ModelFallback
    | Transition
    | TurnEnd
)
