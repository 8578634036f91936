"""OpenAI stream events in, canonical (Messages API) stream events out: pure and sync.

:class:`ResponsesEvents` and :class:`ChatEvents` translate one decoded OpenAI event
(or Chat chunk) at a time into the ``message_start`` ... ``message_stop`` events the
:class:`MessageAccumulator` and every consumer already understand: text deltas stay
text deltas (a UI needs no change), each function call becomes a ``tool_use`` block,
and the block's ``content_block_stop`` is emitted at the moment its call is complete:

- Responses API: at ``response.output_item.done`` for the function call, so the
  executor starts it while later output still streams;
- Chat Completions: at ``finish_reason`` (the API has no per-call end), or, with
  ``early_tool_start=True``, when a new tool call index begins (for servers known to
  stream calls one after another).

Other Responses output items (reasoning, built-in tool calls) become opaque blocks
holding the item verbatim, so they round-trip into the next request. Stop reasons and
usage are mapped; errors inside the stream raise typed errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, cast

import attrs

from .._exceptions import StreamProtocolError, excerpt
from ._accumulate import StreamLimits
from ._accumulate_block import load_event
from ._openai_errors import openai_stream_error

__all__ = [
    "DONE",
    "ChatEvents",
    "ResponsesEvents",
    "chat_completion_chunks",
    "decode_openai",
    "responses_object_events",
]

#: The decoded form of Chat Completions' ``data: [DONE]`` sentinel.
DONE: Final[Mapping[str, Any]] = {"type": "[DONE]"}

Event = dict[str, Any]

_RESPONSES_STOP = {"max_output_tokens": "max_tokens", "content_filter": "refusal"}
_CHAT_STOP = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


def decode_openai(data: str, limits: StreamLimits) -> Mapping[str, Any]:
    """One event's ``data`` as a dict (``[DONE]`` as :data:`DONE`), within the limits."""
    if data == "[DONE]":
        return DONE
    event: Any = load_event(data, limits.max_event_bytes)
    if not isinstance(event, dict):
        raise StreamProtocolError(f"event is not an object: {excerpt(data)}")
    return cast("dict[str, Any]", event)


def _violation(what: str, event: Mapping[str, Any]) -> StreamProtocolError:
    return StreamProtocolError(f"{what}: {excerpt(repr(dict(event)))}")


def _int(event: Mapping[str, Any], key: str) -> int:
    value = event.get(key)
    if type(value) is not int:
        raise _violation(f"an event without an integer {key!r}", event)
    return value


def _str(event: Mapping[str, Any], key: str) -> str:
    value = event.get(key)
    if not isinstance(value, str):
        raise _violation(f"an event without a string {key!r}", event)
    return value


