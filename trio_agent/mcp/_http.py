"""What the HTTP transport adds to the SDK's: the stdio limits, and OAuth that does
not serialize requests.

- :func:`guarded` puts a :class:`~._wire.Reader` between the SDK's streamable-HTTP
  transport and the session, the same one stdio reads with: content caps, every
  notification flood, the server's requests, the tools/list checks and the
  structured-content check are the same on both; a message the session cannot
  serialize fails its own request.
- :func:`cap_body` bounds a JSON body to ``MAX_LINE_BYTES`` (the SDK reads it
  whole): past that, reading it fails, and the SDK turns that into an error answer
  for its request alone. SSE events get the same bound from the SDK.
- :class:`LazyOAuth` wraps the SDK's ``OAuthClientProvider``, whose flow holds one
  lock across each request's wait for its response: a request that never gets an
  answer would hold up every other. Here a request is sent as it is until the
  server first asks for authorization (401, or 403 ``insufficient_scope``); then
  with the token, without the lock; only a request that is refused again, or that
  finds the token expired, goes through the SDK's flow (and its lock).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import trio
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.utils import extract_field_from_www_auth
from mcp.shared.message import SessionMessage

from ._wire import MAX_LINE_BYTES, Reader

__all__ = ["LazyOAuth", "cap_body", "guarded"]


@asynccontextmanager
async def guarded(streams: tuple[Any, Any], reader: Reader) -> AsyncGenerator[tuple[Any, Any]]:
    """The session's (read, write) streams over the transport's *streams*, every
    message passed through *reader*."""
    inner_read, inner_write = streams
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    closed = (anyio.BrokenResourceError, anyio.ClosedResourceError)

    async def pump_read() -> None:
        try:
            async with read_writer:
                async for item in inner_read:
                    message = reader.accept(item)
                    if message is not None:
                        await read_writer.send(message)
        except closed:
            pass  # our own shutdown, or the session is gone

    async def pump_write() -> None:
        try:
            async with write_reader:
                async for item in write_reader:
                    encoded = reader.encode(item.message)
                    if isinstance(encoded, bytes):
                        await inner_write.send(item)
                    elif encoded is not None:  # that request cannot be sent: its error
                        await read_writer.send(encoded)
        except closed:
            pass
        finally:
            await inner_write.aclose()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(pump_read)
        nursery.start_soon(pump_write)
        try:
            yield read_stream, write_stream
        finally:
            for stream in (read_stream, write_stream, read_writer, write_reader):
                await stream.aclose()
            nursery.cancel_scope.cancel()


class _CappedStream(httpx2.AsyncByteStream):
    """A response body that fails once it has given more than *limit* bytes."""

    def __init__(self, stream: Any, limit: int) -> None:
        self._stream = stream
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        size = 0
        async for chunk in self._stream:
            size += len(chunk)
            if size > self._limit:
                raise httpx2.StreamError(
                    f"an answer of more than {self._limit:,} bytes, over the limit; it was not read"
                )
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()


async def cap_body(response: httpx2.Response) -> None:
    """A response hook: a body that is not an event stream is kept to ``MAX_LINE_BYTES``."""
    await trio.lowlevel.checkpoint()
    if not response.headers.get("content-type", "").lower().startswith("text/event-stream"):
        response.stream = _CappedStream(response.stream, MAX_LINE_BYTES)


def _asks_for_auth(response: httpx2.Response) -> bool:
    return response.status_code == 401 or (
        response.status_code == 403
        and extract_field_from_www_auth(response, "error") == "insufficient_scope"
    )


class LazyOAuth(httpx2.Auth):
    """The SDK's OAuth *provider*, engaged only once the server asks for it."""

    def __init__(self, provider: OAuthClientProvider) -> None:
        self.provider = provider
        #: The provider's flow has run (a token was wanted); until then requests
        #: go out as they are.
        self._engaged = False

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        context = self.provider.context
        response: httpx2.Response | None = None
        if not self._engaged or context.is_token_valid():
            if self._engaged and context.current_tokens is not None:
                request.headers["Authorization"] = f"Bearer {context.current_tokens.access_token}"
            response = yield request
            if not _asks_for_auth(response):
                return
            await response.aread()
        self._engaged = True
        # The SDK's flow, under its lock: stored tokens, refresh, discovery, the
        # user's step; the request is sent again (it may now hold a stored token).
        flow = self.provider.async_auth_flow(request)
        try:
            outgoing = await flow.__anext__()
            while True:
                response = yield outgoing
                outgoing = await flow.asend(response)
        except StopAsyncIteration:
            return
        finally:
            await flow.aclose()
