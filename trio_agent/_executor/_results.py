"""What the executor hands back: results, progress, abort reasons, statistics.

Also the wording of the results the executor makes up itself (unknown tool,
invalid input, a tool that raised, a call cancelled before or while running):
they are read by the model, so they say what happened in plain words.
Everything here is pure and synchronous: a synthetic result never needs an
``await``, so it can be built even inside a cancelled scope.
"""

from __future__ import annotations

import enum
import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from .._exceptions import excerpt
from .._messages import (
    ContentBlock,
    TextBlock,
    ToolResultBlock,
    block_from_api,
    clean_json,
    clean_text,
)

__all__ = [
    "AbortReason",
    "ExecutorStatistics",
    "ToolFinished",
    "ToolProgress",
    "ToolResult",
    "summarize_call",
]


class AbortReason(enum.StrEnum):
    """Why the executor cancelled a tool call, or never started it.

    Each value is also the ``reason`` given to ``CancelScope.cancel()``.
    """

    #: A tool with ``cancels_siblings_on_error`` failed; its siblings are cancelled.
    SIBLING_ERROR = "sibling_error"
    #: The turn scope was cancelled from outside (Ctrl+C, ``abort()``).
    USER_INTERRUPTED = "user_interrupted"
    #: ``executor.interrupt()``: the user typed a new message.
    INTERRUPT = "interrupt"
    #: ``can_use_tool`` answered :class:`~trio_agent.Reject`: the turn ends.
    PERMISSION_REJECTED = "permission_rejected"
    #: ``executor.discard()``: the model's response failed (an API or stream error);
    #: the loop keeps it when the error ends the turn, drops it when it retries.
    STREAMING_FALLBACK = "streaming_fallback"


def result_content(content: str | Sequence[ContentBlock]) -> str | tuple[ContentBlock, ...]:
    """A result's content as it may enter the history: text UTF-8 can carry (a lone
    surrogate from a tool becomes U+FFFD), blocks as a tuple (their text is cleaned
    by the blocks themselves)."""
    return clean_text(content) if isinstance(content, str) else tuple(content)


@attrs.frozen
class ToolResult:
    """The one answer to one ``tool_use`` block.

    Attributes:
        tool_use_id: the id of the ``tool_use`` block this answers.
        content: text, or a tuple of content blocks.
        is_error: whether the model should read this as a failure.
        abort_reason: set when the executor cancelled the call or never ran it.
        started: whether the tool's ``run`` had been called (its side effects
            may have happened even when it was cancelled).
        deferred: ``can_use_tool`` answered :class:`~trio_agent.Defer`: the tool did
            not run and the call waits for approval; *content* is what the model
            reads if the turn ends before the approval comes.
    """

    tool_use_id: str
    content: str | tuple[ContentBlock, ...] = attrs.field(converter=result_content)
    is_error: bool = attrs.field(default=False, kw_only=True)
    abort_reason: AbortReason | None = attrs.field(default=None, kw_only=True)
    started: bool = attrs.field(default=False, kw_only=True)
    deferred: bool = attrs.field(default=False, kw_only=True)

    def to_block(self) -> ToolResultBlock:
        """The ``tool_result`` block to send back to the model."""
        return ToolResultBlock(self.tool_use_id, self.content, is_error=self.is_error)


@attrs.frozen
class ToolProgress:
    """Progress a running tool reported with ``ctx.progress(data)``.

    Attributes:
        tool_use_id: the call that reported.
        data: what it reported.
        dropped: earlier reports of the same call this one replaced, because they
            were not received yet (progress is coalesced, so it stays bounded).
    """

    tool_use_id: str
    data: Any
    dropped: int = attrs.field(default=0, kw_only=True)


@attrs.frozen
class ToolFinished:
    """Sent on ``executor.progress`` the moment a call's result is final."""

    tool_use_id: str
    is_error: bool
    abort_reason: AbortReason | None = None


@attrs.frozen
class ExecutorStatistics:
    """A snapshot of an executor (``executor.statistics()``).

    ``queued + executing + finished`` is the number of calls added.

    Attributes:
        queued: calls waiting for their turn.
        executing: calls started whose result is not final yet.
        finished: calls whose result is final (delivered or not).
        peak_concurrency: the most tool tasks that ever ran at once.
    """

    queued: int
    executing: int
    finished: int
    peak_concurrency: int


# The wording of the results the executor makes up itself.


def summarize_call(name: str, input: Mapping[str, Any], *, limit: int = 40) -> str:
    """``Bash(mkdir x)``: a tool call in a few words (at most *limit* characters
    of its input), for messages to the model and for the live view."""
    text = ""
    for value in input.values():
        if isinstance(value, str):
            text = value
            break
    else:
        if input:
            first = next(iter(input.values()))
            try:
                text = json.dumps(first, default=str)
            except ValueError:  # circular structure: fall back to repr
                text = repr(first)
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return f"{name}({text})"


def unknown_tool_message(name: str, known: Sequence[str]) -> str:
    """The error for a call to a tool that does not exist, in Claude Code's words
    (``<tool_use_error>Error: No such tool available: X</tool_use_error>``), with the
    tools that do."""
    available = ", ".join(sorted(known)) if known else "(none)"
    return (
        f"<tool_use_error>Error: No such tool available: {name}. "
        f"Available tools: {available}</tool_use_error>"
    )


