"""The loop's values: its frozen :class:`State`, the reasons it goes on or ends, and the
events :func:`trio_agent.query` sends besides messages and tool notices.

Every value here is ``attrs.frozen``; the loop moves :class:`State` forward with
``attrs.evolve`` and records why in ``State.transition``.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import TypeAlias

import attrs

from .._executor import AbortReason, ToolFinished, ToolProgress, ToolResult
from .._messages import AssistantMessage, ContentBlock, Message, ToolUseBlock, Usage, UserMessage

__all__ = [
    "BlockFinished",
    "Compacted",
    "ModelFallback",
    "QueryEvent",
    "State",
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
    #: Overloaded (after the client's own retries): the attempt was dropped and the
    #: same request is tried again, before falling back.
    OVERLOADED_RETRY = "overloaded_retry"


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
    """

    reason: TurnEndReason
    usage: Usage
    messages: tuple[Message, ...]
    turns: int
    error: Exception | None = None
    message: str | None = None
    abort_reason: AbortReason | None = None


def _messages(value: Sequence[Message]) -> tuple[Message, ...]:
    return tuple(value)


@attrs.frozen
class State:
    """The loop's state between two model calls.

    Attributes:
        messages: the history so far (the request's messages).
        model: the model of the next call.
        max_tokens: the caller's ``max_tokens``.
        turn_count: model turns started (1 for the first call).
        max_tokens_override: ``max_tokens`` after an escalation, else None.
        max_output_tokens_recovery_count: "continue" messages sent in this turn.
        has_attempted_compact: the compactor already ran for this turn.
        consecutive_overloaded: overloaded errors in a row.
        has_fallen_back: the fallback model is in use.
        dropped_started: the tools that had started in the attempts dropped since
            the last successful call (overloaded retries); a fallback reports them.
        paused: the answer that stopped with ``pause_turn``; it is sent as the last
            (assistant) message of the next request and merged with the
            continuation, so two assistant messages never follow each other.
        usage: usage of every call so far, summed.
        transition: why the previous iteration went on (None before the first).
    """

    messages: tuple[Message, ...] = attrs.field(converter=_messages)
    model: str
    max_tokens: int
    turn_count: int = 1
    max_tokens_override: int | None = None
    max_output_tokens_recovery_count: int = 0
    has_attempted_compact: bool = False
    consecutive_overloaded: int = 0
    has_fallen_back: bool = False
    dropped_started: tuple[ToolUseBlock, ...] = ()
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
    | BlockFinished
    | AssistantMessage
    | UserMessage
    | ToolProgress
    | ToolFinished
    | ToolResult
    | Compacted
    | ModelFallback
    | Transition
    | TurnEnd
)
