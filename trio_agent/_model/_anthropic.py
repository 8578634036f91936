"""AnthropicClient: the Messages API over httpx + httpx-sse, streamed safely under Trio.

Example::

    client = trio_agent.AnthropicClient()  # reads ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL
    async with client.stream(model="claude-sonnet-4-5", max_tokens=1024,
                             messages=[trio_agent.UserMessage("Hi")]) as items:
        async for item in items:
            if isinstance(item, trio_agent.StreamEvent) and item.text_delta:
                print(item.text_delta, end="")
            elif isinstance(item, trio_agent.StreamResult):
                print(item.message.stop_reason, item.ttft)

The stream is read in the task that receives from it: ``receive()`` hands out the items
of the last network read one at a time and, when none is left, reads the next chunk
itself, so a token costs its read and nothing more (no task hop, no channel). The
response is always closed when the ``async with`` block is left. Items before the first
content event are held back, so a retry (an HTTP error, an in-stream
``overloaded_error``...) is invisible to the consumer; once content was handed out,
errors are raised, never retried.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any, final

import httpx
import trio
from httpx_sse import EventSource, aconnect_sse

from .._exceptions import (
    APIConnectionError,
    APIError,
    APIStatusError,
    APITimeoutError,
    StreamIdleTimeoutError,
    StreamProtocolError,
    StreamTruncatedError,
    excerpt,
)
from .._messages import AssistantMessage, UserMessage
from .._tools import Tool
from ._accumulate import MessageAccumulator, StreamLimits
from ._errors_http import RETRYABLE_ERROR_TYPES, error_from_response
from ._protocol import RetryObserver
from ._retry import RetryPolicy
from ._sse import ResponseReader, SSEParser
from ._stream import StreamEvent, StreamItem, StreamResult, StreamStatistics
from ._watchdog import StallMeter

__all__ = ["DEFAULT_BASE_URL", "AnthropicClient"]

logger = logging.getLogger("trio_agent.client")

DEFAULT_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
#: The most bytes of an error body that are read (the rest is not needed).
_MAX_ERROR_BODY = 1024 * 1024
#: How long closing a response may take when the stream was cancelled.
_CLOSE_TIMEOUT = 5.0
#: How long one non-streaming request (:meth:`AnthropicClient.create`) may take.
_CREATE_TIMEOUT = 600.0
_CONTENT_EVENTS = frozenset({"content_block_start", "content_block_delta", "content_block_stop"})


def _message_param(message: Any) -> dict[str, Any]:
    if isinstance(message, (UserMessage, AssistantMessage)):
        return message.to_param()
    if isinstance(message, Mapping):
        return dict(message)
    raise TypeError(f"a message must be a UserMessage, AssistantMessage or dict, not {message!r}")


def _tool_param(tool: Any) -> dict[str, Any]:
    if isinstance(tool, Tool):
        return tool.to_api()
    if isinstance(tool, Mapping):
        return dict(tool)
    raise TypeError(f"a tool must be a Tool or dict, not {tool!r}")


def _retryable(exc: Exception, policy: RetryPolicy) -> bool:
    # A read error or a body cut before any content (StreamTruncatedError) is as
    # harmless to retry as a connection error before the headers.
    if isinstance(exc, (APIConnectionError, StreamIdleTimeoutError, StreamTruncatedError)):
        return True
    if isinstance(exc, APIStatusError):
        if exc.status_code is None:  # an in-stream error event
            return exc.error_type in RETRYABLE_ERROR_TYPES
        return policy.should_retry(exc.status_code, exc.headers)
    return False


@final
class AnthropicClient:
    """A streaming client for the Anthropic Messages API.

    Args:
        api_key: sent as ``x-api-key``; defaults to ``$ANTHROPIC_API_KEY``. Never shown
            in a repr, log line or exception.
        base_url: defaults to ``$ANTHROPIC_BASE_URL``, else ``https://api.anthropic.com``.
        http_client: an ``httpx.AsyncClient`` to use (and not close), e.g. for connection
            pooling or a custom transport; by default each stream opens its own.
        retry: when and how long to wait before retrying.
        idle_timeout: seconds without any byte (pings included) before an attempt is
            abandoned with :class:`StreamIdleTimeoutError` (or :class:`APITimeoutError`
            while waiting for the response headers).
        stall_timeout: gaps longer than this between non-ping events are counted and
            timed as stalls in :class:`StreamStatistics`.
        connect_timeout: the TCP/TLS connect timeout of the client this class opens.
        limits: bounds on event size, tool input size and block count.
        default_headers: extra request headers (e.g. ``anthropic-beta``).
    """

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        http_client: httpx.AsyncClient | None = None,
        *,
        retry: RetryPolicy | None = None,
        idle_timeout: float = 90.0,
        stall_timeout: float = 30.0,
        connect_timeout: float = 10.0,
        limits: StreamLimits | None = None,
        default_headers: Mapping[str, str] | None = None,
    ) -> None:
        if idle_timeout <= 0 or stall_timeout <= 0 or connect_timeout <= 0:
            raise ValueError("timeouts must be positive")
        self._api_key = api_key if api_key is not None else os.environ.get("ANTHROPIC_API_KEY")
        self.base_url = (
            base_url or os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL
        ).rstrip("/")
        self._http_client = http_client
        self.retry = retry if retry is not None else RetryPolicy()
        self.idle_timeout = idle_timeout
        self.stall_timeout = stall_timeout
        self.connect_timeout = connect_timeout
        self.limits = limits if limits is not None else StreamLimits()
        self.default_headers = dict(default_headers or {})

    def __repr__(self) -> str:
        key = "None" if self._api_key is None else "'<redacted>'"
        return f"AnthropicClient(base_url={self.base_url!r}, api_key={key})"

    @property
    def has_api_key(self) -> bool:
        """Whether an API key is configured (the key itself is never exposed)."""
        return bool(self._api_key)

    def _headers(self) -> dict[str, str]:
        headers = {"anthropic-version": ANTHROPIC_VERSION, **self.default_headers}
        if self._api_key:
            headers["x-api-key"] = self._api_key
        return headers

    @staticmethod
    def build_request_body(
        *,
        model: str,
        messages: Sequence[UserMessage | AssistantMessage | Mapping[str, Any]],
        max_tokens: int,
        system: str | Sequence[Mapping[str, Any]] | None = None,
        tools: Sequence[Tool | Mapping[str, Any]] | None = None,
        **params: Any,
    ) -> dict[str, Any]:
        """The JSON body of a streaming Messages API request."""
        body: dict[str, Any] = {
            "model": model,
            "max_tokens": max_tokens,
            "messages": [_message_param(m) for m in messages],
        }
        if system is not None:
            body["system"] = system if isinstance(system, str) else [dict(s) for s in system]
        if tools:
            body["tools"] = [_tool_param(t) for t in tools]
        body.update(params)
        body["stream"] = True
        return body

    def stream(
        self,
        *,
        model: str,
        messages: Sequence[UserMessage | AssistantMessage | Mapping[str, Any]],
        max_tokens: int,
        system: str | Sequence[Mapping[str, Any]] | None = None,
        tools: Sequence[Tool | Mapping[str, Any]] | None = None,
        on_retry: RetryObserver | None = None,
        **params: Any,
    ) -> contextlib.AbstractAsyncContextManager[trio.abc.ReceiveChannel[StreamItem]]:
        """Stream one answer: ``async with client.stream(...) as items:``.

        Yields every :class:`StreamEvent` as it arrives; at each ``content_block_stop``
        an :class:`AssistantMessage` holding just the finished block; and last a
        :class:`StreamResult` with the whole message, TTFT and statistics.

        *on_retry* is called with the error before each retry; when it returns
        False the error is raised instead.

        Raises:
            APIStatusError: an HTTP error or in-stream ``error`` event (typed by status
                or error type), after the retries the policy allows.
            APIConnectionError: no response, after the retries.
            StreamIdleTimeoutError: no byte for ``idle_timeout`` seconds.
            StreamTruncatedError: the stream ended before ``message_stop``.
            StreamProtocolError: not an SSE response, or an event broke the protocol.
            StreamLimitError: an event, a tool input or the block count was too big.
        """
        body = self.build_request_body(
            model=model,
            messages=messages,
            max_tokens=max_tokens,
            system=system,
            tools=tools,
            **params,
        )
        return _open_stream(self, self._headers(), body, self._http_client, on_retry)

    async def create(
        self,
        *,
        model: str,
        messages: Sequence[UserMessage | AssistantMessage | Mapping[str, Any]],
        max_tokens: int,
        system: str | Sequence[Mapping[str, Any]] | None = None,
        tools: Sequence[Tool | Mapping[str, Any]] | None = None,
        on_retry: RetryObserver | None = None,
        **params: Any,
    ) -> StreamResult:
        """One non-streaming request (``stream: false``): the whole answer at once.

        The loop's last resort after streamed attempts failed mid-stream (as Claude
        Code's non-streaming fallback). Retried like :meth:`stream`; the result has
        no TTFT and only the ``retries`` statistic.

        Raises:
            APIStatusError: an HTTP error, after the retries the policy allows.
            APIConnectionError: no response, after the retries.
            APITimeoutError: no answer within 600 s.
            StreamProtocolError: the body is not a Messages API message.
        """
        body = self.build_request_body(
            model=model,
            messages=messages,
            max_tokens=max_tokens,
            system=system,
            tools=tools,
            **params,
        )
        body["stream"] = False
        async with contextlib.AsyncExitStack() as stack:
            http = self._http_client
            if http is None:
                http = await stack.enter_async_context(
                    httpx.AsyncClient(timeout=httpx.Timeout(None, connect=self.connect_timeout))
                )
            retries = 0
            while True:
                try:
                    return await self._create_once(http, body, retries)
                except APIError as exc:
                    if (
                        retries >= self.retry.max_retries
                        or not _retryable(exc, self.retry)
                        or (on_retry is not None and not on_retry(exc))
                    ):
                        raise
                    headers = exc.headers if isinstance(exc, APIStatusError) else None
                    delay = self.retry.delay(retries, headers)
                    retries += 1
                    logger.info("non-streaming retry %d in %.3fs after %r", retries, delay, exc)
                    await trio.sleep(delay)

    async def _create_once(
        self, http: httpx.AsyncClient, body: dict[str, Any], retries: int
    ) -> StreamResult:
        response: httpx.Response | None = None
        with trio.move_on_after(_CREATE_TIMEOUT):
            try:
                response = await http.post(
                    f"{self.base_url}/v1/messages", json=body, headers=self._headers()
                )
            except httpx.TimeoutException as exc:
                raise APITimeoutError(f"request timed out: {type(exc).__name__}") from exc
            except httpx.TransportError as exc:
                raise APIConnectionError(f"connection failed: {type(exc).__name__}: {exc}") from exc
        if response is None:
            raise APITimeoutError(f"no answer within {_CREATE_TIMEOUT}s")
        request_id = response.headers.get("request-id")
        if not response.is_success:
            raise error_from_response(
                response.status_code,
                response.content[:_MAX_ERROR_BODY],
                headers=dict(response.headers),
                request_id=request_id,
            )
        try:
            data = response.json()
            if not isinstance(data, dict) or data.get("type") != "message":
                raise ValueError("not a message object")
            message = AssistantMessage.from_api(data)
        except (ValueError, TypeError, KeyError, AttributeError, StreamProtocolError) as exc:
            raise StreamProtocolError(
                f"the non-streaming answer is not a message: {excerpt(response.content)}"
                + (f" (request id {request_id})" if request_id else "")
            ) from exc
        return StreamResult(
            message=message,
            ttft=None,
            statistics=StreamStatistics(retries=retries),
            request_id=request_id,
        )


@contextlib.asynccontextmanager
async def _open_stream(
    client: AnthropicClient,
    headers: dict[str, str],
    body: dict[str, Any],
    http: httpx.AsyncClient | None,
    on_retry: RetryObserver | None = None,
) -> AsyncGenerator[trio.abc.ReceiveChannel[StreamItem], None]:
    """The stream's channel; leaving the block closes whatever response is open."""
    async with contextlib.AsyncExitStack() as stack:
        if http is None:
            http = await stack.enter_async_context(
                httpx.AsyncClient(timeout=httpx.Timeout(None, connect=client.connect_timeout))
            )
        items = _ItemStream(client, headers, http, body, on_retry)
        stack.push_async_callback(items.aclose)
        yield items


