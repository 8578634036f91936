"""What the OpenAI Responses and Chat Completions APIs share: errors, helpers, decoder.

:class:`OpenAIProvider` is the base of :class:`~._openai_responses.ResponsesProvider`
and :class:`~._openai_chat.ChatProvider`: each says how a canonical request becomes
its body and which translator turns its events (and its non-streaming answer, as the
events it would have come as) into canonical (Messages API) events for the
:class:`MessageAccumulator`; the decoding, the errors and the request id are here.

Errors: the HTTP status decides the type, as for Anthropic (:func:`error_from_response`):
OpenAI's 401 body says ``invalid_request_error``, yet it is an
:class:`AuthenticationError`. OpenAI's ``code`` refines it where the loop needs to
know: ``context_length_exceeded`` is a :class:`PromptTooLongError` (so the loop
compacts), and a 503 that says it is overloaded is an :class:`OverloadedError` (as
Anthropic's 529, so the loop falls back to ``fallback_model``). An error inside a 200
stream (a Responses ``error`` event or ``response.failed``, a Chat chunk holding
``error``) is typed by its ``code``.

The request helpers refuse what cannot be said in OpenAI's terms (an image, a server
tool use, an unknown block) with :class:`InvalidRequestError`, before any request is
sent; signed thinking (:data:`DROPPED`) is left out.
"""

from __future__ import annotations

import abc
import json
from collections.abc import Mapping
from typing import Any, Final, Literal, Protocol, TypeAlias, cast, final

from .._exceptions import (
    APIStatusError,
    InternalServerError,
    InvalidRequestError,
    OverloadedError,
    PromptTooLongError,
    RateLimitError,
    StreamProtocolError,
    excerpt,
)
from .._messages import (
    AssistantMessage,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
    _plain,  # pyright: ignore[reportPrivateUsage]
    message_from_api,
)
from .._tools import Tool
from ._accumulate import MessageAccumulator, StreamLimits
from ._accumulate_block import load_event
from ._errors_http import error_from_response
from ._protocol import SystemLike, ToolLike
from ._provider import Provider

__all__ = [
    "DONE",
    "DROPPED",
    "OUTPUT_FORMAT_NAME",
    "Event",
    "OpenAIAPI",
    "OpenAIDecoder",
    "OpenAIProvider",
    "Translator",
    "block_delta",
    "block_stop",
    "call_arguments",
    "canonical_message",
    "canonical_usage",
    "decode_openai",
    "int_field",
    "mapping_field",
    "message_start",
    "openai_error_from_response",
    "openai_stream_error",
    "refuse",
    "result_text",
    "retryable_in_stream",
    "str_field",
    "system_text",
    "tool_schema",
    "violation",
]

OpenAIAPI: TypeAlias = Literal["responses", "chat"]

#: The name of a structured output's schema in a request (OpenAI asks for one).
OUTPUT_FORMAT_NAME: Final = "final_result"

#: The decoded form of Chat Completions' ``data: [DONE]`` sentinel.
DONE: Final[Mapping[str, Any]] = {"type": "[DONE]"}

Event = dict[str, Any]

#: Blocks whose meaning is bound to Anthropic (signed thinking): never sent to OpenAI.
DROPPED = (ThinkingBlock, RedactedThinkingBlock)

# -- errors ----------------------------------------------------------------------------

_BY_CODE: dict[str, type[APIStatusError]] = {
    "rate_limit_exceeded": RateLimitError,
    "server_error": InternalServerError,
    "internal_error": InternalServerError,
    "api_error": InternalServerError,
    "server_is_overloaded": OverloadedError,
    "overloaded": OverloadedError,
    "slow_down": OverloadedError,
    "context_length_exceeded": PromptTooLongError,
    "invalid_request_error": InvalidRequestError,
    "invalid_prompt": InvalidRequestError,
}


