"""The OpenAI Responses API (``POST /responses``): its body and its events.

The body: the history stays canonical (Anthropic-shaped) everywhere else; here it
becomes Responses ``input`` items:

========================  ====================================
canonical                 Responses API (``input`` items)
========================  ====================================
system prompt             ``instructions``
user text                 a ``user`` message
``TextBlock`` (answer)    an ``assistant`` message
``ToolUseBlock``          a ``function_call`` item
``ToolResultBlock``       a ``function_call_output`` item
``OpaqueBlock`` (an       the item, verbatim (reasoning
OpenAI output item)       round-trips)
``ThinkingBlock``,        dropped: their signatures only
``RedactedThinkingBlock`` mean something to Anthropic
========================  ====================================

The events: :class:`ResponsesEvents` translates one decoded Responses event at a time
into the ``message_start`` ... ``message_stop`` events the :class:`MessageAccumulator`
and every consumer already understand: text deltas stay text deltas (a UI needs no
change), each function call becomes a ``tool_use`` block whose ``content_block_stop``
is emitted at ``response.output_item.done``, so the executor starts it while later
output still streams. Other output items (reasoning, built-in tool calls) become
opaque blocks holding the item verbatim, so they round-trip into the next request.
Stop reasons and usage are mapped; errors inside the stream raise typed errors. A
non-streaming answer (a ``response`` object) is translated as the events it would have
come as (:func:`responses_object_events`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast, final

import attrs

from .._exceptions import StreamProtocolError, excerpt
from .._messages import (
    AssistantMessage,
    OpaqueBlock,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
    _plain,  # pyright: ignore[reportPrivateUsage]
)
from ._openai_shared import (
    DROPPED,
    OUTPUT_FORMAT_NAME,
    Event,
    OpenAIProvider,
    block_delta,
    block_stop,
    call_arguments,
    canonical_message,
    canonical_usage,
    int_field,
    mapping_field,
    message_start,
    openai_stream_error,
    refuse,
    result_text,
    str_field,
    system_text,
    tool_schema,
    violation,
)
from ._protocol import ToolLike
from ._provider import ModelRequest

__all__ = ["ResponsesEvents", "ResponsesProvider", "responses_object_events"]


# -- the body --------------------------------------------------------------------------


def _user_items(message: UserMessage) -> list[dict[str, Any]]:
    if isinstance(message.content, str):
        return [{"role": "user", "content": message.content}]
    items: list[dict[str, Any]] = []
    texts: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, ToolResultBlock):
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": block.tool_use_id,
                    "output": result_text(block, "responses"),
                }
            )
        elif isinstance(block, TextBlock):
            texts.append({"type": "input_text", "text": block.text})
        else:
            raise refuse(f"a user {block.type!r} block", "responses")
    if texts:  # after the outputs: they answer the previous assistant message
        items.append({"role": "user", "content": texts})
    return items


def _assistant_items(message: AssistantMessage) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            items.append({"role": "assistant", "content": block.text})
        elif isinstance(block, ToolUseBlock):
            items.append(
                {
                    "type": "function_call",
                    "call_id": block.id,
                    "name": block.name,
                    "arguments": call_arguments(block),
                }
            )
        elif isinstance(block, OpaqueBlock):
            items.append(block.to_api())
        elif not isinstance(block, DROPPED):
            raise refuse(f"an assistant {block.type!r} block", "responses")
    return items


def _responses_tool(tool: ToolLike) -> dict[str, Any]:
    schema = tool_schema(tool)
    if schema is None:
        return _plain(tool)
    name, description, parameters = schema
    # strict defaults to true in the Responses API, which rejects most schemas.
    out: dict[str, Any] = {"type": "function", "name": name, "parameters": parameters}
    if description:
        out["description"] = description
    out["strict"] = False
    return out


# -- the events ------------------------------------------------------------------------
_RESPONSES_STOP = {"max_output_tokens": "max_tokens", "content_filter": "refusal"}


@attrs.define(eq=False)
class _Call:
    """A function call being streamed: its block index, and whether it got arguments."""

    index: int
    arguments: int = 0


class ResponsesEvents:
    """Translates Responses API stream events into canonical stream events.

    ``feed(event)`` returns the canonical events it produced (often none); it raises
    :class:`StreamProtocolError` for a broken protocol and a typed
    :class:`APIStatusError` for an ``error`` event or ``response.failed``.
    """

    def __init__(self) -> None:
        self.events = 0
        self.ignored = 0
        self._started = False
        self._blocks = 0
        self._parts: dict[tuple[int, int], int] = {}
        self._calls: dict[int, _Call] = {}
        self._tool_use = False
        self._refusal = False

    def _open(self, content_block: Mapping[str, Any], out: list[Event]) -> int:
        index = self._blocks
        self._blocks += 1
        out.append({"type": "content_block_start", "index": index, "content_block": content_block})
        return index

    def feed(self, event: Mapping[str, Any]) -> list[Event]:
        self.events += 1
        etype = event.get("type")
        if etype == "error":
            raise openai_stream_error(event, event)
        if not self._started:
            if etype != "response.created":
                raise violation(f"{etype!r} before response.created", event)
            self._started = True
            return [message_start(mapping_field(event, "response"), event)]
        handler = _RESPONSES_HANDLERS.get(etype) if isinstance(etype, str) else None
        if handler is None:
            self.ignored += 1
            return []
        out: list[Event] = []
        handler(self, event, out)
        return out

    def _item_added(self, event: Mapping[str, Any], out: list[Event]) -> None:
        item = mapping_field(event, "item")
        if item.get("type") != "function_call":
            return  # messages open blocks per content part; other items at their done
        position = int_field(event, "output_index")
        if position in self._calls:
            raise violation(f"a second function call at output_index {position}", event)
        start: Event = {
            "type": "tool_use",
            "id": str_field(item, "call_id"),
            "name": str_field(item, "name"),
            "input": {},
        }
        call = self._calls[position] = _Call(self._open(start, out))
        arguments = item.get("arguments")
        if isinstance(arguments, str) and arguments:
            call.arguments += len(arguments)
            out.append(block_delta(call.index, "input_json_delta", "partial_json", arguments))

    def _part_added(self, event: Mapping[str, Any], out: list[Event]) -> None:
        part = mapping_field(event, "part")
        ptype = part.get("type")
        if ptype not in ("output_text", "refusal"):
            self.ignored += 1
            return
        key = (int_field(event, "output_index"), int_field(event, "content_index"))
        if key in self._parts:
            raise violation(f"a second content part {key}", event)
        index = self._parts[key] = self._open({"type": "text", "text": ""}, out)
        text = part.get("text" if ptype == "output_text" else "refusal")
        if isinstance(text, str) and text:
            out.append(block_delta(index, "text_delta", "text", text))

    def _text_delta(self, event: Mapping[str, Any], out: list[Event]) -> None:
        key = (int_field(event, "output_index"), int_field(event, "content_index"))
        index = self._parts.get(key)
        if index is None:
            raise violation(f"a text delta for unknown content part {key}", event)
        if event.get("type") == "response.refusal.delta":
            self._refusal = True
        out.append(block_delta(index, "text_delta", "text", str_field(event, "delta")))

    def _part_done(self, event: Mapping[str, Any], out: list[Event]) -> None:
        key = (int_field(event, "output_index"), int_field(event, "content_index"))
        index = self._parts.pop(key, None)
        if index is None:
            self.ignored += 1  # a part this translator did not open (not text)
            return
        part = event.get("part")
        annotations = part.get("annotations") if isinstance(part, Mapping) else None  # pyright: ignore[reportUnknownVariableType]
        if isinstance(annotations, list):
            for annotation in cast("list[Any]", annotations):
                if isinstance(annotation, Mapping):
                    out.append(
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "citations_delta", "citation": annotation},
                        }
                    )
        out.append(block_stop(index))

    def _arguments_delta(self, event: Mapping[str, Any], out: list[Event]) -> None:
        call = self._calls.get(int_field(event, "output_index"))
        if call is None:
            raise violation("function call arguments for no open function call", event)
        delta = str_field(event, "delta")
        call.arguments += len(delta)
        out.append(block_delta(call.index, "input_json_delta", "partial_json", delta))

    def _item_done(self, event: Mapping[str, Any], out: list[Event]) -> None:
        item = mapping_field(event, "item")
        position = int_field(event, "output_index")
        itype = item.get("type")
        if itype == "function_call":
            call = self._calls.pop(position, None)
            if call is None:
                raise violation("output_item.done for a function call never added", event)
            arguments = item.get("arguments")
            # A server that sent no deltas still sends the whole arguments here.
            if call.arguments == 0 and isinstance(arguments, str) and arguments:
                out.append(block_delta(call.index, "input_json_delta", "partial_json", arguments))
            self._tool_use = True
            out.append(block_stop(call.index))  # the call is complete: hand it over now
        elif itype == "message":
            for key in [k for k in self._parts if k[0] == position]:
                out.append(block_stop(self._parts.pop(key)))
        elif isinstance(itype, str):
            if "input" in item:
                # The accumulator reads "input" as streamed tool input JSON.
                raise violation(f"an output item of type {itype!r} is not supported", event)
            index = self._open(item, out)
            out.append(block_stop(index))
        else:
            raise violation("an output item without a type", event)

    def _completed(self, event: Mapping[str, Any], out: list[Event]) -> None:
        response = mapping_field(event, "response")
        status = response.get("status")
        if event.get("type") == "response.incomplete" or status == "incomplete":
            details = response.get("incomplete_details")
            reason = details.get("reason") if isinstance(details, Mapping) else None  # pyright: ignore[reportUnknownVariableType]
            stop_reason = _RESPONSES_STOP.get(
                reason if isinstance(reason, str) else "", "max_tokens"
            )
        elif self._refusal:
            stop_reason = "refusal"
        elif self._tool_use:
            stop_reason = "tool_use"
        else:
            stop_reason = "end_turn"
        delta: Event = {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
        }
        usage = canonical_usage(
            response.get("usage"), "input_tokens", "output_tokens", "input_tokens_details"
        )
        if usage is not None:
            delta["usage"] = usage
        out.append(delta)
        out.append({"type": "message_stop"})

    def _failed(self, event: Mapping[str, Any], out: list[Event]) -> None:
        response = mapping_field(event, "response")
        raise openai_stream_error(response.get("error"), event)

    def _known(self, event: Mapping[str, Any], out: list[Event]) -> None:
        pass  # carries nothing the canonical message does not have already


_RESPONSES_HANDLERS: dict[str, Any] = {
    "response.output_item.added": ResponsesEvents._item_added,  # pyright: ignore[reportPrivateUsage]
    "response.content_part.added": ResponsesEvents._part_added,  # pyright: ignore[reportPrivateUsage]
    "response.output_text.delta": ResponsesEvents._text_delta,  # pyright: ignore[reportPrivateUsage]
    "response.refusal.delta": ResponsesEvents._text_delta,  # pyright: ignore[reportPrivateUsage]
    "response.content_part.done": ResponsesEvents._part_done,  # pyright: ignore[reportPrivateUsage]
    "response.function_call_arguments.delta": ResponsesEvents._arguments_delta,  # pyright: ignore[reportPrivateUsage]
    "response.output_item.done": ResponsesEvents._item_done,  # pyright: ignore[reportPrivateUsage]
    "response.completed": ResponsesEvents._completed,  # pyright: ignore[reportPrivateUsage]
    "response.incomplete": ResponsesEvents._completed,  # pyright: ignore[reportPrivateUsage]
    "response.failed": ResponsesEvents._failed,  # pyright: ignore[reportPrivateUsage]
    "response.in_progress": ResponsesEvents._known,  # pyright: ignore[reportPrivateUsage]
    "response.output_text.done": ResponsesEvents._known,  # pyright: ignore[reportPrivateUsage]
    "response.refusal.done": ResponsesEvents._known,  # pyright: ignore[reportPrivateUsage]
    "response.function_call_arguments.done": ResponsesEvents._known,  # pyright: ignore[reportPrivateUsage]
}


def responses_object_events(response: Any) -> list[Mapping[str, Any]]:
    """The stream events a finished Responses API ``response`` object would have
    come as, for :class:`ResponsesEvents`: a non-streaming answer (``stream: false``)
    is translated exactly as a streamed one.

    Raises:
        StreamProtocolError: *response* is not a response object.
    """
    if not isinstance(response, Mapping) or response.get("object", "response") != "response":
        raise StreamProtocolError(f"not a response object: {excerpt(repr(response))}")
    response_ = cast("Mapping[str, Any]", response)
    output = response_.get("output")
    if not isinstance(output, list):
        raise violation("a response's output must be a list", response_)
    events: list[Mapping[str, Any]] = [{"type": "response.created", "response": response_}]
    for position, item in enumerate(cast("list[Any]", output)):
        if not isinstance(item, Mapping):
            raise violation("an output item must be an object", response_)
        item_ = cast("Mapping[str, Any]", item)
        if item_.get("type") == "function_call":
            events.append(
                {"type": "response.output_item.added", "output_index": position, "item": item_}
            )
        elif item_.get("type") == "message":
            events.extend(_message_parts(position, item_))
        events.append(
            {"type": "response.output_item.done", "output_index": position, "item": item_}
        )
    status = response_.get("status")
    kind = {"failed": "response.failed", "incomplete": "response.incomplete"}.get(
        status if isinstance(status, str) else "", "response.completed"
    )
    events.append({"type": kind, "response": response_})
    return events


def _message_parts(position: int, item: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    content = item.get("content")
    if not isinstance(content, list):
        raise violation("a message item's content must be a list", item)
    events: list[Mapping[str, Any]] = []
    for content_index, part in enumerate(cast("list[Any]", content)):
        if not isinstance(part, Mapping):
            raise violation("a content part must be an object", item)
        part_ = cast("Mapping[str, Any]", part)
        where = {"output_index": position, "content_index": content_index}
        ptype = part_.get("type")
        field = "refusal" if ptype == "refusal" else "text"
        events.append(
            {"type": "response.content_part.added", **where, "part": {**part_, field: ""}}
        )
        text = part_.get(field)
        if ptype in ("output_text", "refusal") and text != "":
            kind = "response.refusal.delta" if ptype == "refusal" else "response.output_text.delta"
            events.append({"type": kind, **where, "delta": text})
        events.append({"type": "response.content_part.done", **where, "part": part_})
    return events


# -- the provider ----------------------------------------------------------------------


@final
class ResponsesProvider(OpenAIProvider):
    """The OpenAI Responses API as a :class:`Provider`."""

    path = "/responses"

    def request_body(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        """The JSON body of a ``POST /responses`` for a canonical request."""
        items: list[dict[str, Any]] = []
        for value in request.messages:
            message = canonical_message(value)
            if isinstance(message, UserMessage):
                items.extend(_user_items(message))
            else:
                items.extend(_assistant_items(message))
        body: dict[str, Any] = {
            "model": request.model,
            "input": items,
            "max_output_tokens": request.max_tokens,
        }
        instructions = system_text(request.system, "responses")
        if instructions is not None:
            body["instructions"] = instructions
        if request.tools:
            body["tools"] = [_responses_tool(t) for t in request.tools]
        if request.output_schema is not None:
            body["text"] = {
                "format": {
                    "type": "json_schema",
                    "name": OUTPUT_FORMAT_NAME,
                    "schema": dict(request.output_schema),
                    "strict": False,
                }
            }
        if request.extra_body:
            body.update(request.extra_body)
        body["stream"] = stream
        return body

    def translator(self) -> ResponsesEvents:
        return ResponsesEvents()

    def answer_events(self, data: Any) -> list[Mapping[str, Any]]:
        return responses_object_events(data)