def _mapping(event: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = event.get(key)
    if not isinstance(value, Mapping):
        raise _violation(f"an event without an object {key!r}", event)
    return cast("Mapping[str, Any]", value)


def _usage(data: Any, input_key: str, output_key: str, details_key: str) -> dict[str, Any] | None:
    """OpenAI usage as canonical usage: input excludes cached tokens (as Anthropic's
    ``input_tokens`` does), which are ``cache_read_input_tokens``; every other field is
    kept."""
    if not isinstance(data, Mapping):
        return None
    data_ = cast("Mapping[str, Any]", data)
    prompt = data_.get(input_key)
    completion = data_.get(output_key)
    out: dict[str, Any] = {
        k: v for k, v in data_.items() if k not in (input_key, output_key) and v is not None
    }
    details = data_.get(details_key)
    cached: Any = (
        cast("Mapping[str, Any]", details).get("cached_tokens")
        if isinstance(details, Mapping)
        else None
    )
    cached_ = cached if type(cached) is int else 0
    if type(prompt) is int:
        out["input_tokens"] = max(0, prompt - cached_)
        if type(cached) is int:
            out["cache_read_input_tokens"] = cached
    if type(completion) is int:
        out["output_tokens"] = completion
    return out


def _message_start(data: Mapping[str, Any], event: Mapping[str, Any]) -> Event:
    message_id = data.get("id")
    if not isinstance(message_id, str):
        raise _violation("the first event has no string id", event)
    model = data.get("model")
    return {
        "type": "message_start",
        "message": {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": model if isinstance(model, str) else "",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        },
    }


def _delta(index: int, kind: str, field: str, value: str) -> Event:
    return {"type": "content_block_delta", "index": index, "delta": {"type": kind, field: value}}


def _stop(index: int) -> Event:
    return {"type": "content_block_stop", "index": index}


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
                raise _violation(f"{etype!r} before response.created", event)
            self._started = True
            return [_message_start(_mapping(event, "response"), event)]
        handler = _RESPONSES_HANDLERS.get(etype) if isinstance(etype, str) else None
        if handler is None:
            self.ignored += 1
            return []
        out: list[Event] = []
        handler(self, event, out)
        return out

    def _item_added(self, event: Mapping[str, Any], out: list[Event]) -> None:
        item = _mapping(event, "item")
        if item.get("type") != "function_call":
            return  # messages open blocks per content part; other items at their done
        position = _int(event, "output_index")
        if position in self._calls:
            raise _violation(f"a second function call at output_index {position}", event)
        start: Event = {
            "type": "tool_use",
            "id": _str(item, "call_id"),
            "name": _str(item, "name"),
            "input": {},
        }
        call = self._calls[position] = _Call(self._open(start, out))
        arguments = item.get("arguments")
        if isinstance(arguments, str) and arguments:
            call.arguments += len(arguments)
            out.append(_delta(call.index, "input_json_delta", "partial_json", arguments))

    def _part_added(self, event: Mapping[str, Any], out: list[Event]) -> None:
        part = _mapping(event, "part")
        ptype = part.get("type")
        if ptype not in ("output_text", "refusal"):
            self.ignored += 1
            return
        key = (_int(event, "output_index"), _int(event, "content_index"))
        if key in self._parts:
            raise _violation(f"a second content part {key}", event)
        index = self._parts[key] = self._open({"type": "text", "text": ""}, out)
        text = part.get("text" if ptype == "output_text" else "refusal")
        if isinstance(text, str) and text:
            out.append(_delta(index, "text_delta", "text", text))

    def _text_delta(self, event: Mapping[str, Any], out: list[Event]) -> None:
        key = (_int(event, "output_index"), _int(event, "content_index"))
        index = self._parts.get(key)
        if index is None:
            raise _violation(f"a text delta for unknown content part {key}", event)
        if event.get("type") == "response.refusal.delta":
            self._refusal = True
        out.append(_delta(index, "text_delta", "text", _str(event, "delta")))

    def _part_done(self, event: Mapping[str, Any], out: list[Event]) -> None:
        key = (_int(event, "output_index"), _int(event, "content_index"))
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
        out.append(_stop(index))

    def _arguments_delta(self, event: Mapping[str, Any], out: list[Event]) -> None:
        call = self._calls.get(_int(event, "output_index"))
        if call is None:
            raise _violation("function call arguments for no open function call", event)
        delta = _str(event, "delta")
        call.arguments += len(delta)
        out.append(_delta(call.index, "input_json_delta", "partial_json", delta))

    def _item_done(self, event: Mapping[str, Any], out: list[Event]) -> None:
        item = _mapping(event, "item")
        position = _int(event, "output_index")
        itype = item.get("type")
        if itype == "function_call":
            call = self._calls.pop(position, None)
            if call is None:
                raise _violation("output_item.done for a function call never added", event)
            arguments = item.get("arguments")
            # A server that sent no deltas still sends the whole arguments here.
            if call.arguments == 0 and isinstance(arguments, str) and arguments:
                out.append(_delta(call.index, "input_json_delta", "partial_json", arguments))
            self._tool_use = True
            out.append(_stop(call.index))  # the call is complete: hand it over now
        elif itype == "message":
            for key in [k for k in self._parts if k[0] == position]:
                out.append(_stop(self._parts.pop(key)))
        elif isinstance(itype, str):
            if "input" in item:
                # The accumulator reads "input" as streamed tool input JSON.
                raise _violation(f"an output item of type {itype!r} is not supported", event)
            index = self._open(item, out)
            out.append(_stop(index))
        else:
            raise _violation("an output item without a type", event)

    def _completed(self, event: Mapping[str, Any], out: list[Event]) -> None:
        response = _mapping(event, "response")
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
        usage = _usage(
            response.get("usage"), "input_tokens", "output_tokens", "input_tokens_details"
        )
        if usage is not None:
            delta["usage"] = usage
        out.append(delta)
        out.append({"type": "message_stop"})

    def _failed(self, event: Mapping[str, Any], out: list[Event]) -> None:
        response = _mapping(event, "response")
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


class ChatEvents:
    """Translates Chat Completions chunks into canonical stream events.

    Only choice 0 is read (``n > 1`` is not an agent's request). Args:
        early_tool_start: a new tool call index ends the previous call (for servers
            known to stream calls one after another); by default every call ends
            at ``finish_reason``.
    """

    def __init__(self, *, early_tool_start: bool = False) -> None:
        self.early_tool_start = early_tool_start
        self.events = 0
        self.ignored = 0
        self._started = False
        self._finished = False
        self._blocks = 0
        self._text: int | None = None
        self._calls: dict[int, int] = {}  # tool call index -> block index, while open
        self._seen_calls: set[int] = set()
        self._open_order: list[int] = []
        self._refusal = False

    def _open(self, content_block: Mapping[str, Any], out: list[Event]) -> int:
        index = self._blocks
        self._blocks += 1
        self._open_order.append(index)
        out.append({"type": "content_block_start", "index": index, "content_block": content_block})
        return index

    def _close(self, index: int, out: list[Event]) -> None:
        self._open_order.remove(index)
        out.append(_stop(index))

    def _close_text(self, out: list[Event]) -> None:
        if self._text is not None:
            self._close(self._text, out)
            self._text = None

    def feed(self, event: Mapping[str, Any]) -> list[Event]:
        self.events += 1
        if event is DONE:
            if not self._started:
                raise StreamProtocolError("[DONE] before any chunk")
            if not self._finished:
                raise StreamProtocolError("[DONE] before a finish_reason")
            return [{"type": "message_stop"}]
        if "error" in event and event.get("error") is not None:
            raise openai_stream_error(event.get("error"), event)
        out: list[Event] = []
        if not self._started:
            self._started = True
            out.append(_message_start(event, event))
        choices = event.get("choices")
        if choices is not None and not isinstance(choices, list):
            raise _violation("choices must be a list", event)
        for choice in cast("list[Any]", choices or []):
            if not isinstance(choice, Mapping):
                raise _violation("a choice must be an object", event)
            choice_ = cast("Mapping[str, Any]", choice)
            if choice_.get("index", 0) != 0:
                self.ignored += 1
                continue
            self._choice(choice_, event, out)
        usage = _usage(
            event.get("usage"), "prompt_tokens", "completion_tokens", "prompt_tokens_details"
        )
        if usage is not None:
            out.append({"type": "message_delta", "delta": {}, "usage": usage})
        return out

    def _choice(
        self, choice: Mapping[str, Any], event: Mapping[str, Any], out: list[Event]
    ) -> None:
        if self._finished:
            if choice.get("delta"):
                raise _violation("a delta after finish_reason", event)
            return
        delta = choice.get("delta")
        if delta is not None and not isinstance(delta, Mapping):
            raise _violation("a choice's delta must be an object", event)
        delta_ = cast("Mapping[str, Any]", delta or {})
        for field in ("content", "refusal"):
            text = delta_.get(field)
            if text is None or text == "":
                continue
            if not isinstance(text, str):
                raise _violation(f"{field} must be a string", event)
            if field == "refusal":
                self._refusal = True
            if self._text is None:
                self._text = self._open({"type": "text", "text": ""}, out)
            out.append(_delta(self._text, "text_delta", "text", text))
        calls = delta_.get("tool_calls")
        if calls is not None:
            if not isinstance(calls, list):
                raise _violation("tool_calls must be a list", event)
            for call in cast("list[Any]", calls):
                if not isinstance(call, Mapping):
                    raise _violation("a tool call must be an object", event)
                self._tool_call(cast("Mapping[str, Any]", call), event, out)
        reason = choice.get("finish_reason")
        if reason is not None:
            if not isinstance(reason, str):
                raise _violation("finish_reason must be a string", event)
            self._finished = True
            for index in list(self._open_order):  # every call is complete now
                self._close(index, out)
            self._text = None
            self._calls.clear()
            stop_reason = "refusal" if self._refusal else _CHAT_STOP.get(reason, reason)
            out.append(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                }
            )

    def _tool_call(
        self, call: Mapping[str, Any], event: Mapping[str, Any], out: list[Event]
    ) -> None:
        position = call.get("index", len(self._seen_calls) if call.get("id") else None)
        if type(position) is not int:
            raise _violation("a tool call delta without an integer index", event)
        function = call.get("function")
        function_: Mapping[str, Any] = (
            cast("Mapping[str, Any]", function) if isinstance(function, Mapping) else {}
        )
        index = self._calls.get(position)
        if index is None:
            if position in self._seen_calls:
                raise _violation(f"tool call {position} continued after it ended", event)
            name = function_.get("name")
            if not isinstance(name, str) or not name:
                raise _violation(f"tool call {position} starts without a name", event)
            call_id = call.get("id")
            if not isinstance(call_id, str) or not call_id:
                call_id = f"call_{self._blocks}"  # some local servers send no id
            self._close_text(out)
            if self.early_tool_start:
                for previous in list(self._calls.values()):
                    self._close(previous, out)  # a new index: the previous call is complete
                self._calls.clear()
            self._seen_calls.add(position)
            start: Event = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
            index = self._calls[position] = self._open(start, out)
        arguments = function_.get("arguments")
        if arguments is not None:
            if not isinstance(arguments, str):
                raise _violation("tool call arguments must be a string", event)
            if arguments:
                out.append(_delta(index, "input_json_delta", "partial_json", arguments))


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
        raise _violation("a response's output must be a list", response_)
    events: list[Mapping[str, Any]] = [{"type": "response.created", "response": response_}]
    for position, item in enumerate(cast("list[Any]", output)):
        if not isinstance(item, Mapping):
            raise _violation("an output item must be an object", response_)
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
        raise _violation("a message item's content must be a list", item)
    events: list[Mapping[str, Any]] = []
    for content_index, part in enumerate(cast("list[Any]", content)):
        if not isinstance(part, Mapping):
            raise _violation("a content part must be an object", item)
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


def chat_completion_chunks(completion: Any) -> list[Mapping[str, Any]]:
    """The chunks a finished ``chat.completion`` object would have come as, for
    :class:`ChatEvents` (ending with :data:`DONE`): a non-streaming answer is
    translated exactly as a streamed one.

    Raises:
        StreamProtocolError: *completion* is not a chat completion.
    """
    if not isinstance(completion, Mapping):
        raise StreamProtocolError(f"not a chat completion: {excerpt(repr(completion))}")
    completion_ = cast("Mapping[str, Any]", completion)
    if completion_.get("object", "chat.completion") != "chat.completion":
        raise _violation("not a chat completion", completion_)
    choices = completion_.get("choices")
    if not isinstance(choices, list):
        raise _violation("choices must be a list", completion_)
    deltas: list[dict[str, Any]] = []
    for choice in cast("list[Any]", choices):
        if not isinstance(choice, Mapping):
            raise _violation("a choice must be an object", completion_)
        choice_ = cast("Mapping[str, Any]", choice)
        message = choice_.get("message")
        if not isinstance(message, Mapping):
            raise _violation("a choice's message must be an object", completion_)
        delta = dict(cast("Mapping[str, Any]", message))
        calls = delta.get("tool_calls")
        if isinstance(calls, list):
            delta["tool_calls"] = [
                {**cast("Mapping[str, Any]", call), "index": i}
                if isinstance(call, Mapping)
                else call
                for i, call in enumerate(cast("list[Any]", calls))
            ]
        deltas.append({**choice_, "delta": delta, "message": None})
    chunk = {**completion_, "object": "chat.completion.chunk", "choices": deltas}
    return [chunk, DONE]
