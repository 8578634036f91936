"""What a stdio server sends, line by line, before the SDK sees it: framed, capped, checked.

Pure and synchronous: :class:`LineFramer` cuts the byte stream into lines of bounded
length (an over-long line is counted, never kept); :class:`Reader` turns one line
into what the SDK's session reads, a ``SessionMessage`` or an ``Exception``.

A server that misbehaves costs one call, never the connection or the loop: a line
that is too long, not UTF-8, not JSON or not JSON-RPC answers the call it names
(found in the in-flight requests this module is told about, ids normalized as the
SDK does: ``"3"`` answers request 3) with an error; a result with too many content
items keeps the first ones and says how many were dropped; a ``tools/list`` entry
the SDK would refuse, or that holds a string that cannot be sent back (a lone
surrogate), is left out (and logged) instead of failing the whole listing; an
``outputSchema`` never reaches the SDK (whose validator runs the server's
``pattern`` on Python's backtracking ``re``): the structured content is checked
here, on RE2. Every notification past a cap (progress per call, any other kind
between two answers) and every request from the server past a cap on those not yet
answered is dropped cheaply (parsed, never validated or dispatched). A message the
session cannot serialize fails its own request (:meth:`Reader.encode`).

The same :class:`Reader` filters what the SDK's HTTP transport has parsed
(:meth:`Reader.accept`), so stdio and HTTP have the same limits.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from contextlib import suppress
from typing import Any, cast

import attrs
import mcp
import pydantic
import pydantic_core
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.message import SessionMessage
from mcp_types import methods

from ._schema import InputValidator

__all__ = [
    "MAX_CONTENT_ITEMS",
    "MAX_LINE_BYTES",
    "MAX_NOTIFICATIONS",
    "MAX_SERVER_REQUESTS",
    "LineFramer",
    "Oversized",
    "Reader",
]

logger = logging.getLogger("trio_agent.mcp")

#: The longest line (one JSON-RPC message) read from a server; longer ones are not kept.
MAX_LINE_BYTES = 16 * 1024 * 1024
#: Content items a result keeps; the rest are dropped, with a note saying so.
MAX_CONTENT_ITEMS = 1000
#: Progress notifications per call, and other notifications between two answers, passed on.
MAX_NOTIFICATIONS = 1000
#: Requests from the server (ping, sampling, ...) not yet answered; more are dropped.
MAX_SERVER_REQUESTS = 100

#: Bytes kept of each end of an over-long line, to find which request it answers.
_KEEP = 4096
# The id of an answer, read from the start of a line (``{"jsonrpc": "2.0", "id": 3, ...``,
# as Python servers write it) or from its end (``..., "jsonrpc": "2.0", "id": 3}``, as
# TypeScript ones do).
_ID = rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")'
_HEAD_ID = re.compile(rb'\A\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?' + _ID)
_TAIL_ID = re.compile(_ID + rb'\s*(?:,\s*"jsonrpc"\s*:\s*"2\.0"\s*)?\}\s*\Z')

RequestId = int | str


@attrs.frozen
class Oversized:
    """A line longer than the limit: its size and both ends (for its id)."""

    size: int
    head: bytes
    tail: bytes


@attrs.define
class LineFramer:
    """Bytes in, lines out; a line past *limit* bytes becomes an :class:`Oversized`,
    so memory stays within about *limit* however long the server's lines are."""

    limit: int = MAX_LINE_BYTES
    _buffer: bytearray = attrs.field(factory=bytearray)
    # While an over-long line is being skipped: its size so far, head and tail.
    _skipped: int | None = None
    _head: bytes = b""
    _tail: bytes = b""

    def feed(self, chunk: bytes) -> Iterator[bytes | Oversized]:
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            yield self._end(chunk[start:end])
            start = end + 1
        self._add(chunk[start:])

    def _add(self, piece: bytes) -> None:
        if not piece:
            return
        if self._skipped is None and len(self._buffer) + len(piece) <= self.limit:
            self._buffer += piece
            return
        if self._skipped is None:
            self._head = bytes(self._buffer[:_KEEP])
            self._skipped = len(self._buffer)
            self._tail = bytes(self._buffer[-_KEEP:])
            self._buffer = bytearray()
        if len(self._head) < _KEEP:
            self._head += piece[: _KEEP - len(self._head)]
        self._skipped += len(piece)
        self._tail = (self._tail + piece)[-_KEEP:]

    def _end(self, piece: bytes) -> bytes | Oversized:
        self._add(piece)
        if self._skipped is not None:
            line = Oversized(self._skipped, self._head, self._tail)
            self._skipped, self._head, self._tail = None, b"", b""
            return line
        line = bytes(self._buffer)
        self._buffer.clear()
        return line