@final
class _ItemStream(trio.abc.ReceiveChannel[StreamItem]):
    """The items of one stream, read in the task that asks for them.

    ``receive()`` hands out the items of the last network read one at a time; when
    none is left, it reads in the caller's task (no task switch beyond the read's own)
    until some item can be handed out: those of one chunk. The idle watchdog is a
    cancel scope around that read only, so the consumer's own time never counts, and
    no scope outlives a call. Retries (before any content was handed out) happen inside
    ``receive()`` too, invisibly. A ``receive()`` cancelled in the middle of a read
    ends the stream: the next one raises :class:`StreamTruncatedError`.
    """

    def __init__(
        self,
        client: AnthropicClient,
        headers: dict[str, str],
        http: httpx.AsyncClient,
        body: dict[str, Any],
        on_retry: RetryObserver | None = None,
    ) -> None:
        self._client = client
        self._on_retry = on_retry
        self._headers = headers
        self._http = http
        self._body = body
        self._started = trio.current_time()
        self._retries = 0
        self._attempt: _Attempt | None = None
        self._attempt_stack: contextlib.AsyncExitStack | None = None
        self._items: list[StreamItem] = []
        self._next = 0
        #: The result was handed out, or an error raised: nothing more to read.
        self._finished = False
        self._interrupted = False
        self._closed = False
        self._busy = False

    async def receive(self) -> StreamItem:
        items, index = self._items, self._next
        if index < len(items):
            await trio.lowlevel.checkpoint_if_cancelled()
            self._next = index + 1
            return items[index]
        if self._closed:
            raise trio.ClosedResourceError("the stream's channel is closed")
        if self._busy:
            raise trio.BusyResourceError("another task is already receiving from this stream")
        await trio.lowlevel.checkpoint_if_cancelled()
        if self._interrupted:
            raise StreamTruncatedError("a cancelled receive() interrupted the stream mid-read")
        if self._finished:
            await trio.lowlevel.cancel_shielded_checkpoint()
            raise trio.EndOfChannel
        self._busy = True
        try:
            items = await self._read_items()
        finally:
            self._busy = False
        self._items, self._next = items, 1
        return items[0]

    async def _read_items(self) -> list[StreamItem]:
        """The items of the next chunk (never []), retrying before any content."""
        client = self._client
        while True:
            attempt = self._attempt
            try:
                if attempt is None:
                    attempt = _Attempt(client, self._headers, self._http, self._body, self._started)
                    self._attempt = attempt
                    self._attempt_stack = contextlib.AsyncExitStack()
                    await attempt.open(self._attempt_stack)
                items = await attempt.next_items()
                if attempt.accumulator.stopped:
                    self._finished = True
                    await self._end_attempt()
                    items.append(attempt.result(self._retries))
                return items
            except Exception as exc:
                await self._end_attempt()
                if (
                    attempt is None
                    or attempt.handed_out
                    or self._retries >= client.retry.max_retries
                    or not _retryable(exc, client.retry)
                    or (self._on_retry is not None and not self._on_retry(exc))
                ):
                    self._finished = True
                    raise
                headers = exc.headers if isinstance(exc, APIStatusError) else None
                delay = client.retry.delay(self._retries, headers)
                self._retries += 1
                logger.info(
                    "retry %d/%d in %.3fs after %s: %s",
                    self._retries,
                    client.retry.max_retries,
                    delay,
                    type(exc).__name__,
                    exc,
                )
                try:
                    await trio.sleep(delay)
                except BaseException:
                    self._interrupted = True
                    raise
            except BaseException:
                self._interrupted = True
                await self._end_attempt()
                raise

    async def _end_attempt(self) -> None:
        """Close the current attempt's response (shielded, bounded), if any."""
        stack, self._attempt_stack, self._attempt = self._attempt_stack, None, None
        if stack is not None:
            await stack.aclose()

    async def aclose(self) -> None:
        self._closed = True
        self._items, self._next = [], 0
        await self._end_attempt()
        await trio.lowlevel.checkpoint()


