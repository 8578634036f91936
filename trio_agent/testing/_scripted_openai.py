"""Rendering a scripted answer as OpenAI server-sent events (pure, sync).

The same :class:`ScriptedAnswer` (blocks, stop reason, usage, timing, faults) that
:mod:`._sse_render` streams as Messages API events is streamed here as the Responses
API (``api="responses"``) or Chat Completions (``api="chat"``) would stream it, byte
for byte in the shapes of the API (``sequence_number``, ``item_id``, the Chat
``[DONE]`` sentinel...). A :class:`ScriptedModel` built with
``protocol="openai-responses"`` or ``"openai-chat"`` serves these.

What the blocks become:

- :class:`TextBlock`: a ``message`` item with one ``output_text`` part (a
  ``refusal`` part when ``stop_reason == "refusal"``); in Chat, ``content`` deltas
  (consecutive text blocks merge: Chat has one content string).
- :class:`ToolUseBlock`: a ``function_call`` item (``call_id`` is the block's id) /
  a Chat ``tool_calls`` entry; its JSON streams in ``json_chunk_size`` pieces.
- :class:`OpaqueBlock`: a Responses output item sent whole (e.g. ``reasoning``);
  Chat cannot carry one.

``stop_reason == "max_tokens"`` ends with ``response.incomplete`` /
``finish_reason: "length"``. Timing: ``first_event_delay`` before the first event,
``block_delay`` before each item (Chat: each block's first chunk), ``token_delay``
before each delta. Pings are SSE comments (``: ping``): bytes, no event. Faults apply
as for the Messages API; the error event is OpenAI's (an ``error`` event / a chunk
holding ``error``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeAlias

from .._messages import (
    OpaqueBlock,
    TextBlock,
    ToolUseBlock,
    Usage,
    _plain,  # pyright: ignore[reportPrivateUsage]
)
from ._answers import ScriptedAnswer
from ._message_events import chunks, dumps
from ._sse_render import BOM, StreamPlan, plan_segments, stall_segments

__all__ = [
    "DONE_LINE",
    "OpenAIWire",
    "openai_events",
    "openai_final",
    "plan_openai_stream",
    "render_openai_sse",
]

OpenAIWire: TypeAlias = Literal["responses", "chat"]

#: Chat Completions' last event, as the event list holds it (it is not JSON).
DONE_LINE = "[DONE]"

_ERROR_CODES = {
    "overloaded_error": "server_is_overloaded",
    "api_error": "server_error",
    "rate_limit_error": "rate_limit_exceeded",
}


def _arguments(block: ToolUseBlock) -> str:
    if block.invalid_input is not None:
        return block.invalid_input
    return dumps(_plain(block.input)) if block.input else "{}"


def _responses_usage(usage: Usage) -> dict[str, Any]:
    cached = usage.cache_read_input_tokens or 0
    total_in = usage.input_tokens + cached
    return {
        "input_tokens": total_in,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": total_in + usage.output_tokens,
    }


def _chat_usage(usage: Usage) -> dict[str, Any]:
    cached = usage.cache_read_input_tokens or 0
    total_in = usage.input_tokens + cached
    return {
        "prompt_tokens": total_in,
        "completion_tokens": usage.output_tokens,
        "total_tokens": total_in + usage.output_tokens,
        "prompt_tokens_details": {"cached_tokens": cached},
    }


Timed: TypeAlias = tuple[str, dict[str, Any] | str]  # (delay kind, event or DONE_LINE)


def _responses(answer: ScriptedAnswer) -> list[Timed]:
    timing = answer.timing
    refusal = answer.resolved_stop_reason == "refusal"
    rid = answer.resolved_id
    out: list[Timed] = []

    def event(kind: str, etype: str, **fields: Any) -> None:
        out.append((kind, {"type": etype, "sequence_number": len(out), **fields}))

    base: dict[str, Any] = {
        "id": rid,
        "object": "response",
        "created_at": 0,
        "status": "in_progress",
        "model": answer.model,
        "output": [],
        "usage": None,
    }
    event("first", "response.created", response=base)
    event("", "response.in_progress", response=base)
    items: list[dict[str, Any]] = []
    for position, block in enumerate(answer.blocks):
        if isinstance(block, TextBlock):
            item_id = f"msg_{position}"
            ptype, dtype = (
                ("refusal", "response.refusal")
                if refusal
                else ("output_text", "response.output_text")
            )
            field = "refusal" if refusal else "text"
            empty: dict[str, Any] = {"type": ptype, field: ""}
            if not refusal:
                empty["annotations"] = []
            item: dict[str, Any] = {
                "id": item_id,
                "type": "message",
                "status": "in_progress",
                "role": "assistant",
                "content": [],
            }
            event("block", "response.output_item.added", output_index=position, item=item)
            where = {"item_id": item_id, "output_index": position, "content_index": 0}
            event("", "response.content_part.added", **where, part=empty)
            for piece in chunks(block.text, timing.text_chunk_size):
                extra: dict[str, Any] = {} if refusal else {"logprobs": []}
                event("token", f"{dtype}.delta", **where, delta=piece, **extra)
            event("", f"{dtype}.done", **where, **{field: block.text})
            part = {**empty, field: block.text}
            if not refusal:
                part["annotations"] = [_plain(c) for c in block.citations or ()]
            event("", "response.content_part.done", **where, part=part)
            done = {**item, "status": "completed", "content": [part]}
        elif isinstance(block, ToolUseBlock):
            arguments = _arguments(block)
            item = {
                "id": f"fc_{position}",
                "type": "function_call",
                "status": "in_progress",
                "arguments": "",
                "call_id": block.id,
                "name": block.name,
            }
            event("block", "response.output_item.added", output_index=position, item=item)
            for piece in chunks(arguments, timing.json_chunk_size):
                event(
                    "token",
                    "response.function_call_arguments.delta",
                    item_id=item["id"],
                    output_index=position,
                    delta=piece,
                )
            event(
                "",
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=position,
                arguments=arguments,
            )
            done = {**item, "status": "completed", "arguments": arguments}
        elif isinstance(block, OpaqueBlock):
            done = block.to_api()
            event("block", "response.output_item.added", output_index=position, item=done)
        else:
            raise ValueError(f"a {block.type!r} block has no Responses API form")
        event("", "response.output_item.done", output_index=position, item=done)
        items.append(done)
    final = {**base, "output": items, "usage": _responses_usage(answer.resolved_usage)}
    if answer.resolved_stop_reason == "max_tokens":
        final.update(status="incomplete", incomplete_details={"reason": "max_output_tokens"})
        event("", "response.incomplete", response=final)
    else:
        final.update(status="completed")
        event("", "response.completed", response=final)
    return out


_FINISH = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length", "refusal": "stop"}


def _chat(answer: ScriptedAnswer) -> list[Timed]:
    timing = answer.timing
    refusal = answer.resolved_stop_reason == "refusal"
    out: list[Timed] = []

    def chunk(kind: str, delta: dict[str, Any], finish: str | None = None) -> None:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        out.append(
            (
                kind,
                {
                    "id": answer.resolved_id,
                    "object": "chat.completion.chunk",
                    "created": 0,
                    "model": answer.model,
                    "choices": [choice],
                },
            )
        )

    chunk("first", {"role": "assistant", "content": "", "refusal": None})
    call = 0
    for block in answer.blocks:
        if isinstance(block, TextBlock):
            field = "refusal" if refusal else "content"
            for i, piece in enumerate(chunks(block.text, timing.text_chunk_size)):
                chunk("block" if i == 0 else "token", {field: piece})
        elif isinstance(block, ToolUseBlock):
            start = {"index": call, "id": block.id, "type": "function"}
            chunk(
                "block",
                {"tool_calls": [{**start, "function": {"name": block.name, "arguments": ""}}]},
            )
            for piece in chunks(_arguments(block), timing.json_chunk_size):
                chunk("token", {"tool_calls": [{"index": call, "function": {"arguments": piece}}]})
            call += 1
        else:
            raise ValueError(f"a {block.type!r} block has no Chat Completions form")
    reason = answer.resolved_stop_reason
    chunk("", {}, _FINISH.get(reason, reason))
    out.append(
        (
            "",
            {
                "id": answer.resolved_id,
                "object": "chat.completion.chunk",
                "created": 0,
                "model": answer.model,
                "choices": [],
                "usage": _chat_usage(answer.resolved_usage),
            },
        )
    )
    out.append(("", DONE_LINE))
    return out


def _timed(answer: ScriptedAnswer, api: OpenAIWire) -> list[Timed]:
    return _responses(answer) if api == "responses" else _chat(answer)


def openai_events(answer: ScriptedAnswer, api: OpenAIWire) -> list[dict[str, Any] | str]:
    """The events of *answer* as the API streams them (Chat ends with :data:`DONE_LINE`);
    faults are not applied."""
    return [event for _, event in _timed(answer, api)]


def _error(answer: ScriptedAnswer, api: OpenAIWire, sequence: int) -> dict[str, Any]:
    code = _ERROR_CODES.get(answer.faults.error_type, answer.faults.error_type)
    message = f"scripted {code}"
    if api == "responses":
        return {
            "type": "error",
            "code": code,
            "message": message,
            "param": None,
            "sequence_number": sequence,
        }
    return {"error": {"message": message, "type": code, "code": code, "param": None}}


def _encode(event: Mapping[str, Any] | str, le: str) -> bytes:
    if isinstance(event, str):
        return f"data: {event}{le}{le}".encode()
    name = event.get("type")
    head = f"event: {name}{le}" if isinstance(name, str) else ""
    return f"{head}data: {dumps(_plain(event))}{le}{le}".encode()


def _segments(answer: ScriptedAnswer, api: OpenAIWire) -> list[tuple[float, bytes]]:
    timing, faults = answer.timing, answer.faults
    le = faults.line_ending
    timed = _timed(answer, api)
    if faults.truncate:
        timed = timed[:-1]  # no response.completed / no [DONE]
    if faults.error_event_after is not None:
        timed = [
            *timed[: faults.error_event_after + 1],
            ("", _error(answer, api, faults.error_event_after + 1)),
        ]
    delays = {
        "first": timing.first_event_delay,
        "block": timing.block_delay,
        "token": timing.token_delay,
    }
    ping = f": ping{le}{le}".encode()
    segments: list[tuple[float, bytes]] = []
    stall_at = (
        None if faults.stall_before_event is None else min(faults.stall_before_event, len(timed))
    )
    for i, entry in enumerate([*timed, None]):
        delay = delays.get(entry[0], 0.0) if entry is not None else 0.0
        if i == stall_at:
            delay += stall_segments(faults, ping, segments)
        if entry is not None:
            segments.append((delay, _encode(entry[1], le)))
            if (
                timing.ping_every is not None
                and (i + 1) % timing.ping_every == 0
                and i + 1 < len(timed)
            ):
                segments.append((0.0, ping))
        elif delay > 0:
            segments.append((delay, b""))
    if faults.bom:
        segments[0] = (segments[0][0], BOM + segments[0][1])
    return segments


def plan_openai_stream(answer: ScriptedAnswer, api: OpenAIWire) -> StreamPlan:
    """The chunks to send for *answer* in OpenAI's format, timing and faults applied."""
    return plan_segments(_segments(answer, api), answer.faults)


