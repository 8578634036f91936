"""The script's values: what one scripted answer is, how fast it streams, what breaks.

All values are frozen. An answer's events come from :mod:`._message_events` (below
this module); their bytes from :mod:`._sse_render`, the serving from :mod:`._scripted`
and :mod:`._server` (above it).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeAlias

import attrs
import httpx

from .._messages import (
    AssistantMessage,
    ContentBlock,
    ServerToolUseBlock,
    ToolUseBlock,
    Usage,
    _frozen_mapping,  # pyright: ignore[reportPrivateUsage]
)
from ._message_events import delta_count, message_events

__all__ = ["Answer", "DroppedConnection", "Faults", "HTTPErrorAnswer", "ScriptedAnswer", "Timing"]

LineEnding: TypeAlias = Literal["\n", "\r\n", "\r"]


def _non_negative(_: object, attribute: attrs.Attribute[Any], value: float | None) -> None:
    if value is not None and value < 0:
        raise ValueError(f"{attribute.name} must be >= 0, got {value!r}")


def _positive(_: object, attribute: attrs.Attribute[Any], value: int | None) -> None:
    if value is not None and value < 1:
        raise ValueError(f"{attribute.name} must be >= 1, got {value!r}")


@attrs.frozen(kw_only=True)
class Timing:
    """How fast an answer streams; every delay is a ``trio.sleep`` (virtual time in tests).

    Attributes:
        first_event_delay: Seconds before ``message_start`` (after the response headers).
        token_delay: Seconds before each ``content_block_delta``.
        block_delay: Seconds before each ``content_block_start``.
        json_chunk_size: Characters of tool input JSON per ``input_json_delta``.
        text_chunk_size: Characters of text / thinking per delta.
        ping_every: A ``ping`` event after every *n* events (``None``: no pings).
    """

    first_event_delay: float = attrs.field(default=0.0, validator=_non_negative)
    token_delay: float = attrs.field(default=0.0, validator=_non_negative)
    block_delay: float = attrs.field(default=0.0, validator=_non_negative)
    json_chunk_size: int = attrs.field(default=8, validator=_positive)
    text_chunk_size: int = attrs.field(default=4, validator=_positive)
    ping_every: int | None = attrs.field(default=None, validator=_positive)


def _line_ending(_: object, attribute: attrs.Attribute[Any], value: str) -> None:
    if value not in ("\n", "\r\n", "\r"):
        raise ValueError(f"{attribute.name} must be '\\n', '\\r\\n' or '\\r', got {value!r}")


def _positions(value: Sequence[int]) -> tuple[int, ...]:
    return tuple(sorted(set(value)))


@attrs.frozen(kw_only=True)
class Faults:
    """What goes wrong while an answer streams. The default is nothing.

    Event indexes count the events of :meth:`ScriptedAnswer.events` (pings included);
    byte positions count the bytes of the rendered stream (BOM included).

    Attributes:
        stall_before_event: Index of the event a stall delays (past the last event:
            the end of the stream).
        stall_seconds: How long the stall lasts.
        pings_only_for: During the stall, send a ``ping`` every this many seconds
            (bytes flow but no content: a stall, not an idle connection).
        disconnect_after_byte: Drop the connection after this many bytes
            (``httpx.ReadError`` in process, a closed socket on the loopback server).
        truncate: Leave out ``message_stop``; the stream just ends.
        error_event_after: Send an in-stream ``error`` event after this event, then end.
        error_type: The ``error.type`` of that event.
        split_at: Byte positions where the stream is cut into separate chunks.
        chunk_size: Cut the stream every this many bytes as well.
        line_ending: ``"\\n"``, ``"\\r\\n"`` or ``"\\r"`` for every SSE line.
        bom: Start the stream with a UTF-8 byte order mark.
    """

    stall_before_event: int | None = None
    stall_seconds: float = attrs.field(default=0.0, validator=_non_negative)
    disconnect_after_byte: int | None = attrs.field(default=None, validator=_non_negative)
    truncate: bool = False
    error_event_after: int | None = attrs.field(default=None, validator=_non_negative)
    error_type: str = "overloaded_error"
    split_at: tuple[int, ...] = attrs.field(default=(), converter=_positions)
    chunk_size: int | None = attrs.field(default=None, validator=_positive)
    line_ending: LineEnding = attrs.field(default="\n", validator=_line_ending)
    bom: bool = False
    pings_only_for: float | None = None

    def __attrs_post_init__(self) -> None:
        if self.pings_only_for is not None and self.pings_only_for <= 0:
            raise ValueError(f"pings_only_for must be > 0, got {self.pings_only_for!r}")
        if self.stall_before_event is not None and self.stall_before_event < 0:
            raise ValueError(f"stall_before_event must be >= 0, got {self.stall_before_event!r}")
        if any(p < 0 for p in self.split_at):
            raise ValueError(f"split_at positions must be >= 0, got {self.split_at!r}")


def _blocks(value: Sequence[ContentBlock]) -> tuple[ContentBlock, ...]:
    return tuple(value)


@attrs.frozen(kw_only=True)
class ScriptedAnswer:
    """One streamed model answer of the script.

    Example::

        ScriptedAnswer(
            blocks=[TextBlock("Let me look."), ToolUseBlock("toolu_1", "Read", {"path": "a"})],
            timing=Timing(token_delay=0.05),
        )

    Attributes:
        blocks: The content blocks, streamed in order. A :class:`ToolUseBlock` with
            ``invalid_input`` streams that raw text as its input JSON.
        stop_reason: Defaults to ``"tool_use"`` if a block is a tool use, else ``"end_turn"``.
        stop_sequence: The ``stop_sequence`` of the final ``message_delta``.
        usage: Defaults to 10 input tokens and one output token per content delta.
        model: The model name in ``message_start``.
        message_id: Defaults to a ``msg_scripted_...`` id derived from the content.
        extra: Extra top-level message keys, sent in ``message_start``.
        headers: Extra response headers; a ``None`` value leaves out a default one
            (``{"request-id": None}``).
        timing: See :class:`Timing`.
        faults: See :class:`Faults`.
    """

    blocks: tuple[ContentBlock, ...] = attrs.field(converter=_blocks)
    stop_reason: str | None = None
    stop_sequence: str | None = None
    usage: Usage | None = None
    model: str = "claude-scripted"
    message_id: str | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict[str, Any], converter=_frozen_mapping)
    headers: Mapping[str, str | None] = attrs.field(
        factory=dict[str, str | None], converter=_frozen_mapping
    )
    timing: Timing = attrs.field(factory=Timing)
    faults: Faults = attrs.field(factory=Faults)

    @classmethod
    def from_message(
        cls,
        message: AssistantMessage,
        *,
        timing: Timing | None = None,
        faults: Faults | None = None,
    ) -> ScriptedAnswer:
        """The answer that streams exactly *message* (its id, usage and stop reason)."""
        return cls(
            blocks=message.content,
            stop_reason=message.stop_reason,
            stop_sequence=message.stop_sequence,
            usage=message.usage,
            model=message.model,
            message_id=message.id,
            extra=message.extra,
            timing=timing or Timing(),
            faults=faults or Faults(),
        )

    @property
    def resolved_stop_reason(self) -> str:
        if self.stop_reason is not None:
            return self.stop_reason
        if any(isinstance(b, ToolUseBlock) for b in self.blocks):
            return "tool_use"
        return "end_turn"

    @property
    def resolved_id(self) -> str:
        if self.message_id is not None:
            return self.message_id
        content = json.dumps([b.to_api() for b in self.blocks], sort_keys=True, default=repr)
        return "msg_scripted_" + hashlib.sha256(content.encode()).hexdigest()[:20]

    @property
    def resolved_usage(self) -> Usage:
        if self.usage is not None:
            return self.usage
        return Usage(input_tokens=10, output_tokens=max(1, delta_count(self.blocks, self.timing)))

    @property
    def message(self) -> AssistantMessage:
        """The message a correct client accumulates from this answer's stream."""
        return AssistantMessage(
            id=self.resolved_id,
            model=self.model,
            content=self.blocks,
            stop_reason=self.resolved_stop_reason,
            stop_sequence=self.stop_sequence,
            usage=self.resolved_usage,
            extra=self.extra,
        )

    def events(self) -> list[dict[str, Any]]:
        """The raw event dicts, ``message_start`` ... ``message_stop``, pings included.

        Faults are not applied here; :func:`render_sse` applies them.
        """
        return message_events(self.message, self.timing)

    @property
    def tool_uses(self) -> tuple[ToolUseBlock | ServerToolUseBlock, ...]:
        return tuple(b for b in self.blocks if isinstance(b, ToolUseBlock | ServerToolUseBlock))