class _Attempt:
    """One HTTP request of a stream: open it, then turn its events into items."""

    def __init__(
        self,
        client: AnthropicClient,
        headers: dict[str, str],
        http: httpx.AsyncClient,
        body: dict[str, Any],
        started: float,
    ) -> None:
        self.client = client
        self.headers = headers
        self.http = http
        self.body = body
        self.started = started
        self.accumulator = MessageAccumulator(client.limits)
        self.handed_out = False
        self.buffer: list[StreamItem] = []
        self.request_id: str | None = None
        self.ttft: float | None = None
        self.stall = StallMeter(client.stall_timeout, trio.current_time())
        self.reader: ResponseReader | None = None
        self.parser = SSEParser(client.limits.max_event_bytes)
        self.eof = False
        #: Whether httpcore's read timeout bounds the reads (see :meth:`next_items`).
        self.watched = False
        #: An error met after some items of the same read, raised at the next call.
        self.failure: Exception | None = None

    async def open(self, stack: contextlib.AsyncExitStack) -> None:
        """Send the request; check the answer; leave its body ready to read."""
        client = self.client
        source: EventSource | None = None
        headers = {**self.headers, "accept-encoding": "identity"}
        with trio.move_on_after(client.idle_timeout):
            try:
                source = await stack.enter_async_context(
                    aconnect_sse(
                        self.http,
                        "POST",
                        f"{client.base_url}/v1/messages",
                        json=self.body,
                        headers=headers,
                        # httpcore bounds each network read by this (a cancel scope
                        # it opens per read anyway): the idle watchdog at no extra cost.
                        timeout=httpx.Timeout(
                            None, **(self.http.timeout.as_dict() | {"read": client.idle_timeout})
                        ),
                    )
                )
            except httpx.TimeoutException as exc:
                raise APITimeoutError(f"request timed out: {type(exc).__name__}") from exc
            except httpx.TransportError as exc:
                raise APIConnectionError(f"connection failed: {type(exc).__name__}: {exc}") from exc
        if source is None:
            raise APITimeoutError(f"no response within idle_timeout={client.idle_timeout}s")
        response = source.response
        # A response read from a network stream (httpcore) has the read timeout above;
        # any other transport gets the client's own cancel scope around its reads.
        self.watched = response.extensions.get("network_stream") is not None
        self.reader = ResponseReader(response)
        stack.push_async_callback(_close, self.reader)
        self.request_id = response.headers.get("request-id")
        if not response.is_success:
            content = await self._read_some(_MAX_ERROR_BODY)
            raise error_from_response(
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
        """The data of the events completed by the next chunk of the body (maybe none)."""
        assert self.reader is not None
        try:
            chunk = await self.reader.read()
        except httpx.ReadTimeout as exc:
            raise StreamIdleTimeoutError(
                f"no data for {self.client.idle_timeout}s (idle_timeout)"
            ) from exc
        except httpx.TransportError as exc:
            raise StreamTruncatedError(
                f"the connection broke mid-stream ({type(exc).__name__})"
            ) from exc
        if chunk is None:
            self.eof = True
            return self.parser.flush()
        return self.parser.feed(chunk)

    async def next_items(self) -> list[StreamItem]:
        """Read until some items may be handed out: those of one chunk; never [].

        Each read is bounded by ``idle_timeout``: by httpcore's read timeout when the
        response comes from a network stream, else by a cancel scope whose deadline is
        set once per read, and which is gone once this returns (so the consumer's own
        time never counts).
        """
        if self.failure is not None:
            failure, self.failure = self.failure, None
            raise failure
        if self.watched:
            while True:
                if (items := await self._next_chunk_items()) is not None:
                    return items
        idle_timeout = self.client.idle_timeout
        with trio.CancelScope(deadline=trio.current_time() + idle_timeout) as idle:
            while True:
                if (items := await self._next_chunk_items()) is not None:
                    return items
                idle.deadline = trio.current_time() + idle_timeout
        raise StreamIdleTimeoutError(f"no data for {idle_timeout}s (idle_timeout)")

    async def _next_chunk_items(self) -> list[StreamItem] | None:
        """The items of the next chunk, or None if it completed no event."""
        if self.eof:
            if self.accumulator.statistics().events == 0:
                raise StreamTruncatedError("the stream ended without any event")
            raise StreamTruncatedError("the stream ended before message_stop")
        events = await self._read()
        if not events:
            return None
        items: list[StreamItem] = []
        try:
            self._decode(events, items)
        except Exception as exc:
            if not items:
                raise
            # Hand out what came before the error first, as if read separately.
            self.failure = exc
        return items or None

    def _decode(self, events: list[str], items: list[StreamItem]) -> None:
        """Decode and accumulate *events* (one chunk's) into *items*, or hold them back
        until the first content event (so that a retry stays invisible)."""
        acc = self.accumulator
        decode, feed, message_for = acc.decode, acc.feed, acc.message_for
        now = trio.current_time()
        active = False
        try:
            for data in events:
                event = decode(data)
                etype: str = event["type"]
                if etype != "ping":
                    active = True
                try:
                    done = feed(event)
                except APIStatusError as exc:
                    exc.request_id = exc.request_id or self.request_id
                    raise
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
                    if etype == "message_stop":
                        break  # anything after it is not read
        finally:
            if active:
                self.stall.activity(now)

    def result(self, retries: int) -> StreamResult:
        stats = self.accumulator.statistics()
        return StreamResult(
            message=self.accumulator.message,
            ttft=self.ttft,
            statistics=StreamStatistics(
                events=stats.events,
                pings=stats.pings,
                ignored=stats.ignored,
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