def render_openai_sse(answer: ScriptedAnswer, api: OpenAIWire) -> bytes:
    """The exact bytes a client receives for *answer*, faults included."""
    return plan_openai_stream(answer, api).data


def openai_final(answer: ScriptedAnswer, api: OpenAIWire) -> dict[str, Any]:
    """The answer to a non-streaming request (``stream: false``): the Responses API's
    finished ``response`` object, or a ``chat.completion``; faults are not applied."""
    if api == "responses":
        last = _responses(answer)[-1][1]
        assert isinstance(last, dict)
        return dict(last["response"])
    refusal = answer.resolved_stop_reason == "refusal"
    text = "".join(b.text for b in answer.blocks if isinstance(b, TextBlock))
    calls: list[dict[str, Any]] = []
    for block in answer.blocks:
        if isinstance(block, ToolUseBlock):
            function = {"name": block.name, "arguments": _arguments(block)}
            calls.append({"id": block.id, "type": "function", "function": function})
        elif not isinstance(block, TextBlock):
            raise ValueError(f"a {block.type!r} block has no Chat Completions form")
    message: dict[str, Any] = {
        "role": "assistant",
        "content": None if refusal or not text else text,
        "refusal": text if refusal else None,
    }
    if calls:
        message["tool_calls"] = calls
    reason = answer.resolved_stop_reason
    return {
        "id": answer.resolved_id,
        "object": "chat.completion",
        "created": 0,
        "model": answer.model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": _FINISH.get(reason, reason),
            }
        ],
        "usage": _chat_usage(answer.resolved_usage),
    }