_ERROR_TYPES = {
    400: ("invalid_request_error", "Invalid request"),
    401: ("authentication_error", "invalid x-api-key"),
    403: ("permission_error", "Permission denied"),
    404: ("not_found_error", "Not found"),
    408: ("timeout_error", "Request timed out"),
    409: ("conflict_error", "Conflict"),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: ("rate_limit_error", "Rate limited"),
    500: ("api_error", "Internal server error"),
    529: ("overloaded_error", "Overloaded"),
}


def error_type_for_status(status: int) -> tuple[str, str]:
    """The Messages API ``error.type`` and a message for an HTTP status."""
    if status in _ERROR_TYPES:
        return _ERROR_TYPES[status]
    if status >= 500:
        return _ERROR_TYPES[500]
    return _ERROR_TYPES[400]


def _body(value: Mapping[str, Any] | bytes | None) -> Mapping[str, Any] | bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    return _frozen_mapping(value)


@attrs.frozen(kw_only=True)
class HTTPErrorAnswer:
    """A non-streamed answer: an HTTP status with headers and a body.

    Attributes:
        status: The HTTP status code (a 200 here is a non-SSE 200, a protocol error).
        headers: Response headers; ``request-id`` and ``content-type`` default sensibly
            (a ``None`` value leaves the default out: ``{"request-id": None}``).
        body: A JSON object, raw bytes, or ``None`` for the Messages API error JSON
            matching *status* (``{"type": "error", "error": {...}, "request_id": ...}``).
        delay: Seconds before the response headers are sent.
    """

    status: int = attrs.field()
    headers: Mapping[str, str | None] = attrs.field(
        factory=dict[str, str | None], converter=_frozen_mapping
    )
    body: Mapping[str, Any] | bytes | None = attrs.field(default=None, converter=_body)
    delay: float = attrs.field(default=0.0, validator=_non_negative)

    @status.validator  # pyright: ignore[reportUntypedFunctionDecorator, reportAttributeAccessIssue]
    def _check_status(self, _: attrs.Attribute[Any], value: int) -> None:
        if not 100 <= value <= 599:
            raise ValueError(f"status must be an HTTP status code, got {value!r}")

    def render_body(self, request_id: str) -> bytes:
        """The response body bytes."""
        if isinstance(self.body, bytes):
            return self.body
        if self.body is None:
            error_type, message = error_type_for_status(self.status)
            data: dict[str, Any] = {
                "type": "error",
                "error": {"type": error_type, "message": message},
                "request_id": request_id,
            }
        else:
            data = dict(self.body.items())
        return json.dumps(data, ensure_ascii=False).encode()


