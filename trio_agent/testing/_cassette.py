"""Cassettes: a real model client's exchanges, recorded, and replayed in virtual time.

:func:`record` wraps a real :class:`~trio_agent.AnthropicClient` or
:class:`~trio_agent.OpenAIClient`: the client it yields sends every request through a
recording ``httpx`` transport, and leaving the block writes a :class:`Cassette`, a JSON
file holding, per request, the request (credential headers redacted), the response's
status, headers and body bytes with the time each chunk arrived, and the output of
each tool call (read from the next request, where the tool results travel).

:meth:`ScriptedModel.from_cassette <trio_agent.testing.ScriptedModel.from_cassette>`
replays it: the same bytes on the same schedule, in Trio's virtual time, each request
checked against the recorded one (:class:`CassetteMismatch` names the first field
that differs). File format (``version`` 1)::

    {"version": 1, "protocol": "anthropic",
     "interactions": [
       {"request": {"method": "POST", "path": "/v1/messages",
                    "headers": {"x-api-key": "<redacted>", ...}, "body": {...}},
        "response": {"status": 200, "headers": [["content-type", "text/event-stream"], ...],
                     "delay": 0.41, "chunks": [[0.0, "event: message_start\\n..."], ...],
                     "disconnect": false}},
       {"request": ..., "response": {"error": "ConnectError", "delay": 0.002}}],
     "tool_outputs": {"toolu_1": {"content": "...", "is_error": false}}}

A chunk is ``[seconds after the previous one, text]``, or ``[seconds, {"base64":
...}]`` when it is not UTF-8 on its own (a chunk boundary inside a character, a
compressed body).
"""

from __future__ import annotations

import base64
import copy
import json
import os
import re
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias, TypeVar, cast, final

import attrs
import httpx
import trio

from .._messages import block_from_api
from .._tools import Tool, ToolContext, ToolOutput, ToolReturn

__all__ = [
    "Cassette",
    "CassetteError",
    "CassetteMismatch",
    "Interaction",
    "RecordedExchangeError",
    "RecordedRequest",
    "RecordedResponse",
    "Recorder",
    "ToolReplay",
    "clone_client",
    "record",
    "recording",
]

VERSION: Final = 1

#: Request headers whose values never reach a cassette.
SECRET_HEADERS: Final = frozenset(
    {"x-api-key", "authorization", "api-key", "cookie", "proxy-authorization", "x-goog-api-key"}
)
#: Response headers whose values are redacted (they name the account).
_ACCOUNT_HEADERS: Final = frozenset(
    {"set-cookie", "anthropic-organization-id", "openai-organization", "openai-project"}
)
#: Hop-by-hop and framing headers: the replaying transport frames the body itself.
_FRAMING: Final = frozenset({"content-length", "transfer-encoding", "connection", "keep-alive"})
_REDACTED: Final = "<redacted>"

C = TypeVar("C")
ToolMode: TypeAlias = Literal["run", "replay"]
Protocol: TypeAlias = Literal["anthropic", "openai-responses", "openai-chat"]


_MISSING: Final = object()


def _present(value: object) -> Any:
    return None if value is _MISSING else value


class CassetteError(Exception):
    """A cassette file that cannot be read (not JSON, not version 1, a wrong field)."""


@final
class CassetteMismatch(AssertionError):
    """A replayed request differs from the recorded one, or has none recorded.

    Attributes:
        index: the request's position (0-based) in the cassette.
        field: the first differing field as a path: ``"body.messages[0].content"``,
            ``"path"``; ``"request"`` for a request past the cassette's end.
        recorded: the recorded value there (``None`` when the field is missing).
        received: the replayed request's value there.
    """

    def __init__(self, index: int, field: str, recorded: Any, received: Any) -> None:
        self.index = index
        self.field = field
        self.recorded = _present(recorded)
        self.received = _present(received)
        if field == "request":
            message = (
                f"request {index + 1} has no recording: the cassette holds"
                f" {recorded} requests (re-record it, e.g. pytest --record)"
            )
        else:
            message = (
                f"request {index + 1} differs from the recording at {field}:"
                f" recorded {_short(recorded)}, got {_short(received)}"
            )
        super().__init__(message)


