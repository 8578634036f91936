"""The Messages API events of an answer, as dicts (pure, sync).

What an assistant message streams as, before any bytes: ``message_start``, each
block's ``content_block_start`` / ``_delta`` / ``_stop``, ``message_delta``,
``message_stop``, with pings interleaved. The script's values (:mod:`._answers`)
read it to count deltas and list an answer's events; the SSE rendering
(:mod:`._sse_render`) encodes what it gives. It imports neither.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from .._messages import (
    AssistantMessage,
    ContentBlock,
    RedactedThinkingBlock,
    ServerToolUseBlock,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    _plain,  # pyright: ignore[reportPrivateUsage]
)

__all__ = [
    "Pacing",
    "block_deltas",
    "block_start",
    "chunks",
    "delta_count",
    "dumps",
    "message_events",
    "stream_events",
    "tool_json",
]


class Pacing(Protocol):
    """How an answer is cut into events (a :class:`~trio_agent.testing.Timing`)."""

    @property
    def text_chunk_size(self) -> int: ...
    @property
    def json_chunk_size(self) -> int: ...
    @property
    def ping_every(self) -> int | None: ...


def dumps(value: Any) -> str:
    """Compact JSON like the API's, non-ASCII kept raw (so byte splits land inside UTF-8)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def chunks(text: str, size: int) -> list[str]:
    """*text* in pieces of *size* characters."""
    return [text[i : i + size] for i in range(0, len(text), size)]


def tool_json(block: ToolUseBlock | ServerToolUseBlock) -> str:
    """The input JSON a tool use streams: its ``invalid_input`` if it has one."""
    if isinstance(block, ToolUseBlock) and block.invalid_input is not None:
        return block.invalid_input
    if not block.input:
        return ""
    return dumps(_plain(block.input))


def block_deltas(block: ContentBlock, pacing: Pacing) -> list[dict[str, Any]]:
    """The ``delta`` objects of one block's ``content_block_delta`` events."""
    if isinstance(block, TextBlock):
        deltas: list[dict[str, Any]] = [
            {"type": "text_delta", "text": piece}
            for piece in chunks(block.text, pacing.text_chunk_size)
        ]
        deltas.extend(
            {"type": "citations_delta", "citation": _plain(c)} for c in block.citations or ()
        )
        return deltas
    if isinstance(block, ThinkingBlock):
        deltas = [
            {"type": "thinking_delta", "thinking": piece}
            for piece in chunks(block.thinking, pacing.text_chunk_size)
        ]
        if block.signature:
            deltas.append({"type": "signature_delta", "signature": block.signature})
        return deltas
    if isinstance(block, ToolUseBlock | ServerToolUseBlock):
        # The API sends one empty partial_json for a tool without arguments.
        pieces = chunks(tool_json(block), pacing.json_chunk_size) or [""]
        return [{"type": "input_json_delta", "partial_json": piece} for piece in pieces]
    return []


def block_start(block: ContentBlock) -> dict[str, Any]:
    """The ``content_block`` of a ``content_block_start``: the block with empty fields."""
    if isinstance(block, TextBlock):
        start: dict[str, Any] = {"type": "text", "text": "", **_plain(block.extra)}
        if block.citations is not None:
            start["citations"] = []
        return start
    if isinstance(block, ThinkingBlock):
        return {"type": "thinking", "thinking": "", "signature": "", **_plain(block.extra)}
    if isinstance(block, ToolUseBlock | ServerToolUseBlock):
        # Everything but the input (caller, unknown keys) arrives in the start.
        return {**block.to_api(), "input": {}}
    if isinstance(block, RedactedThinkingBlock):
        return block.to_api()
    # Opaque and other blocks arrive whole in their start event.
    return block.to_api()


def delta_count(blocks: Iterable[ContentBlock], pacing: Pacing) -> int:
    """How many ``content_block_delta`` events *blocks* stream."""
    return sum(len(block_deltas(b, pacing)) for b in blocks)


def message_events(message: AssistantMessage, pacing: Pacing) -> list[dict[str, Any]]:
    """The raw event dicts that stream *message*, ``message_start`` ... ``message_stop``,
    with a ``ping`` after every ``pacing.ping_every`` events."""
    usage = message.usage.to_api()
    start_usage = {**usage, "output_tokens": min(1, message.usage.output_tokens)}
    start: dict[str, Any] = {
        "id": message.id,
        "type": "message",
        "role": "assistant",
        "model": message.model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": start_usage,
    }
    start.update(_plain(message.extra))
    events = stream_events(start, message, lambda block: block_deltas(block, pacing))
    return _with_pings(events, pacing.ping_every)


def stream_events(
    start: Mapping[str, Any],
    message: AssistantMessage,
    deltas: Callable[[ContentBlock], Iterable[Mapping[str, Any]]],
) -> list[dict[str, Any]]:
    """``message_start`` (with *start* as its message), each block's start, the
    ``deltas(block)`` that stream it and its stop, then ``message_delta`` and
    ``message_stop``: *message* as an event stream, no pings."""
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for index, block in enumerate(message.content):
        events.append(
            {"type": "content_block_start", "index": index, "content_block": block_start(block)}
        )
        events.extend(
            {"type": "content_block_delta", "index": index, "delta": delta}
            for delta in deltas(block)
        )
        events.append({"type": "content_block_stop", "index": index})
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": message.stop_reason, "stop_sequence": message.stop_sequence},
            "usage": {"output_tokens": message.usage.output_tokens},
        }
    )
    events.append({"type": "message_stop"})
    return events


def _with_pings(events: list[dict[str, Any]], every: int | None) -> list[dict[str, Any]]:
    if every is None:
        return events
    out: list[dict[str, Any]] = []
    for i, event in enumerate(events, start=1):
        out.append(event)
        if i % every == 0 and i < len(events):
            out.append({"type": "ping"})
    return out
