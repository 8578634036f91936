"""The OpenAI Chat Completions API (``POST /chat/completions``): its body and its events.

The body: the history stays canonical (Anthropic-shaped) everywhere else; here it
becomes Chat ``messages``:

========================  ===============================
canonical                 Chat Completions (``messages``)
========================  ===============================
system prompt             a ``system`` message first
user text                 a ``user`` message
``TextBlock`` (answer)    ``assistant.content``
``ToolUseBlock``          ``assistant.tool_calls[]``
``ToolResultBlock``       a ``role: tool`` message
``OpaqueBlock`` (an       dropped (Chat has no place
OpenAI output item)       for it)
``ThinkingBlock``,        dropped
``RedactedThinkingBlock``
========================  ===============================

The events: :class:`ChatEvents` translates one decoded chunk at a time into the
``message_start`` ... ``message_stop`` events the :class:`MessageAccumulator` and
every consumer already understand: text deltas stay text deltas, each tool call
becomes a ``tool_use`` block whose ``content_block_stop`` is emitted at
``finish_reason`` (the API has no per-call end), or, with ``early_tool_start=True``,
when a new tool call index begins (for servers known to stream calls one after
another). Stop reasons and usage are mapped; errors inside the stream raise typed
errors. A non-streaming answer (a ``chat.completion``) is translated as the chunks it
would have come as (:func:`chat_completion_chunks`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, cast, final

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
    DONE,
    DROPPED,
    OUTPUT_FORMAT_NAME,
    Event,
    OpenAIProvider,
    block_delta,
    block_stop,
    call_arguments,
    canonical_message,
    canonical_usage,
    message_start,
    openai_stream_error,
    refuse,
    result_text,
    system_text,
    tool_schema,
    violation,
)
from ._protocol import ToolLike
from ._provider import ModelRequest

__all__ = ["ChatEvents", "ChatProvider", "MaxTokensField", "chat_completion_chunks"]

#: The body field that carries ``max_tokens`` (older servers take ``max_tokens``).
MaxTokensField = Literal["max_completion_tokens", "max_tokens"]


# -- the body --------------------------------------------------------------------------


def _user_messages(message: UserMessage) -> list[dict[str, Any]]:
    if isinstance(message.content, str):
        return [{"role": "user", "content": message.content}]
    out: list[dict[str, Any]] = []
    texts: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, ToolResultBlock):
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": block.tool_use_id,
                    "content": result_text(block, "chat"),
                }
            )
        elif isinstance(block, TextBlock):
            texts.append({"type": "text", "text": block.text})
        else:
            raise refuse(f"a user {block.type!r} block", "chat")
    if texts:  # tool messages must directly follow the assistant's tool_calls
        out.append({"role": "user", "content": texts})
    return out


def _assistant_message(message: AssistantMessage) -> dict[str, Any] | None:
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            texts.append(block.text)
        elif isinstance(block, ToolUseBlock):
            calls.append(
                {
                    "id": block.id,
                    "type": "function",
                    "function": {"name": block.name, "arguments": call_arguments(block)},
                }
            )
        elif not isinstance(block, (*DROPPED, OpaqueBlock)):
            raise refuse(f"an assistant {block.type!r} block", "chat")
    if not texts and not calls:
        return None  # e.g. only reasoning: Chat has nothing to say for it
    out: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    if calls:
        out["tool_calls"] = calls
    return out


def _chat_tool(tool: ToolLike) -> dict[str, Any]:
    schema = tool_schema(tool)
    if schema is None:
        return _plain(tool)
    name, description, parameters = schema
    function: dict[str, Any] = {"name": name, "parameters": parameters}
    if description:
        function["description"] = description
    return {"type": "function", "function": function}


# -- the events ------------------------------------------------------------------------
_CHAT_STOP = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
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
        # Calls whose name may still come in pieces (``get_`` then ``weather``): their
        # block starts at their first arguments, or when another call or the end
        # shows the name is complete. Tool call index -> (id, name so far).
        self._naming: dict[int, tuple[str, str]] = {}
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
        out.append(block_stop(index))

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
            out.append(message_start(event, event))
        choices = event.get("choices")
        if choices is not None and not isinstance(choices, list):
            raise violation("choices must be a list", event)
        for choice in cast("list[Any]", choices or []):
            if not isinstance(choice, Mapping):
                raise violation("a choice must be an object", event)
            choice_ = cast("Mapping[str, Any]", choice)
            if choice_.get("index", 0) != 0:
                self.ignored += 1
                continue
            self._choice(choice_, event, out)
        usage = canonical_usage(
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
                raise violation("a delta after finish_reason", event)
            return
        delta = choice.get("delta")
        if delta is not None and not isinstance(delta, Mapping):
            raise violation("a choice's delta must be an object", event)
        delta_ = cast("Mapping[str, Any]", delta or {})
        for field in ("content", "refusal"):
            text = delta_.get(field)
            if text is None or text == "":
                continue
            if not isinstance(text, str):
                raise violation(f"{field} must be a string", event)
            if field == "refusal":
                self._refusal = True
            if self._text is None:
                self._text = self._open({"type": "text", "text": ""}, out)
            out.append(block_delta(self._text, "text_delta", "text", text))
        calls = delta_.get("tool_calls")
        if calls is not None:
            if not isinstance(calls, list):
                raise violation("tool_calls must be a list", event)
            for call in cast("list[Any]", calls):
                if not isinstance(call, Mapping):
                    raise violation("a tool call must be an object", event)
                self._tool_call(cast("Mapping[str, Any]", call), event, out)
        reason = choice.get("finish_reason")
        if reason is not None:
            if not isinstance(reason, str):
                raise violation("finish_reason must be a string", event)
            self._finished = True
            self._name_all(out)
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
            raise violation("a tool call delta without an integer index", event)
        function = call.get("function")
        function_: Mapping[str, Any] = (
            cast("Mapping[str, Any]", function) if isinstance(function, Mapping) else {}
        )
        name = function_.get("name")
        if name is not None and not isinstance(name, str):
            raise violation(f"tool call {position} has a name that is not a string", event)
        arguments = function_.get("arguments")
        if arguments is not None and not isinstance(arguments, str):
            raise violation("tool call arguments must be a string", event)
        if position in self._naming:
            if name:  # the name goes on, as the official SDK accumulates it
                call_id, so_far = self._naming[position]
                self._naming[position] = (call_id, so_far + name)
        elif position not in self._calls:
            if position in self._seen_calls:
                raise violation(f"tool call {position} continued after it ended", event)
            if not name:
                raise violation(f"tool call {position} starts without a name", event)
            call_id = call.get("id")
            if not isinstance(call_id, str) or not call_id:
                call_id = f"call_{self._blocks + len(self._naming)}"  # some servers send none
            self._close_text(out)
            self._name_all(out)  # a new call: the name of every earlier one is complete
            if self.early_tool_start:
                for previous in list(self._calls.values()):
                    self._close(previous, out)  # a new index: the previous call is complete
                self._calls.clear()
            self._seen_calls.add(position)
            self._naming[position] = (call_id, name)
        elif name:
            raise violation(f"tool call {position}'s name goes on after its arguments", event)
        if arguments:
            if position in self._naming:
                self._start_call(position, out)
            index = self._calls[position]
            out.append(block_delta(index, "input_json_delta", "partial_json", arguments))

    def _start_call(self, position: int, out: list[Event]) -> None:
        """Start the block of the call at *position*, its name now complete."""
        call_id, name = self._naming.pop(position)
        start: Event = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
        self._calls[position] = self._open(start, out)

    def _name_all(self, out: list[Event]) -> None:
        for position in sorted(self._naming):
            self._start_call(position, out)


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
        raise violation("not a chat completion", completion_)
    choices = completion_.get("choices")
    if not isinstance(choices, list):
        raise violation("choices must be a list", completion_)
    deltas: list[dict[str, Any]] = []
    for choice in cast("list[Any]", choices):
        if not isinstance(choice, Mapping):
            raise violation("a choice must be an object", completion_)
        choice_ = cast("Mapping[str, Any]", choice)
        message = choice_.get("message")
        if not isinstance(message, Mapping):
            raise violation("a choice's message must be an object", completion_)
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


# -- the provider ----------------------------------------------------------------------


@final
class ChatProvider(OpenAIProvider):
    """The OpenAI Chat Completions API as a :class:`Provider`.

    Args:
        early_tool_start: a new tool call index ends the previous call (see
            :class:`ChatEvents`).
        max_tokens_field: the body field that carries ``max_tokens``.
    """

    path = "/chat/completions"

    def __init__(
        self,
        *,
        early_tool_start: bool = False,
        max_tokens_field: MaxTokensField = "max_completion_tokens",
    ) -> None:
        self.early_tool_start = early_tool_start
        self.max_tokens_field: MaxTokensField = max_tokens_field

    def request_body(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        """The JSON body of a ``POST /chat/completions`` for a canonical request
        (streamed, usage is asked for: ``stream_options.include_usage``)."""
        out: list[dict[str, Any]] = []
        system = system_text(request.system, "chat")
        if system is not None:
            out.append({"role": "system", "content": system})
        for value in request.messages:
            message = canonical_message(value)
            if isinstance(message, UserMessage):
                out.extend(_user_messages(message))
            elif (assistant := _assistant_message(message)) is not None:
                out.append(assistant)
        body: dict[str, Any] = {
            "model": request.model,
            "messages": out,
            self.max_tokens_field: request.max_tokens,
        }
        if request.tools:
            body["tools"] = [_chat_tool(t) for t in request.tools]
        if request.output_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": OUTPUT_FORMAT_NAME,
                    "schema": dict(request.output_schema),
                    "strict": False,
                },
            }
        if request.extra_body:
            body.update(request.extra_body)
        body["stream"] = stream
        if not stream:
            body.pop("stream_options", None)  # only allowed on a streamed request
            return body
        options = body.get("stream_options")
        body["stream_options"] = {
            **(options if isinstance(options, Mapping) else {}),
            "include_usage": True,
        }
        return body

    def translator(self) -> ChatEvents:
        return ChatEvents(early_tool_start=self.early_tool_start)

    def answer_events(self, data: Any) -> list[Mapping[str, Any]]:
        return chat_completion_chunks(data)