def _short(value: Any, limit: int = 200) -> str:
    if value is _MISSING:
        return "nothing (no such field)"
    text = json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= limit else text[: limit - 1] + "…"


_NAME = re.compile(r"[A-Za-z0-9_-]+")


def _member(where: str, key: str) -> str:
    """*where*'s member *key*: ``.key``, or ``["key"]`` (JSON-quoted) for any other key."""
    if _NAME.fullmatch(key):
        return f"{where}.{key}"
    return f"{where}[{json.dumps(key, ensure_ascii=False)}]"


def first_difference(recorded: Any, received: Any, path: str) -> tuple[str, Any, Any] | None:
    """The first place two JSON values differ: ``(path, recorded, received)``, or None
    (a side without the field holds a private marker there).

    Objects compare key by key (recorded keys first, in order, then new keys); arrays
    element by element, then by length. A path is ``body.messages[0].content``; a key
    that is not a plain name is quoted: ``body.metadata["user id"]``.
    """
    # Iterative (a deep body must not exhaust the stack): a stack of pending pairs.
    stack: list[tuple[str, Any, Any]] = [(path, recorded, received)]
    while stack:
        where, a, b = stack.pop()
        if isinstance(a, dict) and isinstance(b, dict):
            da = cast("dict[str, Any]", a)
            db = cast("dict[str, Any]", b)
            pending: list[tuple[str, Any, Any]] = []
            for key in da:
                pending.append((_member(where, key), da[key], db.get(key, _MISSING)))
            for key in db:
                if key not in da:
                    pending.append((_member(where, key), _MISSING, db[key]))
            stack.extend(reversed(pending))
        elif isinstance(a, list) and isinstance(b, list):
            la = cast("list[Any]", a)
            lb = cast("list[Any]", b)
            pending = [
                (f"{where}[{i}]", x, y) for i, (x, y) in enumerate(zip(la, lb, strict=False))
            ]
            if len(la) != len(lb):
                n = min(len(la), len(lb))
                pending.append(
                    (
                        f"{where}[{n}]",
                        la[n] if n < len(la) else _MISSING,
                        lb[n] if n < len(lb) else _MISSING,
                    )
                )
            stack.extend(reversed(pending))
        elif type(a) is not type(b) or a != b:
            return (where, cast("Any", a), b)
    return None


# -- the cassette's values ------------------------------------------------------------


@attrs.frozen
class RecordedRequest:
    """One recorded request.

    Attributes:
        method: ``"POST"``.
        path: the URL's path (``"/v1/messages"``).
        headers: lower-case names; credentials are ``"<redacted>"``.
        body: the JSON body (``None`` when it was not JSON).
    """

    method: str
    path: str
    headers: Mapping[str, str]
    body: Any

    def to_json(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "path": self.path,
            "headers": dict(self.headers),
            "body": self.body,
        }


@attrs.frozen
class RecordedResponse:
    """One recorded response: its head, and its body as timed chunks.

    Attributes:
        status: the HTTP status.
        headers: ``(name, value)`` pairs, framing headers left out.
        delay: seconds from the request to the response's headers.
        chunks: ``(seconds after the previous chunk (or the headers), bytes)``.
        disconnect: the body ended with a read error instead of its end.
    """

    status: int
    headers: tuple[tuple[str, str], ...]
    delay: float
    chunks: tuple[tuple[float, bytes], ...]
    disconnect: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "headers": [list(h) for h in self.headers],
            "delay": self.delay,
            "chunks": [[dt, _chunk_json(data)] for dt, data in self.chunks],
            "disconnect": self.disconnect,
        }


