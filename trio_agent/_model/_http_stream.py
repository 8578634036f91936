"""One read path for every provider: request, retry, read, idle/stall watch, limits.

A provider says only what differs at its edge (:class:`ProviderEdge` and its
:class:`Provider`, ``_provider.py``): where the request goes and with which headers,
how an HTTP error answer and an error inside the stream are typed, and how one SSE
event's data becomes canonical (Messages API) stream events for the shared
:class:`MessageAccumulator`. Everything else is here, once: :func:`open_http_stream`
gives the channel of :class:`StreamItem`, and every HTTP attempt of it is one
:class:`_HttpAttempt` (not to be confused with the loop's ``Attempt``, one model call).

The stream is read in the task that receives from it: ``receive()`` hands out the items
of the last network read one at a time and, when none is left, reads the next chunk
itself, so a token costs its read and nothing more (no task hop, no channel). The
response is always closed when the ``async with`` block is left. Items before the first
content event are held back, so a retry (an HTTP error, an in-stream overload...) is
invisible to the consumer; once content was handed out, errors are raised, never
retried.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import AsyncGenerator, Callable, Generator
from typing import Any, Protocol, final

import attrs
import httpx
import trio
from httpx_sse import EventSource, aconnect_sse

from .._exceptions import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    StreamIdleTimeoutError,
    StreamProtocolError,
    StreamTruncatedError,
    excerpt,
)
from .._messages import AssistantMessage
from .._retry import RetryPolicy
from ._accumulate import MessageAccumulator, StreamLimits
from ._pool import HTTPPool
from ._protocol import RetryObserver
from ._provider import ProviderEdge
from ._sse import ResponseReader, SSEParser
from ._stream import StreamItem, StreamResult, StreamStatistics, stream_event
from ._watchdog import StallMeter, fail_after_parked

__all__ = ["MAX_ERROR_BODY", "StreamSettings", "open_http_stream", "request_errors"]

logger = logging.getLogger("trio_agent.client")

#: The most bytes of an error body that are read (the rest is not needed).
MAX_ERROR_BODY = 1024 * 1024
#: How long closing a response may take when the stream was cancelled.
_CLOSE_TIMEOUT = 5.0
#: After the last event, how long and how many bytes the end of the body may take to
#: read before the response is closed: a body read to its end leaves the connection
#: in the pool for the next request; one cut short closes it.
_DRAIN_TIMEOUT = 0.25
_DRAIN_LIMIT = 64 * 1024
_CONTENT_EVENTS = frozenset({"content_block_start", "content_block_delta", "content_block_stop"})


class StreamSettings(Protocol):
    """The client settings the read path uses (both clients have them)."""

    retry: RetryPolicy
    idle_timeout: float
    stall_timeout: float
    limits: StreamLimits


@contextlib.contextmanager
def request_errors() -> Generator[None]:
    """httpx's errors while a request is sent, as the client's typed errors."""
    try:
        yield
    except httpx.TimeoutException as exc:
        raise APITimeoutError(f"request timed out: {type(exc).__name__}") from exc
    except httpx.TransportError as exc:
        raise APIConnectionError(f"connection failed: {type(exc).__name__}: {exc}") from exc


@contextlib.asynccontextmanager
async def open_http_stream(
    settings: StreamSettings,
    edge: Callable[[], ProviderEdge],
    body: dict[str, Any],
    pool: HTTPPool,
    on_retry: RetryObserver | None = None,
) -> AsyncGenerator[trio.abc.ReceiveChannel[StreamItem], None]:
    """The stream's channel; leaving the block closes whatever response is open.

    Args:
        settings: retry policy, timeouts and limits (read when the stream opens).
        edge: the provider's side of the request, built when the block is entered:
            it may refuse then (:class:`AuthenticationError` without credentials),
            before anything is sent.
        body: the JSON body (already converted for the provider).
        pool: where the httpx client comes from (:class:`HTTPPool`).
        on_retry: called with the error before each retry; False stops retrying.

    Raises:
        ClientClosedError: the model client was closed; nothing was sent.
    """
    request_edge = edge()
    async with pool.http() as http:
        items = _ItemStream(
            _Request(settings, request_edge, http, body, trio.current_time(), on_retry)
        )
        try:
            yield items
        finally:
            await items.aclose()


@attrs.frozen
class _Request:
    """One stream's request: what every attempt at it sends, and when it began."""

    settings: StreamSettings
    edge: ProviderEdge
    http: httpx.AsyncClient
    body: dict[str, Any] = attrs.field(repr=False)
    started: float
    on_retry: RetryObserver | None = None