def _field(value: object, key: str) -> Any:
    """``value[key]`` of a JSON object, None for anything else."""
    return cast("dict[str, Any]", value).get(key) if isinstance(value, dict) else None


def request_key(value: object) -> RequestId | None:
    """The id *value* names as the SDK matches it (``"3"`` is request 3; a bool,
    a float or anything else names none)."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        return None
    return coerce_request_id(value)


def _parse_id(raw: bytes) -> RequestId | None:
    try:
        value: Any = json.loads(raw)
    except ValueError:
        return None
    return request_key(value)


def _sendable(value: Any) -> bool:
    """Whether *value* serializes as strict UTF-8 JSON (no lone surrogate in it)."""
    try:
        pydantic_core.to_json(value)
    except (pydantic_core.PydanticSerializationError, ValueError, RecursionError):
        return False
    return True


@attrs.define
class Reader:
    """Turns the server's lines into the session's messages; told of each request sent."""

    server: str
    #: The method of each request sent and not yet answered, by id (as the SDK keys it).
    in_flight: dict[RequestId, str] = attrs.field(factory=dict[RequestId, str])
    _progress: dict[RequestId, int] = attrs.field(factory=dict[RequestId, int])
    #: The tool each ``tools/call`` in flight calls.
    _tool_of: dict[RequestId, str] = attrs.field(factory=dict[RequestId, str])
    #: Notifications other than progress since the last answer.
    _notes: int = 0
    #: The server's requests the session has not answered yet.
    _asked: set[RequestId] = attrs.field(factory=set[RequestId])
    _asked_dropped: int = 0
    #: The ``outputSchema`` of each listed tool, kept from the SDK (see the module doc).
    _output_schemas: dict[str, InputValidator] = attrs.field(factory=dict[str, InputValidator])
    #: The protocol version the server answered ``initialize`` with.
    version: str = "2025-11-25"
    #: The bytes of every ``tools/list`` answer read (how much checking its schemas costs).
    listed_bytes: int = 0

    def sent(self, message: mcp.types.JSONRPCMessage) -> None:
        """Note a message the session sends (its requests are what answers match)."""
        if isinstance(message, mcp.types.JSONRPCRequest):
            key = request_key(message.id)
            if key is None:
                return
            self.in_flight[key] = message.method
            self._progress[key] = 0
            name = _field(message.params, "name")
            if message.method == "tools/call" and isinstance(name, str):
                self._tool_of[key] = name
        elif isinstance(message, mcp.types.JSONRPCResponse | mcp.types.JSONRPCError):
            key = request_key(message.id)
            if key is not None:
                self._asked.discard(key)

    def encode(self, message: mcp.types.JSONRPCMessage) -> bytes | SessionMessage | None:
        """The line to send for *message*, noted as sent; or, when it cannot be
        serialized (a lone surrogate in it), the error answer of that request alone
        (None for a message that is not a request: it is dropped, and logged)."""
        try:
            data = message.model_dump_json(by_alias=True, exclude_unset=True).encode()
        except (ValueError, RecursionError) as exc:  # PydanticSerializationError, UnicodeError
            why = f"it cannot be serialized as JSON ({str(exc)[:200]})"
            rid = message.id if isinstance(message, mcp.types.JSONRPCRequest) else None
            if rid is None:
                logger.warning("A message to MCP server %r is not sent: %s", self.server, why)
                return None
            text = f"the request to MCP server {self.server!r} was not sent: {why}"
            error = mcp.types.ErrorData(code=mcp.types.INVALID_PARAMS, message=text)
            return SessionMessage(mcp.types.JSONRPCError(jsonrpc="2.0", id=rid, error=error))
        self.sent(message)
        return data

    def read(self, line: bytes | Oversized) -> SessionMessage | Exception | None:
        """The message of one line; None for a line to skip."""
        if isinstance(line, Oversized):
            found = _HEAD_ID.search(line.head) or _TAIL_ID.search(line.tail)
            why = f"an answer of {line.size:,} bytes, over the limit of {MAX_LINE_BYTES:,}; it was not read"
            return self._answer(_parse_id(found.group(1)) if found else None, why)
        if not line.strip():
            return None
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            why = f"an answer that is not valid UTF-8 ({exc.reason} at byte {exc.start})"
            return self._answer(self._id_of(line.decode("utf-8", "replace")), why)
        try:
            data: Any = json.loads(text)
        except (ValueError, RecursionError) as exc:
            why = f"an answer that is not JSON ({type(exc).__name__}: {str(exc)[:200]})"
            return self._answer(self._id_of(text), why)
        if not isinstance(data, dict):
            return self._answer(None, f"a message that is not a JSON object: {text[:200]!r}")
        message = cast("dict[str, Any]", data)
        if not self._passes(message):
            return None
        if "id" in message and "method" not in message:
            if self._method(message["id"]) == "tools/list":
                self.listed_bytes += len(line)
            message = self._sanitized_answer(message)
        try:
            parsed = mcp.types.jsonrpc_message_adapter.validate_python(message, by_name=False)
        except (pydantic.ValidationError, RecursionError) as exc:
            why = f"an answer that is not valid JSON-RPC ({str(exc)[:300]})"
            return self._answer(request_key(message.get("id")), why)
        answer = isinstance(parsed, mcp.types.JSONRPCResponse | mcp.types.JSONRPCError)
        if answer and parsed.id is not None:
            self._done(parsed.id)
        return SessionMessage(parsed)

    def accept(self, item: SessionMessage | Exception) -> SessionMessage | Exception | None:
        """What the session gets of a message another transport has parsed (HTTP):
        the same caps and checks as a line; None to drop it."""
        if isinstance(item, Exception):
            return item
        message = item.message
        if isinstance(message, mcp.types.JSONRPCNotification):
            passes = self._passes({"method": message.method, "params": message.params})
            return item if passes else None
        if isinstance(message, mcp.types.JSONRPCRequest):
            return item if self._passes({"method": message.method, "id": message.id}) else None
        if isinstance(message, mcp.types.JSONRPCResponse):
            raw = {"jsonrpc": "2.0", "id": message.id, "result": message.result}
            if self._method(message.id) == "tools/list":
                with suppress(ValueError, RecursionError):
                    self.listed_bytes += len(pydantic_core.to_json(message.result))
            sanitized = self._sanitized_answer(raw)
            self._done(message.id)
            if sanitized is raw:
                return item
            try:
                parsed = mcp.types.jsonrpc_message_adapter.validate_python(sanitized, by_name=False)
            except (pydantic.ValidationError, RecursionError) as exc:  # pragma: no cover
                return ValueError(f"MCP server {self.server!r} sent an answer: {str(exc)[:300]}")
            return SessionMessage(parsed, metadata=item.metadata)
        if message.id is not None:
            self._done(message.id)
        return item

    def _method(self, rid: object) -> str | None:
        """The method of the request in flight *rid* names, if any."""
        key = request_key(rid)
        return None if key is None else self.in_flight.get(key)

    def _id_of(self, text: str) -> RequestId | None:
        """The id of a line that is not usable as it is, if it can still be read."""
        try:
            data: Any = json.loads(text)
        except (ValueError, RecursionError):
            found = _HEAD_ID.search(text[:_KEEP].encode()) or _TAIL_ID.search(
                text[-_KEEP:].encode()
            )
            return _parse_id(found.group(1)) if found else None
        return request_key(_field(data, "id"))

    def _answer(self, rid: RequestId | None, why: str) -> SessionMessage | Exception:
        """The answer for request *rid* the server spoiled: an error result for a tool
        call, an error for any other request; an ``Exception`` (logged, then dropped by
        the session) when no request in flight can be named."""
        key = request_key(rid)
        method = self._method(key)
        if key is None or method is None:
            logger.warning("MCP server %r sent %s", self.server, why)
            return ValueError(f"MCP server {self.server!r} sent {why}")
        self._done(key)
        return self._spoiled(key, method, f"MCP server {self.server!r} sent {why}")

    @staticmethod
    def _spoiled(rid: RequestId, method: str, text: str) -> SessionMessage:
        if method == "tools/call":
            result = {"content": [{"type": "text", "text": text}], "isError": True}
            return SessionMessage(mcp.types.JSONRPCResponse(jsonrpc="2.0", id=rid, result=result))
        error = mcp.types.ErrorData(code=mcp.types.INTERNAL_ERROR, message=text)
        return SessionMessage(mcp.types.JSONRPCError(jsonrpc="2.0", id=rid, error=error))

    def _done(self, rid: Any) -> None:
        key = request_key(rid)
        if key is None or self.in_flight.pop(key, None) is None:
            return  # an answer to nothing we asked: no reason to reset a cap
        self._progress.pop(key, None)
        self._tool_of.pop(key, None)
        self._notes = 0

    def _passes(self, message: dict[str, Any]) -> bool:
        """Whether a notification or a request of the server goes on to the session
        (the flood caps); anything else does."""
        if "method" not in message:
            return True
        if "id" in message:
            return self._pass_request(message)
        return self._pass_notification(message)

    def _pass_request(self, message: dict[str, Any]) -> bool:
        key = request_key(message.get("id"))
        if key is None:
            return True  # not a valid request: the SDK's own validation says so
        if key not in self._asked and len(self._asked) >= MAX_SERVER_REQUESTS:
            self._asked_dropped += 1
            if self._asked_dropped == 1:
                logger.warning(
                    "MCP server %r: more than %d of its requests unanswered; "
                    "the rest are dropped until some are answered",
                    self.server,
                    MAX_SERVER_REQUESTS,
                )
            return False
        self._asked.add(key)
        if len(self._asked) < MAX_SERVER_REQUESTS // 2:
            self._asked_dropped = 0
        return True

    def _pass_notification(self, message: dict[str, Any]) -> bool:
        method = message.get("method")
        if method == "notifications/progress":
            token = request_key(_field(message.get("params"), "progressToken"))
            seen = None if token is None else self._progress.get(token)
            if token is None or seen is None:
                return False  # no call of ours asked for it
            self._progress[token] = seen + 1
            if seen == MAX_NOTIFICATIONS:
                logger.warning(
                    "MCP server %r: more than %d progress notifications for one call; "
                    "the rest are dropped",
                    self.server,
                    MAX_NOTIFICATIONS,
                )
            return seen < MAX_NOTIFICATIONS
        self._notes += 1
        if self._notes == MAX_NOTIFICATIONS + 1:
            logger.warning(
                "MCP server %r: more than %d notifications in a row; "
                "the rest until its next answer are dropped",
                self.server,
                MAX_NOTIFICATIONS,
            )
        return self._notes <= MAX_NOTIFICATIONS

    def _sanitized_answer(self, message: dict[str, Any]) -> dict[str, Any]:
        """An answer with its content capped and its structured content checked
        (tools/call) or its bad tools left out (tools/list); anything else as it is
        (the very same object)."""
        key = request_key(message.get("id"))
        method = self._method(key)
        result: Any = message.get("result")
        if key is None or not isinstance(result, dict):
            return message
        result = cast("dict[str, Any]", result)
        if method == "initialize" and isinstance(result.get("protocolVersion"), str):
            self.version = result["protocolVersion"]
        if method == "tools/call":
            content: Any = result.get("content")
            items = cast("list[Any]", content) if isinstance(content, list) else []
            if len(items) > MAX_CONTENT_ITEMS:
                note = (
                    f"[{len(items) - MAX_CONTENT_ITEMS:,} of {len(items):,} content items dropped]"
                )
                kept = [*items[:MAX_CONTENT_ITEMS], {"type": "text", "text": note}]
                message = {**message, "result": {**result, "content": kept}}
            why = self._structured_problem(self._tool_of.get(key), result)
            if why is not None:
                text = f"MCP server {self.server!r} sent {why}"
                spoiled = {"content": [{"type": "text", "text": text}], "isError": True}
                return {**message, "result": spoiled}
        elif method == "tools/list":
            tools: Any = result.get("tools")
            if isinstance(tools, list):
                kept = [self._without_output_schema(t) for t in cast("list[Any]", tools)]
                kept = [t for t in kept if self._valid_tool(t)]
                return {**message, "result": {**result, "tools": kept}}
        return message

    def _without_output_schema(self, entry: object) -> object:
        """*entry* without its ``outputSchema``, which is kept here (on RE2)."""
        if not isinstance(entry, dict):
            return entry
        tool = cast("dict[str, Any]", entry)
        if "outputSchema" not in tool:
            return tool
        schema, name = tool.get("outputSchema"), tool.get("name")
        if isinstance(name, str):
            if isinstance(schema, dict):
                self._output_schemas[name] = InputValidator(cast("dict[str, Any]", schema))
            else:
                self._output_schemas.pop(name, None)
        return {k: v for k, v in tool.items() if k != "outputSchema"}

    def _structured_problem(self, tool: str | None, result: dict[str, Any]) -> str | None:
        """Why a tool's result does not match its output schema (as the SDK would
        check it, but on RE2), or None."""
        validator = self._output_schemas.get(tool) if tool is not None else None
        if validator is None or result.get("isError") is True:
            return None
        if "structuredContent" not in result:
            return f"no structured content for tool {tool!r}, which has an output schema"
        try:
            error = next(validator.iter_errors(result["structuredContent"]), None)
        except Exception as exc:  # the server's schema: any failure is this call's
            return f"an output schema for tool {tool!r} that cannot be applied ({str(exc)[:200]})"
        if error is None:
            return None
        return f"structured content that does not match tool {tool!r}'s output schema: {str(error.message)[:300]}"

    def _valid_tool(self, entry: Any) -> bool:
        # As the session will check the listing: the protocol version's own shape.
        try:
            mcp.types.Tool.model_validate(entry, by_name=False)
            with suppress(KeyError):  # a version the SDK has no table for
                methods.validate_server_result("tools/list", self.version, {"tools": [entry]})
        except (pydantic.ValidationError, ValueError, RecursionError) as exc:
            logger.warning(
                "MCP tool %r of %r is skipped: not a valid tools/list entry (%s)",
                _field(entry, "name"),
                self.server,
                str(exc)[:300],
            )
            return False
        if not _sendable(entry):
            # Its name would fail every call (and could fail the connection); its
            # text would fail the model's request.
            logger.warning(
                "MCP tool %r of %r is skipped: it holds a string that is not valid "
                "Unicode (a lone surrogate)",
                _field(entry, "name"),
                self.server,
            )
            return False
        return True