@attrs.frozen
class RecordedExchangeError:
    """A request that got no response: the transport error and when it came.

    Attributes:
        error: the ``httpx.TransportError`` subclass's name (``"ConnectError"``).
        delay: seconds from the request to the error.
    """

    error: str
    delay: float

    def to_json(self) -> dict[str, Any]:
        return {"error": self.error, "delay": self.delay}

    def error_type(self) -> type[httpx.TransportError]:
        found = getattr(httpx, self.error, None)
        if isinstance(found, type) and issubclass(found, httpx.TransportError):
            return found
        return httpx.RemoteProtocolError


@attrs.frozen
class Interaction:
    """One request and what came back."""

    request: RecordedRequest
    response: RecordedResponse | RecordedExchangeError


@attrs.frozen
class ToolReplay:
    """A tool call's recorded output: the content its result carried to the model.

    Attributes:
        duration: how long the tool ran (seconds), when it was timed (the ``cassette``
            fixture times the tools it hands out); a replayed tool takes as long.
    """

    content: str | tuple[Any, ...]
    is_error: bool = False
    duration: float | None = None


def _chunk_json(data: bytes) -> str | dict[str, str]:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


def _chunk_bytes(value: Any, where: str) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    if isinstance(value, dict) and isinstance(value.get("base64"), str):
        try:
            return base64.b64decode(cast("str", value["base64"]), validate=True)
        except ValueError as exc:
            raise CassetteError(f"{where}: bad base64") from exc
    raise CassetteError(f"{where}: a chunk is a string or {{'base64': ...}}, not {value!r}")


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise CassetteError(f"{where}: expected seconds >= 0, got {value!r}")
    return float(value)


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise CassetteError(f"{where}: expected an object, got {type(value).__name__}")
    return cast("dict[str, Any]", value)


def _request_from_json(data: Any, where: str) -> RecordedRequest:
    data = _mapping(data, where)
    headers = _mapping(data.get("headers", {}), f"{where}.headers")
    method, path = data.get("method"), data.get("path")
    if not isinstance(method, str) or not isinstance(path, str):
        raise CassetteError(f"{where}: method and path are strings")
    return RecordedRequest(
        method=method,
        path=path,
        headers={str(k): str(v) for k, v in headers.items()},
        body=data.get("body"),
    )


def _response_from_json(data: Any, where: str) -> RecordedResponse | RecordedExchangeError:
    data = _mapping(data, where)
    if "error" in data:
        error = data["error"]
        if not isinstance(error, str):
            raise CassetteError(f"{where}.error: expected a string")
        return RecordedExchangeError(error, _number(data.get("delay", 0.0), f"{where}.delay"))
    status = data.get("status")
    if isinstance(status, bool) or not isinstance(status, int) or not 100 <= status <= 599:
        raise CassetteError(f"{where}.status: expected an HTTP status, got {status!r}")
    headers: list[tuple[str, str]] = []
    raw_headers = data.get("headers", [])
    if not isinstance(raw_headers, list):
        raise CassetteError(f"{where}.headers: expected a list")
    for i, item in enumerate(cast("list[Any]", raw_headers)):
        pair = cast("list[Any]", item) if isinstance(item, list) else []
        if not (len(pair) == 2 and isinstance(pair[0], str) and isinstance(pair[1], str)):
            raise CassetteError(f"{where}.headers[{i}]: expected [name, value]")
        headers.append((pair[0], pair[1]))
    chunks: list[tuple[float, bytes]] = []
    raw_chunks = data.get("chunks", [])
    if not isinstance(raw_chunks, list):
        raise CassetteError(f"{where}.chunks: expected a list")
    for i, chunk in enumerate(cast("list[Any]", raw_chunks)):
        pair = cast("list[Any]", chunk) if isinstance(chunk, list) else []
        if len(pair) != 2:
            raise CassetteError(f"{where}.chunks[{i}]: expected [seconds, data]")
        chunks.append(
            (
                _number(pair[0], f"{where}.chunks[{i}]"),
                _chunk_bytes(pair[1], f"{where}.chunks[{i}]"),
            )
        )
    return RecordedResponse(
        status=status,
        headers=tuple(headers),
        delay=_number(data.get("delay", 0.0), f"{where}.delay"),
        chunks=tuple(chunks),
        disconnect=bool(data.get("disconnect", False)),
    )