def invalid_input_message(name: str, error: str) -> str:
    """The error for a call whose input is not valid, wrapped as Claude Code wraps it:
    ``<tool_use_error>InputValidationError: ...</tool_use_error>``."""
    return f"<tool_use_error>InputValidationError: {name}: {error}</tool_use_error>"


def describe(exc: BaseException) -> str:
    """``str(exc)``, even for an exception whose ``__str__`` (and ``__repr__``) raise."""
    for render in (str, repr):
        try:
            return render(exc)
        except Exception:
            continue
    return "(its __str__ and __repr__ raised)"


def raised_message(name: str, exc: BaseException) -> str:
    """The error for a tool that raised."""
    detail = describe(exc)
    kind = type(exc).__name__
    return f"Error: {name} raised {kind}: {detail}" if detail else f"Error: {name} raised {kind}"


def bad_return_message(name: str, what: str) -> str:
    """The error for a tool that returned something the model cannot read (*what*:
    its type, e.g. ``bytes`` or ``a list holding ToolUseBlock``)."""
    return (
        f"Error: {name} returned {what}, expected a str, a list of text / image / "
        "document / search_result blocks, or a ToolOutput"
    )


def unsendable_message(name: str, problem: str) -> str:
    """The error for a tool whose returned blocks no model request can carry
    (*problem*: what encoding them raised)."""
    return f"Error: {name} returned a result that cannot be sent to the model ({problem})"


def sendable_blocks(blocks: Sequence[ContentBlock]) -> tuple[ContentBlock, ...] | str:
    """*blocks* as a model request carries them, or what is wrong with them.

    A block's lone surrogates become U+FFFD, as text's do (an opaque block's data is
    rebuilt only when something needed cleaning). Blocks the request's JSON cannot
    encode (a ``datetime`` or a set in an opaque block, NaN, nesting too deep) give
    the error's description instead: the call is then answered with
    :func:`unsendable_message`, and the turn goes on.
    """
    out: list[ContentBlock] = []
    try:
        for block in blocks:
            if type(block) is TextBlock and block.citations is None and not block.extra:
                # Plain text (most results): its converter cleaned the text, and a
                # clean string always encodes, so there is no JSON to build and check.
                out.append(block)
                continue
            data = block.to_api()
            clean = clean_json(data)
            # What the model request needs of it (httpx's encoding of the body).
            json.dumps(clean, ensure_ascii=False, allow_nan=False)
            out.append(block if clean is data else block_from_api(clean))
    except Exception as exc:  # TypeError, ValueError (NaN), RecursionError...
        return f"{type(exc).__name__}: {excerpt(describe(exc))}"
    return tuple(out)


def permission_error_message(name: str, exc: BaseException) -> str:
    """The error for a permission check that raised or answered nonsense."""
    return f"Error: the permission check for {name} failed: {type(exc).__name__}: {describe(exc)}"


def truncation_note(total: int, limit: int) -> str:
    """What the model reads where a result was cut."""
    return (
        f"\n\n[Output truncated: {total - limit:,} of {total:,} characters were cut "
        f"(the limit is {limit:,} characters).]"
    )


def cap_content(
    content: str | tuple[ContentBlock, ...], limit: int
) -> str | tuple[ContentBlock, ...]:
    """*content* with its text cut to *limit* characters, and a note of the cut.

    For a list of blocks the text blocks count (in order); other blocks (images,
    documents) are kept whole.
    """
    if isinstance(content, str):
        if len(content) <= limit:
            return content
        return content[:limit] + truncation_note(len(content), limit)
    total = sum(len(b.text) for b in content if isinstance(b, TextBlock))
    if total <= limit:
        return content
    room = limit
    out: list[ContentBlock] = []
    for block in content:
        if isinstance(block, TextBlock):
            if room <= 0:
                continue
            if len(block.text) > room:
                block = TextBlock(block.text[:room])
            room -= len(block.text)
        out.append(block)
    out.append(TextBlock(truncation_note(total, limit).lstrip("\n")))
    return tuple(out)


@functools.lru_cache(maxsize=64)  # a cascade words the same message for every sibling
def aborted_message(reason: AbortReason, *, started: bool, culprit: str | None) -> str:
    """What the model reads for a call the executor cancelled or never ran.

    Args:
        reason: why.
        started: whether the tool had started (it may have partly run).
        culprit: the call that caused it (``Bash(mkdir x)``), when known.
    """
    tail = (
        " It was stopped while running and may have partly completed."
        if started
        else " It was not run."
    )
    if reason is AbortReason.SIBLING_ERROR:
        who = culprit or "another call"
        return f"Cancelled: parallel tool call {who} errored.{tail}"
    if reason is AbortReason.INTERRUPT:
        return f"Interrupted: the user sent a new message.{tail}"
    if reason is AbortReason.PERMISSION_REJECTED:
        who = f"tool call {culprit}" if culprit else "another tool call"
        return f"Cancelled: the user rejected {who}, ending the turn.{tail}"
    if reason is AbortReason.STREAMING_FALLBACK:
        return (
            "Cancelled: the model's response stream failed before this call finished "
            f"(an API or stream error).{tail}"
        )
    return (
        "Interrupted by the user: the user doesn't want to proceed with this tool "
        f"use.{tail} Wait for the user to tell you how to proceed."
    )
