"""What a stdio server sends, line by line, before the SDK sees it: framed, capped, checked.

Pure and synchronous: :class:`LineFramer` cuts the byte stream into lines of bounded
length (an over-long line is counted, never kept); :class:`Reader` turns one line
into what the SDK's session reads, a ``SessionMessage`` or an ``Exception``.

A server that misbehaves costs one call, never the connection or the loop: a line
that is too long, not UTF-8, not JSON or not JSON-RPC answers the call it names
(found in the in-flight requests this module is told about) with an error; a result
with too many content items keeps the first ones and says how many were dropped; a
``tools/list`` entry the SDK would refuse is left out (and logged) instead of failing
the whole listing; progress and log notifications past a cap are dropped cheaply
(parsed, never validated or dispatched).
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
from mcp.shared.message import SessionMessage
from mcp_types import methods

__all__ = [
    "MAX_CONTENT_ITEMS",
    "MAX_LINE_BYTES",
    "MAX_NOTIFICATIONS",
    "LineFramer",
    "Oversized",
    "Reader",
]

logger = logging.getLogger("trio_agent.mcp")

#: The longest line (one JSON-RPC message) read from a server; longer ones are not kept.
MAX_LINE_BYTES = 16 * 1024 * 1024
#: Content items a result keeps; the rest are dropped, with a note saying so.
MAX_CONTENT_ITEMS = 1000
#: Progress notifications per call, and log messages between two answers, passed on.
MAX_NOTIFICATIONS = 1000

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


def _parse_id(raw: bytes) -> RequestId | None:
    try:
        value: Any = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, int | str) else None


@attrs.define
class Reader:
    """Turns the server's lines into the session's messages; told of each request sent."""

    server: str
    #: The method of each request sent and not yet answered, by id.
    in_flight: dict[RequestId, str] = attrs.field(factory=dict[RequestId, str])
    _progress: dict[RequestId, int] = attrs.field(factory=dict[RequestId, int])
    _logs: int = 0
    #: The protocol version the server answered ``initialize`` with.
    version: str = "2025-11-25"

    def sent(self, message: mcp.types.JSONRPCMessage) -> None:
        """Note a message the session sends (its requests are what answers match)."""
        if isinstance(message, mcp.types.JSONRPCRequest):
            self.in_flight[message.id] = message.method
            self._progress[message.id] = 0

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
        if "method" in message and "id" not in message and not self._pass_notification(message):
            return None
        if "id" in message and "method" not in message:
            message = self._sanitized_answer(message)
        try:
            parsed = mcp.types.jsonrpc_message_adapter.validate_python(message, by_name=False)
        except (pydantic.ValidationError, RecursionError) as exc:
            rid = message.get("id")
            why = f"an answer that is not valid JSON-RPC ({str(exc)[:300]})"
            return self._answer(rid if isinstance(rid, int | str) else None, why)
        answer = isinstance(parsed, mcp.types.JSONRPCResponse | mcp.types.JSONRPCError)
        if answer and parsed.id is not None:
            self._done(parsed.id)
        return SessionMessage(parsed)

    def _id_of(self, text: str) -> RequestId | None:
        """The id of a line that is not usable as it is, if it can still be read."""
        try:
            data: Any = json.loads(text)
        except (ValueError, RecursionError):
            found = _HEAD_ID.search(text[:_KEEP].encode()) or _TAIL_ID.search(
                text[-_KEEP:].encode()
            )
            return _parse_id(found.group(1)) if found else None
        rid = _field(data, "id")
        return rid if isinstance(rid, int | str) else None

    def _answer(self, rid: RequestId | None, why: str) -> SessionMessage | Exception:
        """The answer for request *rid* the server spoiled: an error result for a tool
        call, an error for any other request; an ``Exception`` (logged, then dropped by
        the session) when no request in flight can be named."""
        method = self.in_flight.get(rid) if rid is not None else None
        if rid is None or method is None:
            logger.warning("MCP server %r sent %s", self.server, why)
            return ValueError(f"MCP server {self.server!r} sent {why}")
        self._done(rid)
        text = f"MCP server {self.server!r} sent {why}"
        if method == "tools/call":
            result = {"content": [{"type": "text", "text": text}], "isError": True}
            return SessionMessage(mcp.types.JSONRPCResponse(jsonrpc="2.0", id=rid, result=result))
        error = mcp.types.ErrorData(code=mcp.types.INTERNAL_ERROR, message=text)
        return SessionMessage(mcp.types.JSONRPCError(jsonrpc="2.0", id=rid, error=error))

    def _done(self, rid: RequestId) -> None:
        self.in_flight.pop(rid, None)
        self._progress.pop(rid, None)
        self._logs = 0

    def _pass_notification(self, message: dict[str, Any]) -> bool:
        """Whether a notification goes on to the session (the flood caps)."""
        method = message.get("method")
        if method == "notifications/progress":
            token = _field(message.get("params"), "progressToken")
            seen = self._progress.get(token) if isinstance(token, int | str) else None
            if seen is None:
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
        if method == "notifications/message":
            self._logs += 1
            if self._logs == MAX_NOTIFICATIONS + 1:
                logger.warning(
                    "MCP server %r: more than %d log messages in a row; "
                    "the rest until its next answer are dropped",
                    self.server,
                    MAX_NOTIFICATIONS,
                )
            return self._logs <= MAX_NOTIFICATIONS
        return True

    def _sanitized_answer(self, message: dict[str, Any]) -> dict[str, Any]:
        """An answer with its content capped (tools/call) or its bad tools left out
        (tools/list); anything else as it is."""
        rid = message.get("id")
        method = self.in_flight.get(rid) if isinstance(rid, int | str) else None
        result: Any = message.get("result")
        if not isinstance(result, dict):
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
                return {**message, "result": {**result, "content": kept}}
        elif method == "tools/list":
            tools: Any = result.get("tools")
            if isinstance(tools, list):
                kept = [t for t in cast("list[Any]", tools) if self._valid_tool(t)]
                return {**message, "result": {**result, "tools": kept}}
        return message

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
        return True