@attrs.frozen
class Cassette:
    """A recording of a model client's requests, responses and tool outputs.

    Attributes:
        protocol: the wire format (``"anthropic"``, ``"openai-responses"``,
            ``"openai-chat"``), from the recorded client.
        interactions: the requests in the order they were sent.
        tool_outputs: each tool call's output by its tool use id.
    """

    protocol: Protocol
    interactions: tuple[Interaction, ...]
    tool_outputs: Mapping[str, ToolReplay] = attrs.field(factory=dict[str, ToolReplay])

    def to_json(self) -> dict[str, Any]:
        """The cassette as the JSON value of its file."""
        return {
            "version": VERSION,
            "protocol": self.protocol,
            "interactions": [
                {"request": i.request.to_json(), "response": i.response.to_json()}
                for i in self.interactions
            ],
            "tool_outputs": {
                k: {"content": list(v.content) if isinstance(v.content, tuple) else v.content}
                | ({"is_error": True} if v.is_error else {})
                | ({"duration": v.duration} if v.duration is not None else {})
                for k, v in self.tool_outputs.items()
            },
        }

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the cassette to *path* (atomically: a temporary file, then a rename)."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp")
        data = self.to_json()
        text = json.dumps(data, ensure_ascii=False, indent=1) + "\n"
        try:
            encoded = text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate (a tool's output): kept as \udXXX
            encoded = (json.dumps(data, indent=1) + "\n").encode("ascii")
        tmp.write_bytes(encoded)
        tmp.replace(target)

    @classmethod
    def from_json(cls, data: Any) -> Cassette:
        """A cassette from its file's JSON value.

        Raises:
            CassetteError: not a version 1 cassette.
        """
        data = _mapping(data, "cassette")
        if data.get("version") != VERSION:
            raise CassetteError(
                f"not a version {VERSION} cassette: version {data.get('version')!r}"
            )
        protocol = data.get("protocol")
        if protocol not in ("anthropic", "openai-responses", "openai-chat"):
            raise CassetteError(f"unknown protocol {protocol!r}")
        raw = data.get("interactions")
        if not isinstance(raw, list):
            raise CassetteError("cassette.interactions: expected a list")
        interactions = []
        for i, item in enumerate(cast("list[Any]", raw)):
            item = _mapping(item, f"interactions[{i}]")
            interactions.append(
                Interaction(
                    _request_from_json(item.get("request"), f"interactions[{i}].request"),
                    _response_from_json(item.get("response"), f"interactions[{i}].response"),
                )
            )
        outputs: dict[str, ToolReplay] = {}
        for key, value in _mapping(data.get("tool_outputs", {}), "tool_outputs").items():
            value = _mapping(value, f"tool_outputs.{key}")
            content = value.get("content", "")
            if isinstance(content, list):
                content = tuple(cast("list[Any]", content))
            elif not isinstance(content, str):
                raise CassetteError(f"tool_outputs.{key}.content: a string or a list of blocks")
            duration = value.get("duration")
            outputs[key] = ToolReplay(
                content,
                bool(value.get("is_error", False)),
                None if duration is None else _number(duration, f"tool_outputs.{key}.duration"),
            )
        return cls(protocol, tuple(interactions), outputs)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Cassette:
        """Read the cassette at *path*.

        Raises:
            FileNotFoundError: no file there.
            CassetteError: the file is not a cassette.
        """
        text = Path(path).read_text("utf-8")
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise CassetteError(f"{os.fspath(path)!r} is not JSON: {exc}") from exc
        try:
            return cls.from_json(data)
        except CassetteError as exc:
            raise CassetteError(f"{os.fspath(path)!r}: {exc}") from exc

    # -- replaying ------------------------------------------------------------------------

    def check(self, index: int, method: str, path: str, body: Any) -> None:
        """Check the *index*-th replayed request against the recorded one.

        Headers are not compared (a user agent or SDK version may change); the
        method, the path and the JSON body are.

        Raises:
            CassetteMismatch: naming the first differing field.
        """
        if index >= len(self.interactions):
            raise CassetteMismatch(index, "request", len(self.interactions), body)
        recorded = self.interactions[index].request
        if recorded.method != method:
            raise CassetteMismatch(index, "method", recorded.method, method)
        if recorded.path != path:
            raise CassetteMismatch(index, "path", recorded.path, path)
        diff = first_difference(recorded.body, body, "body")
        if diff is not None:
            raise CassetteMismatch(index, *diff)

    def replay_tools(self, tools: Sequence[Tool]) -> list[Tool]:
        """*tools* answering each call with its recorded output instead of running.

        A timed call takes as long as it did (in virtual time, at once for the test).
        A call the cassette holds no output for raises :class:`CassetteMismatch`
        (its result is then the tool's error).
        """

        def wrap(tool: Tool) -> Tool:
            async def run(input: Mapping[str, Any], ctx: ToolContext) -> ToolReturn:
                await trio.lowlevel.checkpoint()
                found = self.tool_outputs.get(ctx.tool_use_id)
                if found is None:
                    raise CassetteMismatch(-1, f"tool_outputs.{ctx.tool_use_id}", None, dict(input))
                if found.duration:
                    await trio.sleep(found.duration)
                if isinstance(found.content, str):
                    content: Any = found.content
                else:
                    content = [block_from_api(b) for b in found.content]
                return ToolOutput(content, is_error=found.is_error)

            return attrs.evolve(tool, run=run)

        return [wrap(t) for t in tools]


# -- recording ----------------------------------------------------------------------------


def _tool_outputs(body: Any) -> dict[str, ToolReplay]:
    """The tool results a request body carries, by tool use id (every protocol)."""
    found: dict[str, ToolReplay] = {}
    if not isinstance(body, dict):
        return found
    body = cast("dict[str, Any]", body)
    for message in body.get("messages") or ():  # the Messages API and Chat Completions
        if not isinstance(message, dict):
            continue
        message = cast("dict[str, Any]", message)
        if message.get("role") == "tool" and isinstance(message.get("tool_call_id"), str):
            content = message.get("content")
            found[message["tool_call_id"]] = ToolReplay(
                content if isinstance(content, str) else json.dumps(content)
            )
        content = message.get("content")
        if isinstance(content, list):
            for block in cast("list[Any]", content):
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    block = cast("dict[str, Any]", block)
                    inner = block.get("content", "")
                    found[str(block.get("tool_use_id"))] = ToolReplay(
                        inner if isinstance(inner, str) else tuple(cast("list[Any]", inner)),
                        bool(block.get("is_error", False)),
                    )
    items = body.get("input")
    if isinstance(items, list):  # the Responses API
        for item in cast("list[Any]", items):
            if isinstance(item, dict) and item.get("type") == "function_call_output":
                item = cast("dict[str, Any]", item)
                output = item.get("output", "")
                found[str(item.get("call_id"))] = ToolReplay(
                    output if isinstance(output, str) else json.dumps(output)
                )
    return found


def _redact_request(headers: httpx.Headers) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in headers.multi_items():
        key = name.lower()
        shown = _REDACTED if key in SECRET_HEADERS else value
        out[key] = f"{out[key]}, {shown}" if key in out else shown
    return out


def _redact_response(headers: httpx.Headers) -> tuple[tuple[str, str], ...]:
    return tuple(
        (name.lower(), _REDACTED if name.lower() in _ACCOUNT_HEADERS else value)
        for name, value in headers.multi_items()
        if name.lower() not in _FRAMING
    )


@final
class Recorder:
    """Collects the interactions of one :func:`record` block (and, for the tools that
    :meth:`timed` wrapped, how long each call ran)."""

    def __init__(self, protocol: Protocol = "anthropic") -> None:
        self.protocol: Protocol = protocol
        self.interactions: list[Interaction | None] = []
        self.durations: dict[str, float] = {}

    def timed(self, tools: Sequence[Tool]) -> list[Tool]:
        """*tools* whose runs are timed into the cassette, by tool use id."""

        def wrap(tool: Tool) -> Tool:
            inner = tool.run

            async def run(input: Mapping[str, Any], ctx: ToolContext) -> ToolReturn:
                start = trio.current_time()
                try:
                    return await inner(input, ctx)
                finally:
                    self.durations[ctx.tool_use_id] = round(trio.current_time() - start, 6)

            return attrs.evolve(tool, run=run)

        return [wrap(t) for t in tools]

    def slot(self) -> int:
        self.interactions.append(None)
        return len(self.interactions) - 1

    def cassette(self) -> Cassette:
        done = [i for i in self.interactions if i is not None]
        outputs: dict[str, ToolReplay] = {}
        for interaction in done:
            for key, value in _tool_outputs(interaction.request.body).items():
                outputs.setdefault(key, value)
        for key, duration in self.durations.items():
            if key in outputs:
                outputs[key] = attrs.evolve(outputs[key], duration=duration)
        return Cassette(self.protocol, tuple(done), outputs)


@final
class _RecordingStream(httpx.AsyncByteStream):
    """The inner body, passed through chunk by chunk, each chunk timed.

    A plain async iterator rather than an async generator, so an abandoned body
    needs no finalizer.
    """

    def __init__(
        self,
        inner: httpx.AsyncByteStream,
        finish: Callable[[tuple[tuple[float, bytes], ...], bool], None],
    ) -> None:
        self._inner = inner
        self._iterator: AsyncIterator[bytes] | None = None
        self._finish = finish
        self._chunks: list[tuple[float, bytes]] = []
        self._last = trio.current_time()
        self._done = False

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self

    async def __anext__(self) -> bytes:
        if self._iterator is None:
            self._iterator = self._inner.__aiter__()
        try:
            data = await self._iterator.__anext__()
        except StopAsyncIteration:
            self._end(disconnect=False)
            raise
        except httpx.ReadError:
            self._end(disconnect=True)
            raise
        now = trio.current_time()
        self._chunks.append((round(now - self._last, 6), bytes(data)))
        self._last = now
        return data

    def _end(self, *, disconnect: bool) -> None:
        if not self._done:
            self._done = True
            self._finish(tuple(self._chunks), disconnect)

    async def aclose(self) -> None:
        # A body abandoned part way is kept as far as it was read: the client read
        # no further, so a replay needs no more.
        self._end(disconnect=False)
        await self._inner.aclose()


@final
class _RecordingTransport(httpx.AsyncBaseTransport):
    def __init__(self, inner: httpx.AsyncBaseTransport, recorder: Recorder) -> None:
        self._inner = inner
        self._recorder = recorder

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        content = await request.aread()
        try:
            body: Any = json.loads(content) if content else None
        except ValueError:
            body = None
        recorded = RecordedRequest(
            method=request.method,
            path=request.url.path,
            headers=_redact_request(request.headers),
            body=body,
        )
        slot = self._recorder.slot()
        start = trio.current_time()
        try:
            response = await self._inner.handle_async_request(request)
        except httpx.TransportError as exc:
            self._recorder.interactions[slot] = Interaction(
                recorded,
                RecordedExchangeError(type(exc).__name__, round(trio.current_time() - start, 6)),
            )
            raise
        delay = round(trio.current_time() - start, 6)
        status, headers = response.status_code, _redact_response(response.headers)

        def finish(chunks: tuple[tuple[float, bytes], ...], disconnect: bool) -> None:
            self._recorder.interactions[slot] = Interaction(
                recorded, RecordedResponse(status, headers, delay, chunks, disconnect)
            )

        assert isinstance(response.stream, httpx.AsyncByteStream)
        response.stream = _RecordingStream(response.stream, finish)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def _protocol_of(client: Any) -> Protocol:
    from .._model import AnthropicClient, OpenAIClient

    if isinstance(client, AnthropicClient):
        return "anthropic"
    if isinstance(client, OpenAIClient):
        return "openai-responses" if client.api == "responses" else "openai-chat"
    raise TypeError(
        f"record() and cassettes take an AnthropicClient or an OpenAIClient, not {client!r}"
    )


def clone_client(client: Any, http_client: httpx.AsyncClient) -> Any:
    """A copy of *client* (an Anthropic or OpenAI client) whose requests all go
    through *http_client*: the same credentials, provider and settings."""
    _protocol_of(client)
    clone = copy.copy(client)
    # The ProviderClient constructor, re-run on the copy: a pool of its own over
    # http_client, every public setting as it was (the credentials are copied).
    base_init: Any = super(type(client), clone).__init__
    base_init(
        client.provider,
        base_url=client.base_url,
        http_client=http_client,
        retry=client.retry,
        idle_timeout=client.idle_timeout,
        stall_timeout=client.stall_timeout,
        connect_timeout=client.connect_timeout,
        limits=client.limits,
        default_headers=client.default_headers,
    )
    return clone


@asynccontextmanager
async def record(
    client: C,
    path: str | os.PathLike[str],
    *,
    transport: httpx.AsyncBaseTransport | None = None,
) -> AsyncGenerator[C]:
    """Record *client*'s exchanges into a cassette at *path*.

    Yields a copy of *client* to use instead of it; leaving the block writes the
    cassette (also when the block raised: what was recorded up to then). Requests go
    to the real network (``httpx.AsyncHTTPTransport``), or through *transport*.

    Example::

        async with record(AnthropicClient(), "tests/cassettes/fix_bug.json") as client:
            session = Session(client, tools, model="claude-sonnet-5-5")
            ...

    Raises:
        TypeError: *client* is not an AnthropicClient or an OpenAIClient.
    """
    async with recording(client, path, transport=transport) as (clone, _):
        yield clone


@asynccontextmanager
async def recording(
    client: C,
    path: str | os.PathLike[str],
    *,
    transport: httpx.AsyncBaseTransport | None = None,
    recorder: Recorder | None = None,
) -> AsyncGenerator[tuple[C, Recorder]]:
    """:func:`record`, yielding ``(client, recorder)``: ``recorder.timed(tools)`` times
    each tool's run into the cassette, so a replay with ``tools="replay"`` takes as long
    (the pytest plugin's ``cassette.tools()`` does this).

    Example::

        async with recording(AnthropicClient(), "weather.json") as (client, recorder):
            session = Session(client, recorder.timed(tools), model="claude-sonnet-5-5")
            ...
    """
    if recorder is None:
        recorder = Recorder()
    recorder.protocol = _protocol_of(client)
    connect = cast("float", client.connect_timeout)  # pyright: ignore[reportAttributeAccessIssue]
    inner = transport if transport is not None else httpx.AsyncHTTPTransport()
    http = httpx.AsyncClient(
        transport=_RecordingTransport(inner, recorder),
        timeout=httpx.Timeout(None, connect=connect),
    )
    try:
        async with http:
            yield cast("C", clone_client(client, http)), recorder
    finally:
        recorder.cassette().save(path)