def _code(error: Any) -> str | None:
    if not isinstance(error, Mapping):
        return None
    error_ = cast("Mapping[str, Any]", error)
    for key in ("code", "type"):
        value = error_.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def openai_error_from_response(
    status_code: int,
    content: bytes,
    *,
    headers: Mapping[str, str] | None = None,
    request_id: str | None = None,
) -> APIStatusError:
    """The typed error for an HTTP error answer from an OpenAI(-compatible) server."""
    exc = error_from_response(status_code, content, headers=headers, request_id=request_id)
    body = exc.body
    error = cast("Mapping[str, Any]", body).get("error") if isinstance(body, Mapping) else None
    code = error.get("code") if isinstance(error, Mapping) else None  # pyright: ignore[reportUnknownVariableType]
    message = error.get("message") if isinstance(error, Mapping) else None  # pyright: ignore[reportUnknownVariableType]
    if (
        status_code == 503
        and not isinstance(exc, OverloadedError)
        and (
            _BY_CODE.get(code if isinstance(code, str) else "") is OverloadedError
            or (isinstance(message, str) and "overloaded" in message.lower())
        )
    ):
        # OpenAI says "overloaded" with a 503 (Anthropic with a 529): the same error,
        # so the loop's fallback after 3 overloaded answers works over OpenAI too.
        return _retyped(exc, OverloadedError)
    if code == "context_length_exceeded" and not isinstance(exc, PromptTooLongError):
        return _retyped(exc, PromptTooLongError)
    return exc


def _retyped(exc: APIStatusError, kind: type[APIStatusError]) -> APIStatusError:
    """*exc* as a *kind*, every field kept."""
    return kind(
        exc.message,
        status_code=exc.status_code,
        error_type=exc.error_type,
        request_id=exc.request_id,
        body=exc.body,
        headers=exc.headers,
    )


def openai_stream_error(error: Any, event: Mapping[str, Any]) -> APIStatusError:
    """The typed error for an error reported inside a 200 stream.

    Args:
        error: the error object (``{"code", "message", ...}``).
        event: the whole event, kept as the exception's ``body``.
    """
    code = _code(error)
    message: Any = (
        cast("Mapping[str, Any]", error).get("message") if isinstance(error, Mapping) else None
    )
    if not isinstance(message, str):
        message = f"error event: {excerpt(repr(dict(event)))}"
    cls = _BY_CODE.get(code or "", APIStatusError)
    return cls(f"{code or 'error'}: {message}", status_code=None, error_type=code, body=dict(event))


def retryable_in_stream(exc: APIStatusError) -> bool:
    """Whether an in-stream error is worth another attempt (429, 5xx, overloaded)."""
    return isinstance(exc, RateLimitError | InternalServerError | OverloadedError)


# -- the request -----------------------------------------------------------------------


def refuse(what: str, api: OpenAIAPI) -> InvalidRequestError:
    name = "Responses" if api == "responses" else "Chat Completions"
    return InvalidRequestError(
        f"{what} cannot be sent to the OpenAI {name} API", status_code=None, error_type=None
    )


def canonical_message(value: Any) -> UserMessage | AssistantMessage:
    if isinstance(value, UserMessage | AssistantMessage):
        return value
    if isinstance(value, Mapping):
        return message_from_api(value)
    raise TypeError(f"a message must be a UserMessage, AssistantMessage or dict, not {value!r}")


def system_text(system: SystemLike, api: OpenAIAPI) -> str | None:
    if system is None or isinstance(system, str):
        return system
    parts: list[str] = []
    for block in system:
        if block.get("type") != "text" or not isinstance(block.get("text"), str):
            raise refuse(f"a system block of type {block.get('type')!r}", api)
        parts.append(block["text"])
    return "\n\n".join(parts)


def result_text(block: ToolResultBlock, api: OpenAIAPI) -> str:
    if isinstance(block.content, str):
        return block.content
    parts: list[str] = []
    for part in block.content:
        if not isinstance(part, TextBlock):
            raise refuse(f"a tool result holding a {part.type!r} block", api)
        parts.append(part.text)
    return "\n".join(parts)


def call_arguments(block: ToolUseBlock) -> str:
    # An invalid input is sent back as the model wrote it: that is what it said.
    if block.invalid_input is not None:
        return block.invalid_input
    return json.dumps(_plain(block.input), ensure_ascii=False, separators=(",", ":"))