@attrs.frozen(kw_only=True)
class DroppedConnection:
    """The server reads the request and closes the connection without any response.

    In process this raises ``httpx.RemoteProtocolError`` (what httpx raises when a real
    server does it); on the loopback server the socket really closes.

    *error* scripts other transport failures in process: ``httpx.ConnectError`` (a
    refused connection), ``httpx.ConnectTimeout``, ``httpx.ReadTimeout``... The request
    is still recorded. The loopback server closes the socket whatever *error* says.

    Example::

        ScriptedModel([DroppedConnection(error=httpx.ConnectError), ScriptedAnswer(...)])

    Attributes:
        delay: Seconds before the connection drops.
        error: The ``httpx.TransportError`` subclass the in-process transport raises.
    """

    delay: float = attrs.field(default=0.0, validator=_non_negative)
    error: type[httpx.TransportError] = attrs.field(default=httpx.RemoteProtocolError)

    @error.validator  # pyright: ignore[reportUntypedFunctionDecorator, reportAttributeAccessIssue]
    def _check_error(self, _: attrs.Attribute[Any], value: object) -> None:
        if not (isinstance(value, type) and issubclass(value, httpx.TransportError)):
            raise TypeError(f"error must be an httpx.TransportError subclass, got {value!r}")


def _chunks(value: Sequence[tuple[float, bytes]]) -> tuple[tuple[float, bytes], ...]:
    return tuple((float(delay), bytes(data)) for delay, data in value)


@attrs.frozen(kw_only=True)
class RawAnswer:
    """Raw response bytes: what no well-formed answer can show (torn, split, malformed
    or endless SSE, unknown events, a body cut by a reset).

    Attributes:
        chunks: ``(delay, data)`` pairs: sleep *delay* seconds, then send *data*.
        status: The HTTP status code.
        headers: Response headers (``content-type: text/event-stream`` and a
            ``request-id`` by default; a ``None`` value leaves a default out).
        disconnect: Drop the connection after the last chunk (in process:
            ``httpx.ReadError``) instead of ending the body cleanly.
        delay: Seconds before the response headers are sent.
    """

    chunks: tuple[tuple[float, bytes], ...] = attrs.field(converter=_chunks)
    status: int = 200
    headers: Mapping[str, str | None] = attrs.field(
        factory=dict[str, str | None], converter=_frozen_mapping
    )
    disconnect: bool = False
    delay: float = attrs.field(default=0.0, validator=_non_negative)

    @chunks.validator  # pyright: ignore[reportUntypedFunctionDecorator, reportAttributeAccessIssue]
    def _check_chunks(
        self, _: attrs.Attribute[Any], value: tuple[tuple[float, bytes], ...]
    ) -> None:
        if any(delay < 0 for delay, _ in value):
            raise ValueError("chunk delays must be >= 0")


Answer: TypeAlias = ScriptedAnswer | HTTPErrorAnswer | DroppedConnection | RawAnswer