@final
class _ItemStream(trio.abc.ReceiveChannel[StreamItem]):
    """The items of one stream, read in the task that asks for them.

    ``receive()`` hands out the items of the last network read one at a time; when
    none is left, it reads in the caller's task (no task switch beyond the read's own)
    until some item can be handed out: those of one chunk. The idle watchdog bounds
    that read only, so the consumer's own time never counts, and no scope outlives a
    call. Retries (before any content was handed out) happen inside ``receive()`` too,
    invisibly. A ``receive()`` cancelled in the middle of a read ends the stream: the
    next one raises :class:`StreamTruncatedError`.
    """

    def __init__(self, request: _Request) -> None:
        self._request = request
        self._retries = 0
        self._attempt: _HttpAttempt | None = None
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
        return await self._read()

    async def __anext__(self) -> StreamItem:
        # receive()'s first lines again, and _read() awaited here rather than through
        # receive(): ``async for``, how a stream is read, pays one frame per item
        # and per read, not the two of ReceiveChannel.__anext__ around receive().
        items, index = self._items, self._next
        if index < len(items):
            await trio.lowlevel.checkpoint_if_cancelled()
            self._next = index + 1
            return items[index]
        try:
            return await self._read()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None

    async def _read(self) -> StreamItem:
        """The first item of the next chunk: read, retrying before any content."""
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
            retry = self._request.settings.retry
            while True:
                attempt = self._attempt
                try:
                    if attempt is None:
                        attempt = _HttpAttempt(self._request)
                        self._attempt = attempt
                        self._attempt_stack = contextlib.AsyncExitStack()
                        await attempt.open(self._attempt_stack)
                    items = await attempt.next_items()
                    if attempt.stopped:
                        self._finished = True
                        await self._end_attempt(drain=True)
                        items.append(attempt.result(self._retries))
                    self._items, self._next = items, 1
                    return items[0]
                except Exception as exc:
                    await self._end_attempt()
                    if (
                        attempt is None
                        or attempt.handed_out
                        or self._retries >= retry.max_retries
                        or not self._request.edge.retryable(exc, retry)
                        or (self._request.on_retry is not None and not self._request.on_retry(exc))
                    ):
                        self._finished = True
                        raise
                    headers = exc.headers if isinstance(exc, APIStatusError) else None
                    delay = retry.delay(self._retries, headers)
                    self._retries += 1
                    logger.info(
                        "retry %d/%d in %.3fs after %s: %s",
                        self._retries,
                        retry.max_retries,
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
        finally:
            self._busy = False

    async def _end_attempt(self, *, drain: bool = False) -> None:
        """Close the current attempt's response (shielded, bounded), if any; with
        *drain*, read the end of its body first (see :meth:`_HttpAttempt.drain`)."""
        stack, self._attempt_stack = self._attempt_stack, None
        attempt, self._attempt = self._attempt, None
        if stack is not None:
            try:
                if drain and attempt is not None:
                    await attempt.drain()
            finally:
                await stack.aclose()

    async def aclose(self) -> None:
        self._closed = True
        self._items, self._next = [], 0
        await self._end_attempt()
        await trio.lowlevel.checkpoint()


class _HttpAttempt:
    """One HTTP request of a stream: open it, then turn its events into items."""

    def __init__(self, request: _Request) -> None:
        settings = request.settings
        self.settings = settings
        self.edge = request.edge
        self.http = request.http
        self.body = request.body
        self.started = request.started
        self.idle_timeout = settings.idle_timeout
        self.accumulator = MessageAccumulator(settings.limits)
        self.decoder = request.edge.provider.decoder(self.accumulator)
        self.handed_out = False
        self.buffer: list[StreamItem] = []
        self.request_id: str | None = None
        self.ttft: float | None = None
        #: ``trio.current_time`` without its lookups (one call per read): the run's
        #: clock does not change while it runs.
        self.clock = trio.lowlevel.current_clock().current_time
        self.stall = StallMeter(settings.stall_timeout, self.clock())
        self.reader: ResponseReader | None = None
        self.parser = SSEParser(settings.limits.max_event_bytes)
        self.eof = False
        #: The accumulator took the message_stop (a flag: read once per read).
        self.stopped = False
        #: Whether httpcore's read timeout bounds the reads (see :meth:`next_items`).
        self.watched = False
        #: An error met after some items of the same read, raised at the next call.
        self.failure: Exception | None = None

    async def open(self, stack: contextlib.AsyncExitStack) -> None:
        """Send the request; check the answer; leave its body ready to read."""
        edge = self.edge
        idle_timeout = self.idle_timeout
        source: EventSource | None = None
        headers = {**edge.headers, "accept-encoding": "identity"}
        with trio.move_on_after(idle_timeout), request_errors():
            source = await stack.enter_async_context(
                aconnect_sse(
                    self.http,
                    "POST",
                    edge.url,
                    json=self.body,
                    headers=headers,
                    # httpcore bounds each network read by this (a cancel scope it
                    # opens per read anyway): the idle watchdog at no extra cost.
                    timeout=httpx.Timeout(
                        None, **(self.http.timeout.as_dict() | {"read": idle_timeout})
                    ),
                )
            )
        if source is None:
            raise APITimeoutError(f"no response within idle_timeout={idle_timeout}s")
        response = source.response
        # A response read from a network stream (httpcore) has the read timeout above;
        # any other transport gets the client's own deadline on its reads.
        self.watched = response.extensions.get("network_stream") is not None
        self.reader = ResponseReader(response)
        stack.push_async_callback(_close, self.reader)
        self.request_id = edge.request_id(response.headers)
        if not response.is_success:
            content = await self._read_some(MAX_ERROR_BODY)
            raise edge.provider.error_from_response(
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
        self.stall = StallMeter(self.settings.stall_timeout, trio.current_time())

    async def _read_some(self, limit: int) -> bytes:
        assert self.reader is not None
        parts: list[bytes] = []
        size = 0
        with trio.move_on_after(self.idle_timeout):
            try:
                while size < limit and (chunk := await self.reader.read()) is not None:
                    parts.append(chunk)
                    size += len(chunk)
            except httpx.TransportError:
                pass  # an error body cut short is still worth reporting
        return b"".join(parts)[:limit]

    async def drain(self) -> None:
        """Read the rest of a finished body, briefly and boundedly (see _DRAIN_TIMEOUT),
        so the connection can serve the next request; a cancelled caller skips it,
        and it is shielded otherwise (the message is complete: nothing is lost)."""
        reader = self.reader
        if reader is None or self.eof or trio.current_effective_deadline() == -math.inf:
            return
        size = 0
        with trio.move_on_after(_DRAIN_TIMEOUT, shield=True):
            try:
                while size <= _DRAIN_LIMIT and (chunk := await reader.read()) is not None:
                    size += len(chunk)
            except httpx.TransportError:
                pass  # the connection is closed with the response anyway

    async def next_items(self) -> list[StreamItem]:
        """Read until some items may be handed out: those of one chunk; never [].

        Each read is bounded by ``idle_timeout`` (see ``_watchdog.py``), so the
        consumer's own time never counts. (One coroutine from the read to the items:
        every level of ``await`` costs its frame, and its pass at each suspension.)
        """
        if self.failure is not None:
            failure, self.failure = self.failure, None
            raise failure
        reader, parser = self.reader, self.parser
        assert reader is not None
        while True:
            if self.eof:
                if self.decoder.events() == 0:
                    raise StreamTruncatedError("the stream ended without any event")
                raise StreamTruncatedError(f"the stream ended before {self.edge.provider.end}")
            try:
                if self.watched:
                    chunk = await reader.read()
                else:
                    chunk = await fail_after_parked(reader.read(), self.idle_timeout)
            except trio.TooSlowError:
                raise StreamIdleTimeoutError(
                    f"no data for {self.idle_timeout}s (idle_timeout)"
                ) from None
            except httpx.ReadTimeout as exc:
                raise StreamIdleTimeoutError(
                    f"no data for {self.idle_timeout}s (idle_timeout)"
                ) from exc
            except httpx.TransportError as exc:
                raise StreamTruncatedError(
                    f"the connection broke mid-stream ({type(exc).__name__})"
                ) from exc
            if chunk is None:
                self.eof = True
                events = parser.flush()
            else:
                events = parser.feed(chunk)
            if not events:
                continue
            items: list[StreamItem] = []
            try:
                self._decode(events, items)
            except Exception as exc:
                if not items:
                    raise
                # Hand out what came before the error first, as if read separately.
                self.failure = exc
            if items:
                return items

    def _decode(self, events: list[str], items: list[StreamItem]) -> None:
        """Decode and accumulate *events* (one chunk's) into *items*, or hold them back
        until the first content event (so that a retry stays invisible).

        The chunk's events are decoded first, then fed: a run of deltas that only
        append to the open block in one call (``feed_deltas``), anything else one by
        one. An event that cannot be decoded is raised after the events before it.
        """
        # (Attributes are read where they are used, not gathered up front: most reads
        # hold one event, which is fed alone.)
        accumulator = self.accumulator
        now = self.clock()
        active = False
        decoded: list[dict[str, Any]] = []
        failure: Exception | None = None
        translate = self.decoder.translate
        for data in events:
            try:
                canonical = translate(data)
            except Exception as exc:
                failure = exc
                break
            if canonical:
                decoded += canonical
            else:
                active = True  # an event with nothing to say is no ping
        try:
            position, end = 0, len(decoded)
            while position < end:
                # (A lone event is fed alone: a run of one gains nothing.)
                if end - position > 1:
                    run_end = accumulator.feed_deltas(decoded, position)
                    if run_end > position:
                        # Appending deltas: their block's start was handed out already.
                        active = True
                        items += [
                            stream_event("content_block_delta", e)
                            for e in decoded[position:run_end]
                        ]
                        if run_end == end:
                            break
                    event = decoded[run_end]
                    position = run_end + 1
                else:
                    event = decoded[position]
                    position += 1
                etype: str = event["type"]
                if etype != "ping":
                    active = True
                done = accumulator.feed(event)
                out = items if self.handed_out else self.buffer
                out.append(stream_event(etype, event))
                for block in done:
                    if not isinstance(block, AssistantMessage):
                        out.append(accumulator.message_for(block))
                if etype in _CONTENT_EVENTS or etype == "message_stop":
                    if self.ttft is None and etype != "message_stop":
                        self.ttft = now - self.started
                    if not self.handed_out:
                        self.handed_out = True
                        items.extend(self.buffer)
                        self.buffer = []
                    if etype == "message_stop":
                        self.stopped = True
                        return  # anything after it is not read
            if failure is not None:
                raise failure
        except APIStatusError as exc:
            exc.request_id = exc.request_id or self.request_id
            raise
        finally:
            if active:
                self.stall.activity(now)

    def result(self, retries: int) -> StreamResult:
        events, pings, ignored = self.decoder.statistics()
        return StreamResult(
            message=self.accumulator.message,
            ttft=self.ttft,
            statistics=StreamStatistics(
                events=events,
                pings=pings,
                ignored=ignored,
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