def tool_schema(tool: ToolLike) -> tuple[str, str | None, Any] | None:
    """(name, description, parameters) of a canonical tool; None for an OpenAI-shaped
    dict (one with a ``type`` and no ``input_schema``), which is sent verbatim."""
    if isinstance(tool, Tool):
        return tool.name, tool.description, dict(tool.input_schema)
    if isinstance(tool, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
        if "input_schema" not in tool and "type" in tool:
            return None
        return tool["name"], tool.get("description"), _plain(tool.get("input_schema", {}))
    raise TypeError(f"a tool must be a Tool or dict, not {tool!r}")


# -- the events ------------------------------------------------------------------------


def decode_openai(data: str, limits: StreamLimits) -> Mapping[str, Any]:
    """One event's ``data`` as a dict (``[DONE]`` as :data:`DONE`), within the limits."""
    if data == "[DONE]":
        return DONE
    event: Any = load_event(data, limits.max_event_bytes)
    if not isinstance(event, dict):
        raise StreamProtocolError(f"event is not an object: {excerpt(data)}")
    return cast("dict[str, Any]", event)


def violation(what: str, event: Mapping[str, Any]) -> StreamProtocolError:
    return StreamProtocolError(f"{what}: {excerpt(repr(dict(event)))}")


def int_field(event: Mapping[str, Any], key: str) -> int:
    value = event.get(key)
    if type(value) is not int:
        raise violation(f"an event without an integer {key!r}", event)
    return value


def str_field(event: Mapping[str, Any], key: str) -> str:
    value = event.get(key)
    if not isinstance(value, str):
        raise violation(f"an event without a string {key!r}", event)
    return value


def mapping_field(event: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = event.get(key)
    if not isinstance(value, Mapping):
        raise violation(f"an event without an object {key!r}", event)
    return cast("Mapping[str, Any]", value)


def canonical_usage(
    data: Any, input_key: str, output_key: str, details_key: str
) -> dict[str, Any] | None:
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


def message_start(data: Mapping[str, Any], event: Mapping[str, Any]) -> Event:
    message_id = data.get("id")
    if not isinstance(message_id, str):
        raise violation("the first event has no string id", event)
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


def block_delta(index: int, kind: str, field: str, value: str) -> Event:
    return {"type": "content_block_delta", "index": index, "delta": {"type": kind, field: value}}


def block_stop(index: int) -> Event:
    return {"type": "content_block_stop", "index": index}


# -- the provider ----------------------------------------------------------------------


class Translator(Protocol):
    """One API's events (decoded) in, canonical events out: see ``ResponsesEvents``."""

    events: int
    ignored: int

    def feed(self, event: Mapping[str, Any]) -> list[Event]: ...


@final
class OpenAIDecoder:
    """OpenAI event data → canonical events, through the API's translator."""

    def __init__(
        self, translator: Translator, accumulator: MessageAccumulator, limits: StreamLimits
    ) -> None:
        self.translator = translator
        self._accumulator = accumulator
        self._limits = limits

    def translate(self, data: str) -> list[dict[str, Any]]:
        return self.translator.feed(decode_openai(data, self._limits))

    def events(self) -> int:
        return self.translator.events

    def statistics(self) -> tuple[int, int, int]:
        ignored = self._accumulator.statistics().ignored + self.translator.ignored
        return self.translator.events, 0, ignored


class OpenAIProvider(Provider):
    """An OpenAI API: its body and translator are the subclass's; the rest is here."""

    request_id_headers = ("x-request-id", "request-id")
    end = "the response was complete"

    def supports_output_schema(self, model: str) -> bool:
        """OpenAI's structured output (``json_schema``) is taken by its current models."""
        return True

    @abc.abstractmethod
    def translator(self) -> Translator:
        """A fresh translator for one stream (or one non-streaming answer)."""

    @abc.abstractmethod
    def answer_events(self, data: Any) -> list[Mapping[str, Any]]:
        """The events a non-streaming answer would have come as.

        Raises:
            StreamProtocolError: *data* is not an answer of the API.
        """

    def decoder(self, accumulator: MessageAccumulator) -> OpenAIDecoder:
        return OpenAIDecoder(self.translator(), accumulator, accumulator.limits)

    def answer(self, data: Any, limits: StreamLimits) -> AssistantMessage:
        """A non-streaming answer → the canonical message, through the translator, so
        the message is the one the stream would have given."""
        accumulator = MessageAccumulator(limits)
        translator = self.translator()
        for event in self.answer_events(data):
            for canonical in translator.feed(event):
                accumulator.feed(canonical)
        if not accumulator.stopped:
            raise StreamProtocolError("the answer did not complete")
        return accumulator.message

    def error_from_response(
        self,
        status_code: int,
        content: bytes,
        *,
        headers: Mapping[str, str] | None = None,
        request_id: str | None = None,
    ) -> APIStatusError:
        return openai_error_from_response(
            status_code, content, headers=headers, request_id=request_id
        )

    def retryable_in_stream(self, exc: APIStatusError) -> bool:
        return retryable_in_stream(exc)
