"""HTTPPool: which httpx client a model client's requests go through, and its lifetime.

Three cases, decided per request:

- an ``http_client`` was passed to the model client: every request uses it, and it is
  never closed here (its owner closes it);
- the model client is entered (``async with client:``): one ``httpx.AsyncClient`` is
  opened at the first request and shared by every stream and ``create()`` until the
  block ends (or ``aclose()``), so consecutive requests reuse their connections;
- otherwise each request opens its own ``httpx.AsyncClient`` and closes it when done:
  nothing outlives a stream, whichever ``trio.run`` it is in.

After ``aclose()`` every request raises :class:`ClientClosedError`, before anything
is sent.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator
from types import TracebackType
from typing import Self, final

import httpx
import trio

from .._exceptions import ClientClosedError

__all__ = ["HTTPPool", "PooledClient"]

#: How long closing the shared client may take when the block is left cancelled.
_CLOSE_TIMEOUT = 5.0


@final
class HTTPPool:
    """The httpx client behind one model client (see the module docstring).

    Args:
        http_client: the caller's client, used for every request and never closed.
        connect_timeout: the connect timeout of the clients opened here.
        owner: the model client's class name, for error messages.
    """

    def __init__(
        self, http_client: httpx.AsyncClient | None, *, connect_timeout: float, owner: str
    ) -> None:
        self._given = http_client
        self._connect_timeout = connect_timeout
        self._owner = owner
        self._shared: httpx.AsyncClient | None = None
        self._depth = 0
        self._closed = False

    @property
    def closed(self) -> bool:
        """Whether :meth:`aclose` was called."""
        return self._closed

    @property
    def shared(self) -> httpx.AsyncClient | None:
        """The client shared while entered, once the first request opened it."""
        return self._shared

    def enter(self) -> None:
        """Start sharing one client (``async with`` may nest; the outermost closes).

        Raises:
            ClientClosedError: the pool was closed.
        """
        self._check_open()
        self._depth += 1

    async def exit(self) -> None:
        """Leave one ``async with``; the outermost closes the pool."""
        self._depth -= 1
        if self._depth <= 0:
            await self.aclose()

    async def aclose(self) -> None:
        """Close the shared client (never the caller's); later requests are refused.

        Idempotent. The close is shielded and bounded, so it completes when the
        enclosing scope was cancelled.
        """
        self._closed = True
        self._depth = 0
        shared, self._shared = self._shared, None
        if shared is not None:
            with trio.move_on_after(_CLOSE_TIMEOUT, shield=True):
                await shared.aclose()
        await trio.lowlevel.checkpoint()

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError(
                f"this {self._owner} was closed (aclose() or the end of its"
                " `async with` block): make a new one"
            )

    def _new(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(timeout=httpx.Timeout(None, connect=self._connect_timeout))

    @contextlib.asynccontextmanager
    async def http(self) -> AsyncGenerator[httpx.AsyncClient]:
        """The client for one request (a stream, or a ``create()`` with its retries).

        Raises:
            ClientClosedError: the pool was closed; nothing was sent.
        """
        self._check_open()
        if self._given is not None:
            yield self._given
        elif self._depth:
            if self._shared is None:
                self._shared = self._new()
            yield self._shared
        else:
            async with self._new() as http:
                yield http


class PooledClient:
    """What both model clients share: ``async with client:`` and :meth:`aclose`.

    Example::

        async with trio_agent.AnthropicClient() as client:
            session = trio_agent.Session(client, tools, model=...)
            ...  # every turn's requests share one connection pool
    """

    _pool: HTTPPool

    async def __aenter__(self) -> Self:
        """Share one connection pool across this client's requests until the block ends.

        Raises:
            ClientClosedError: the client was closed.
        """
        await trio.lowlevel.checkpoint()
        self._pool.enter()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self._pool.exit()

    async def aclose(self) -> None:
        """Close the connections this client opened (never a passed ``http_client``).

        Afterwards every request raises :class:`ClientClosedError`. Idempotent.
        """
        await self._pool.aclose()

    @property
    def closed(self) -> bool:
        """Whether :meth:`aclose` was called (or the ``async with`` block ended)."""
        return self._pool.closed
