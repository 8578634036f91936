"""OpenAIClient: the Responses and Chat Completions APIs on the same streaming stack.

Example::

    client = trio_agent.OpenAIClient()  # reads OPENAI_API_KEY / OPENAI_BASE_URL
    async with trio_agent.query(client, [trio_agent.UserMessage("Hi")], tools=tools,
                                model="gpt-5", max_tokens=4096) as events:
        ...

    local = trio_agent.OpenAIClient(api_key="local", base_url="http://localhost:8000/v1",
                                    api="chat")

The client satisfies :class:`ModelClient` exactly as :class:`AnthropicClient` does,
and is built from the same parts: httpx + the SSE parser and response reader of
:mod:`._sse`, :class:`RetryPolicy`, the idle watchdog and :class:`StallMeter`,
:class:`StreamLimits` and the typed errors. It takes the canonical history and tools
(converted at this edge, :mod:`._openai_convert`) and yields canonical items: OpenAI's
events are translated (:mod:`._openai_events`) into Messages API events fed to the
same :class:`MessageAccumulator`, so a function call reaches the executor the moment
it is complete (``response.output_item.done`` for the Responses API).

The stream runs in a ``@trio.as_safe_channel``; the items of each network read are
handed over as one batch. Items before the first content event are held back, so a
retry stays invisible; once content was handed out, errors are raised, never retried.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any, Literal, final

import httpx
import trio
from httpx_sse import EventSource, aconnect_sse

from .._exceptions import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    StreamIdleTimeoutError,
    StreamProtocolError,
    StreamTruncatedError,
    excerpt,
)
from .._messages import AssistantMessage, UserMessage
from .._tools import Tool
from ._accumulate import MessageAccumulator, StreamLimits
from ._openai_convert import OpenAIAPI, chat_body, responses_body
from ._openai_errors import openai_error_from_response, retryable_in_stream
from ._openai_events import ChatEvents, ResponsesEvents, decode_openai
from ._retry import RetryPolicy
from ._sse import ResponseReader, SSEParser
from ._stream import StreamEvent, StreamItem, StreamResult, StreamStatistics, one_by_one
from ._watchdog import StallMeter

__all__ = ["OPENAI_BASE_URL", "OpenAIClient"]

logger = logging.getLogger("trio_agent.client")

OPENAI_BASE_URL = "https://api.openai.com/v1"
_MAX_ERROR_BODY = 1024 * 1024
_CLOSE_TIMEOUT = 5.0
_CONTENT_EVENTS = frozenset({"content_block_start", "content_block_delta", "content_block_stop"})


def _retryable(exc: Exception, policy: RetryPolicy) -> bool:
    if isinstance(exc, APIConnectionError | StreamIdleTimeoutError):
        return True
    if isinstance(exc, APIStatusError):
        if exc.status_code is None:  # an error inside the stream
            return retryable_in_stream(exc)
        return policy.should_retry(exc.status_code, exc.headers)
    return False


@final
class OpenAIClient:
    """A streaming client for OpenAI's Responses or Chat Completions API (and the
    OpenAI-compatible servers: vLLM, llama.cpp, Ollama...).

    Args:
        api_key: sent as ``Authorization: Bearer``; defaults to ``$OPENAI_API_KEY``.
            Without one, :class:`AuthenticationError` is raised here, before any
            request (a local server that needs none takes any string). Never shown in
            a repr, log line or exception.
        base_url: includes the API version, as in the openai SDK: defaults to
            ``$OPENAI_BASE_URL``, else ``https://api.openai.com/v1``
            (``http://localhost:8000/v1`` for a local server).
        http_client: an ``httpx.AsyncClient`` to use (and not close).
        api: ``"responses"`` (``POST {base_url}/responses``) or ``"chat"``
            (``POST {base_url}/chat/completions``).
        retry, idle_timeout, stall_timeout, connect_timeout, limits, default_headers:
            as for :class:`AnthropicClient`.
        early_tool_start: Chat only: treat a new tool call index as the end of the
            previous call (for servers known to stream calls one after another);
            by default calls are complete at ``finish_reason``.
        max_tokens_field: Chat only: the body field that carries ``max_tokens``
            (``"max_completion_tokens"``, or ``"max_tokens"`` for older servers).
    """

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        http_client: httpx.AsyncClient | None = None,
        *,
        api: OpenAIAPI = "responses",
        retry: RetryPolicy | None = None,
        idle_timeout: float = 90.0,
        stall_timeout: float = 30.0,
        connect_timeout: float = 10.0,
        limits: StreamLimits | None = None,
        default_headers: Mapping[str, str] | None = None,
        early_tool_start: bool = False,
        max_tokens_field: Literal["max_completion_tokens", "max_tokens"] = "max_completion_tokens",
    ) -> None:
        if api not in ("responses", "chat"):
            raise ValueError(f"api must be 'responses' or 'chat', not {api!r}")
        if idle_timeout <= 0 or stall_timeout <= 0 or connect_timeout <= 0:
            raise ValueError("timeouts must be positive")
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        if not key:
            raise AuthenticationError(
                "no OpenAI API key: pass api_key= or set OPENAI_API_KEY"
                " (a local server that needs none takes any string)",
                status_code=None,
            )
        self._api_key = key
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_BASE_URL).rstrip(
            "/"
        )
        self._http_client = http_client
        self.api: OpenAIAPI = api
        self.retry = retry if retry is not None else RetryPolicy()
        self.idle_timeout = idle_timeout
        self.stall_timeout = stall_timeout
        self.connect_timeout = connect_timeout
        self.limits = limits if limits is not None else StreamLimits()
        self.default_headers = dict(default_headers or {})
        self.early_tool_start = early_tool_start
        self.max_tokens_field = max_tokens_field

    def __repr__(self) -> str:
        return f"OpenAIClient(api={self.api!r}, base_url={self.base_url!r}, api_key='<redacted>')"

    @property
    def has_api_key(self) -> bool:
        """Always True: a client is never built without a key."""
        return True

    @property
    def url(self) -> str:
        """Where the requests go."""
        path = "/responses" if self.api == "responses" else "/chat/completions"
        return self.base_url + path

    def build_request_body(
        self,
        *,
        model: str,
        messages: Sequence[UserMessage | AssistantMessage | Mapping[str, Any]],
        max_tokens: int,
        system: str | Sequence[Mapping[str, Any]] | None = None,
        tools: Sequence[Tool | Mapping[str, Any]] | None = None,
        **params: Any,
    ) -> dict[str, Any]:
        """The JSON body of a streaming request, converted from the canonical values.

        Raises:
            InvalidRequestError: the history holds a block OpenAI cannot take.
        """
        if self.api == "responses":
            return responses_body(
                model=model,
                messages=messages,
                max_tokens=max_tokens,
                system=system,
                tools=tools,
                **params,
            )
        return chat_body(
            model=model,
            messages=messages,
            max_tokens=max_tokens,
            system=system,
            tools=tools,
            max_tokens_field=self.max_tokens_field,
            **params,
        )

    def stream(
        self,
        *,
        model: str,
        messages: Sequence[UserMessage | AssistantMessage | Mapping[str, Any]],
        max_tokens: int,
        system: str | Sequence[Mapping[str, Any]] | None = None,
        tools: Sequence[Tool | Mapping[str, Any]] | None = None,
        **params: Any,
    ) -> contextlib.AbstractAsyncContextManager[trio.abc.ReceiveChannel[StreamItem]]:
        """Stream one answer: ``async with client.stream(...) as items:``.

        Yields canonical items, as :meth:`AnthropicClient.stream` does: every
        (translated) :class:`StreamEvent`, each finished block as an
        :class:`AssistantMessage` the moment it is complete, and last a
        :class:`StreamResult`.

        Raises:
            InvalidRequestError: the history cannot be said in OpenAI's terms
                (raised here, before any request).
            APIStatusError: an HTTP error (typed by its status) or an error inside
                the stream, after the retries the policy allows.
            APIConnectionError, StreamIdleTimeoutError, StreamTruncatedError,
            StreamProtocolError, StreamLimitError: as for :class:`AnthropicClient`.
        """
        body = self.build_request_body(
            model=model,
            messages=messages,
            max_tokens=max_tokens,
            system=system,
            tools=tools,
            **params,
        )
        return one_by_one(self._batches(body))

    def _headers(self) -> dict[str, str]:
        return {**self.default_headers, "authorization": f"Bearer {self._api_key}"}

    @trio.as_safe_channel
    async def _batches(self, body: dict[str, Any]) -> AsyncGenerator[list[StreamItem], None]:
        async with contextlib.AsyncExitStack() as stack:
            http = self._http_client
            if http is None:
                http = await stack.enter_async_context(
                    httpx.AsyncClient(timeout=httpx.Timeout(None, connect=self.connect_timeout))
                )
            started = trio.current_time()
            retries = 0
            while True:
                attempt = _Attempt(self, http, body, started)
                try:
                    async with contextlib.AsyncExitStack() as attempt_stack:
                        await attempt.open(attempt_stack)
                        with attempt.idle:
                            while True:
                                yield await attempt.next_items()
                                if attempt.accumulator.stopped:
                                    break
                        if attempt.idle.cancelled_caught:
                            raise StreamIdleTimeoutError(
                                f"no data for {self.idle_timeout}s (idle_timeout)"
                            )
                    yield [attempt.result(retries)]
                    return
                except Exception as exc:
                    if (
                        attempt.handed_out
                        or retries >= self.retry.max_retries
                        or not _retryable(exc, self.retry)
                    ):
                        raise
                    headers = exc.headers if isinstance(exc, APIStatusError) else None
                    delay = self.retry.delay(retries, headers)
                    retries += 1
                    logger.info(
                        "retry %d/%d in %.3fs after %s: %s",
                        retries,
                        self.retry.max_retries,
                        delay,
                        type(exc).__name__,
                        exc,
                    )
                    await trio.sleep(delay)


class _Attempt:
    """One HTTP request of a stream: open it, then turn its events into items."""

    def __init__(
        self,
        client: OpenAIClient,
        http: httpx.AsyncClient,
        body: dict[str, Any],
        started: float,
    ) -> None:
        self.client = client
        self.http = http
        self.body = body
        self.started = started
        self.accumulator = MessageAccumulator(client.limits)
        self.translator: ResponsesEvents | ChatEvents = (
            ResponsesEvents()
            if client.api == "responses"
            else ChatEvents(early_tool_start=client.early_tool_start)
        )
        self.handed_out = False
        self.buffer: list[StreamItem] = []
        self.request_id: str | None = None
        self.ttft: float | None = None
        self.stall = StallMeter(client.stall_timeout, trio.current_time())
        self.reader: ResponseReader | None = None
        self.parser = SSEParser(client.limits.max_event_bytes)
        self.eof = False
        self.idle = trio.CancelScope()
        self.failure: Exception | None = None

    async def open(self, stack: contextlib.AsyncExitStack) -> None:
        """Send the request; check the answer; leave its body ready to read."""
        client = self.client
        source: EventSource | None = None
        headers = {**client._headers(), "accept-encoding": "identity"}  # pyright: ignore[reportPrivateUsage]
        with trio.move_on_after(client.idle_timeout):
            try:
                source = await stack.enter_async_context(
                    aconnect_sse(self.http, "POST", client.url, json=self.body, headers=headers)
                )
            except httpx.TimeoutException as exc:
                raise APITimeoutError(f"request timed out: {type(exc).__name__}") from exc
            except httpx.TransportError as exc:
                raise APIConnectionError(f"connection failed: {type(exc).__name__}: {exc}") from exc
        if source is None:
            raise APITimeoutError(f"no response within idle_timeout={client.idle_timeout}s")
        response = source.response
        self.reader = ResponseReader(response)
        stack.push_async_callback(_close, self.reader)
        self.request_id = response.headers.get("x-request-id") or response.headers.get("request-id")
        if not response.is_success:
            content = await self._read_some(_MAX_ERROR_BODY)
            raise openai_error_from_response(
                response.status_code,
                content,
                headers=dict(response.headers),
                request_id=self.request_id,
            )
        content_type = response.headers.get("content-type", "")
        if "text/event-stream" not in content_type.partition(";")[0].lower():
            content = await self._read_some(1024)
            raise StreamProtocolError(
                f"expected a text/event-stream answer, got {content_type!r}: {excerpt(content)}"
                + (f" (request id {self.request_id})" if self.request_id else "")
            )
        self.stall = StallMeter(client.stall_timeout, trio.current_time())

    async def _read_some(self, limit: int) -> bytes:
        assert self.reader is not None
        parts: list[bytes] = []
        size = 0
        with trio.move_on_after(self.client.idle_timeout):
            try:
                while size < limit and (chunk := await self.reader.read()) is not None:
                    parts.append(chunk)
                    size += len(chunk)
            except httpx.TransportError:
                pass  # an error body cut short is still worth reporting
        return b"".join(parts)[:limit]

    async def _read(self) -> list[str]:
        """The data of the events completed by the next chunk (within ``self.idle``)."""
        assert self.reader is not None
        idle = self.idle
        idle.deadline = trio.current_time() + self.client.idle_timeout
        try:
            chunk = await self.reader.read()
        except httpx.TransportError as exc:
            raise StreamTruncatedError(
                f"the connection broke mid-stream ({type(exc).__name__})"
            ) from exc
        finally:
            idle.deadline = math.inf
        if chunk is None:
            self.eof = True
            return self.parser.flush()
        return self.parser.feed(chunk)

    async def next_items(self) -> list[StreamItem]:
        """Read until some items may be handed out: those of one chunk; never []."""
        if self.failure is not None:
            failure, self.failure = self.failure, None
            raise failure
        while True:
            if self.eof:
                if self.translator.events == 0:
                    raise StreamTruncatedError("the stream ended without any event")
                raise StreamTruncatedError("the stream ended before the response was complete")
            events = await self._read()
            if not events:
                continue
            items: list[StreamItem] = []
            try:
                self._decode(events, items)
            except Exception as exc:
                if not items:
                    raise
                self.failure = exc  # hand out what came before the error first
            if items:
                return items

    def _decode(self, events: list[str], items: list[StreamItem]) -> None:
        acc = self.accumulator
        feed, message_for = acc.feed, acc.message_for
        translate = self.translator.feed
        limits = self.client.limits
        now = trio.current_time()
        try:
            for data in events:
                for event in translate(decode_openai(data, limits)):
                    etype: str = event["type"]
                    done = feed(event)
                    out = items if self.handed_out else self.buffer
                    out.append(StreamEvent(etype, event))
                    for block in done:
                        if not isinstance(block, AssistantMessage):
                            out.append(message_for(block))
                    if etype in _CONTENT_EVENTS or etype == "message_stop":
                        if self.ttft is None and etype != "message_stop":
                            self.ttft = now - self.started
                        if not self.handed_out:
                            self.handed_out = True
                            items.extend(self.buffer)
                            self.buffer = []
                if acc.stopped:
                    break  # anything after the end is not read
        finally:
            if events:
                self.stall.activity(now)

    def result(self, retries: int) -> StreamResult:
        stats = self.accumulator.statistics()
        return StreamResult(
            message=self.accumulator.message,
            ttft=self.ttft,
            statistics=StreamStatistics(
                events=self.translator.events,
                pings=0,
                ignored=stats.ignored + self.translator.ignored,
                stalls=self.stall.stalls,
                stall_time=self.stall.stall_time,
                retries=retries,
            ),
            request_id=self.request_id,
        )


async def _close(reader: ResponseReader) -> None:
    # Runs on the way out, also when cancelled: shielded, with a bound.
    with trio.move_on_after(_CLOSE_TIMEOUT, shield=True):
        await reader.aclose()
