"""The scripted model: a script of answers served to an HTTP client, in process.

``ScriptedModel.transport()`` is an ``httpx.AsyncBaseTransport`` whose response
bodies sleep with ``trio.sleep`` between chunks, so a whole conversation runs in
Trio's virtual time. :func:`~trio_agent.testing.serve_scripted_model` serves the same
script on a real loopback socket.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, cast, final

import attrs
import httpx
import trio

from ._answers import Answer, DroppedConnection, HTTPErrorAnswer, RawAnswer, ScriptedAnswer
from ._cassette import Cassette, CassetteMismatch, RecordedExchangeError, ToolMode
from ._prompt_cache import PromptCache
from ._scripted_openai import openai_final, plan_openai_stream
from ._sse_render import StreamPlan, plan_stream

if TYPE_CHECKING:
    import os

    from .. import AnthropicClient, RetryPolicy, Tool

__all__ = ["ScriptedModel", "ScriptedRequest", "ScriptedResponse"]

_SECRET_HEADERS = frozenset({"x-api-key", "authorization"})

#: The wire format a scripted model streams its answers in.
WireProtocol: TypeAlias = Literal["anthropic", "openai-responses", "openai-chat"]


def _redacted(headers: Mapping[str, str]) -> str:
    shown = {k: ("<redacted>" if k in _SECRET_HEADERS else v) for k, v in headers.items()}
    return repr(shown)


@attrs.frozen
class ScriptedRequest:
    """A request the scripted model received.

    Attributes:
        method: ``"POST"`` etc.
        path: The request target's path, e.g. ``"/v1/messages"``.
        headers: Header names in lower case (repeated headers joined by ``", "``).
        content: The raw request body.
        body: The body parsed as JSON, or ``None`` if it was not JSON.
        time: ``trio.current_time()`` when the request arrived (virtual time under a
            ``MockClock``), or ``None`` outside a Trio run. The gaps between requests
            are a client's retry delays.
    """

    method: str
    path: str
    headers: Mapping[str, str] = attrs.field(repr=_redacted)
    content: bytes = attrs.field(repr=False)
    body: Any = attrs.field(repr=False)
    time: float | None = attrs.field(default=None, kw_only=True)

    @classmethod
    def build(
        cls,
        method: str,
        path: str,
        headers: Iterable[tuple[str, str]],
        content: bytes,
        *,
        time: float | None = None,
    ) -> ScriptedRequest:
        merged: dict[str, str] = {}
        for name, value in headers:
            key = name.lower()
            merged[key] = f"{merged[key]}, {value}" if key in merged else value
        try:
            body = json.loads(content) if content else None
        except ValueError:
            body = None
        return cls(method=method, path=path, headers=merged, content=content, body=body, time=time)


@attrs.frozen
class ScriptedResponse:
    """What to send for one request: status, headers, then the planned body chunks.

    Attributes:
        status: The HTTP status (0 for a dropped connection).
        headers: Response headers, in order.
        plan: The body as ``(delay, bytes)`` chunks.
        delay: Seconds before the status line and headers.
        dropped: Close the connection after *delay* instead of responding.
        drop_error: What the in-process transport raises for a dropped connection.
    """

    status: int
    headers: tuple[tuple[str, str], ...]
    plan: StreamPlan
    delay: float = 0.0
    dropped: bool = False
    drop_error: type[httpx.TransportError] = httpx.RemoteProtocolError


def _merge_headers(
    defaults: Mapping[str, str], overrides: Mapping[str, str | None]
) -> tuple[tuple[str, str], ...]:
    """The defaults with *overrides* applied; a ``None`` override removes a header."""
    merged: dict[str, str | None] = {k.lower(): v for k, v in defaults.items()}
    merged.update({k.lower(): v for k, v in overrides.items()})
    return tuple((k, v) for k, v in merged.items() if v is not None)


@final
class ScriptedModel:
    """A fake Messages API that answers each request with the next answer of its script.

    Example::

        model = ScriptedModel([ScriptedAnswer(blocks=[TextBlock("Hello")])])
        async with httpx.AsyncClient(transport=model.transport()) as http:
            ...
        assert model.requests[0].body["stream"] is True

    A non-streaming request (``"stream": false``) gets the answer's final object
    (the message, or OpenAI's response / chat completion) as one
    JSON body (its faults do not apply). A request after the script is exhausted
    gets a 500 error (with
    ``x-should-retry: false``) that says so.

    ``protocol="openai-responses"`` or ``"openai-chat"`` streams the same answers as
    OpenAI's Responses / Chat Completions API would (see :mod:`._scripted_openai`).

    With *prompt_cache* (a :class:`PromptCache`), each answer's usage is the one the
    Messages API would report for its request: input, cache writes and cache reads
    by the breakpoints the request marked (the answer's output tokens are kept).

    Attributes:
        requests: every request received, in order.
        connections: TCP connections accepted for this model by
            :func:`serve_scripted_model` (0 in process): fewer than requests when a
            client reuses its connections.
        prompt_cache: the emulated prompt cache, or None.
        cassette: the recording this model replays (:meth:`from_cassette`), or None.
        mismatches: each request that differed from the cassette's (each was also
            raised to the client, as :class:`CassetteMismatch`).
    """

    def __init__(
        self,
        answers: Iterable[Answer] = (),
        *,
        protocol: WireProtocol = "anthropic",
        prompt_cache: PromptCache | None = None,
    ) -> None:
        if protocol not in ("anthropic", "openai-responses", "openai-chat"):
            raise ValueError(f"unknown protocol {protocol!r}")
        self.protocol: WireProtocol = protocol
        self._queue: deque[Answer] = deque()
        self.requests: list[ScriptedRequest] = []
        self._open_streams = 0
        self.connections = 0
        self.prompt_cache = prompt_cache
        self.cassette: Cassette | None = None
        self.tool_mode: ToolMode = "run"
        self.mismatches: list[CassetteMismatch] = []
        self.extend(answers)

    @classmethod
    def from_cassette(
        cls, path: str | os.PathLike[str] | Cassette, *, tools: ToolMode = "run"
    ) -> ScriptedModel:
        """A model replaying the cassette at *path* (made by :func:`record`).

        Each response is the recorded bytes on the recorded schedule (in virtual time
        under a ``MockClock``); each request is checked against the recorded one
        first, a difference raising :class:`CassetteMismatch` (to the client, and
        kept in :attr:`mismatches`). With ``tools="replay"``, :meth:`tools` turns a
        list of tools into ones answering each call with its recorded output.

        Example::

            model = ScriptedModel.from_cassette("tests/cassettes/fix_bug.json")
            session = Session(model.client(), model.tools(tools), model="claude-sonnet-5-5")

        An OpenAI cassette needs a client of the recorded kind (:meth:`client` makes an
        Anthropic one): ``clone_client(OpenAIClient(api_key="x"),
        httpx.AsyncClient(transport=model.transport()))``.

        Raises:
            CassetteError: the file is not a cassette.
            ValueError: *tools* is neither ``"run"`` nor ``"replay"``.
        """
        if tools not in ("run", "replay"):
            raise ValueError(f"tools must be 'run' or 'replay', not {tools!r}")
        cassette = path if isinstance(path, Cassette) else Cassette.load(path)
        answers: list[Answer] = []
        for interaction in cassette.interactions:
            response = interaction.response
            if isinstance(response, RecordedExchangeError):
                answers.append(DroppedConnection(delay=response.delay, error=response.error_type()))
            else:
                headers: dict[str, str | None] = {"content-type": None, "request-id": None}
                for name, value in response.headers:
                    headers[name] = f"{headers[name]}, {value}" if headers.get(name) else value
                answers.append(
                    RawAnswer(
                        chunks=response.chunks,
                        status=response.status,
                        headers=headers,
                        disconnect=response.disconnect,
                        delay=response.delay,
                    )
                )
        model = cls(answers, protocol=cassette.protocol)
        model.cassette = cassette
        model.tool_mode = tools
        return model

    def tools(self, tools: Iterable[Tool]) -> list[Tool]:
        """The tools to run against this model: *tools* as they are, or, for a
        cassette replayed with ``tools="replay"``, tools with the same names and
        schemas answering each call with its recorded output (at once)."""
        tools = list(tools)
        if self.cassette is None or self.tool_mode == "run":
            return tools
        return self.cassette.replay_tools(tools)

    def __repr__(self) -> str:
        return (
            f"<ScriptedModel served={len(self.requests)} remaining={len(self._queue)}"
            f" open_streams={self._open_streams}>"
        )

    def append(self, answer: Answer) -> None:
        """Add *answer* at the end of the script."""
        if not isinstance(answer, ScriptedAnswer | HTTPErrorAnswer | DroppedConnection | RawAnswer):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(
                "a script holds ScriptedAnswer, HTTPErrorAnswer, DroppedConnection or"
                f" RawAnswer values, got {answer!r}"
            )
        self._queue.append(answer)

    def extend(self, answers: Iterable[Answer]) -> None:
        """Add *answers* at the end of the script."""
        for answer in answers:
            self.append(answer)

    @property
    def remaining(self) -> tuple[Answer, ...]:
        """The answers not served yet."""
        return tuple(self._queue)

    @property
    def open_streams(self) -> int:
        """Response bodies handed out and not closed yet (0 once a client cleaned up)."""
        return self._open_streams

    def transport(self) -> httpx.AsyncBaseTransport:
        """An in-process transport for ``httpx.AsyncClient(transport=...)``."""
        return _ScriptedTransport(self)

    def client(
        self,
        *,
        api_key: str | None = "sk-scripted",
        retry: RetryPolicy | None = None,
        base_url: str = "http://scripted",
        **kwargs: Any,
    ) -> AnthropicClient:
        """An :class:`~trio_agent.AnthropicClient` talking to this model in process.

        Retrying is off unless *retry* says otherwise; *kwargs* go to the client.
        *base_url* only shows in the requests' ``host`` header and path (the
        transport answers every URL).

        Example::

            model = ScriptedModel([ScriptedAnswer(blocks=[TextBlock("Hello")])])
            async with query(model.client(), prompt, tools=[], model="m", max_tokens=64) as events:
                ...
        """
        from .. import AnthropicClient, RetryPolicy

        return AnthropicClient(
            api_key=api_key,
            base_url=base_url,
            http_client=httpx.AsyncClient(transport=self.transport()),
            retry=retry if retry is not None else RetryPolicy.never(),
            **kwargs,
        )

    def respond(
        self, method: str, path: str, headers: Iterable[tuple[str, str]], content: bytes
    ) -> ScriptedResponse:
        """Record one request and pop the answer for it (used by both transports)."""
        try:
            now: float | None = trio.current_time()
        except RuntimeError:  # called outside a Trio run (a custom server)
            now = None
        self.requests.append(ScriptedRequest.build(method, path, headers, content, time=now))
        if self.cassette is not None:
            try:
                self.cassette.check(len(self.requests) - 1, method, path, self.requests[-1].body)
            except CassetteMismatch as exc:
                self.mismatches.append(exc)
                raise
        request_id = f"req_scripted_{len(self.requests)}"
        if not self._queue:
            answer: Answer = HTTPErrorAnswer(
                status=500,
                headers={"x-should-retry": "false"},
                body={
                    "type": "error",
                    "error": {
                        "type": "api_error",
                        "message": (
                            f"ScriptedModel: the script is exhausted; request"
                            f" {len(self.requests)} ({method} {path}) has no answer"
                        ),
                    },
                    "request_id": request_id,
                },
            )
        else:
            answer = self._queue.popleft()
        body = self.requests[-1].body
        if (
            self.prompt_cache is not None
            and isinstance(answer, ScriptedAnswer)
            and self.protocol == "anthropic"
            and isinstance(body, dict)
        ):
            usage = self.prompt_cache.usage(
                cast("dict[str, Any]", body),
                0.0 if now is None else now,
                output_tokens=answer.resolved_usage.output_tokens,
            )
            answer = attrs.evolve(answer, usage=usage)
        if isinstance(answer, DroppedConnection):
            return ScriptedResponse(
                status=0,
                headers=(),
                plan=StreamPlan(chunks=()),
                delay=answer.delay,
                dropped=True,
                drop_error=answer.error,
            )
        if isinstance(answer, HTTPErrorAnswer):
            headers_out = _merge_headers(
                {"content-type": "application/json", "request-id": request_id}, answer.headers
            )
            body = answer.render_body(request_id)
            return ScriptedResponse(
                status=answer.status,
                headers=headers_out,
                plan=StreamPlan(chunks=((0.0, body),) if body else ()),
                delay=answer.delay,
            )
        if isinstance(answer, RawAnswer):
            headers_out = _merge_headers(
                {"content-type": "text/event-stream", "request-id": request_id}, answer.headers
            )
            return ScriptedResponse(
                status=answer.status,
                headers=headers_out,
                plan=StreamPlan(chunks=answer.chunks, disconnect=answer.disconnect),
                delay=answer.delay,
            )
        if (
            isinstance(self.requests[-1].body, dict)
            and self.requests[-1].body.get("stream") is False
        ):
            # A non-streaming request (``stream: false``): the whole message as JSON;
            # stream faults do not apply.
            headers_out = _merge_headers(
                {"content-type": "application/json", "request-id": request_id}, answer.headers
            )
            final = (
                answer.message.to_api()
                if self.protocol == "anthropic"
                else openai_final(
                    answer, "responses" if self.protocol == "openai-responses" else "chat"
                )
            )
            if self.protocol != "anthropic":
                headers_out = (*headers_out, ("x-request-id", request_id))
            content = json.dumps(final, ensure_ascii=False).encode()
            return ScriptedResponse(
                status=200, headers=headers_out, plan=StreamPlan(chunks=((0.0, content),))
            )
        headers_out = _merge_headers(
            {
                "content-type": "text/event-stream; charset=utf-8",
                "cache-control": "no-cache",
                "request-id": request_id,
            },
            answer.headers,
        )
        if self.protocol == "anthropic":
            plan = plan_stream(answer)
        else:
            headers_out = (*headers_out, ("x-request-id", request_id))
            plan = plan_openai_stream(
                answer, "responses" if self.protocol == "openai-responses" else "chat"
            )
        return ScriptedResponse(status=200, headers=headers_out, plan=plan)

    def _stream_opened(self) -> None:
        self._open_streams += 1

    def _stream_closed(self) -> None:
        self._open_streams -= 1


@final
class _PlanStream(httpx.AsyncByteStream):
    """A response body that sleeps and yields as its plan says.

    A plain async iterator rather than an async generator, so an abandoned body
    needs no finalizer.
    """

    def __init__(self, model: ScriptedModel, plan: StreamPlan, request: httpx.Request) -> None:
        self._model = model
        self._plan = plan
        self._schedule = plan.schedule()
        self._start = trio.current_time()
        self._request = request
        self._next = 0
        self._sent = 0
        self._closed = False
        self._disconnected = False
        model._stream_opened()  # pyright: ignore[reportPrivateUsage]

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self

    async def __anext__(self) -> bytes:
        if self._closed:
            raise httpx.StreamClosed()
        schedule = self._schedule
        while self._next < len(schedule):
            at, data = schedule[self._next]
            self._next += 1
            await trio.sleep_until(self._start + at)
            if data:
                self._sent += len(data)
                return data
        await trio.lowlevel.checkpoint()
        if self._plan.disconnect and not self._disconnected:
            self._disconnected = True
            raise httpx.ReadError(
                f"scripted disconnect after byte {self._sent}", request=self._request
            )
        raise StopAsyncIteration

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            self._model._stream_closed()  # pyright: ignore[reportPrivateUsage]
        await trio.lowlevel.checkpoint()


@final
class _ScriptedTransport(httpx.AsyncBaseTransport):
    def __init__(self, model: ScriptedModel) -> None:
        self._model = model

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        content = await request.aread()
        response = self._model.respond(
            request.method,
            request.url.raw_path.decode("ascii").split("?", 1)[0],
            [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers.raw],
            content,
        )
        if response.delay > 0:
            await trio.sleep(response.delay)
        else:
            await trio.lowlevel.checkpoint()
        if response.dropped:
            if response.drop_error is httpx.RemoteProtocolError:
                message = "Server disconnected without sending a response."
            else:
                message = f"scripted {response.drop_error.__name__}"
            raise response.drop_error(message, request=request)
        return httpx.Response(
            response.status,
            headers=list(response.headers),
            stream=_PlanStream(self._model, response.plan, request),
            request=request,
        )
