"""A Trio turn seen from asyncio: :class:`TurnStream`, the ``async with`` of
``aio.Session.submit`` and ``aio.query``.

A Trio task of the loop's guest run enters the turn (``Session.submit`` or
``query``) and forwards each event into an :class:`EventStream`. Entering the
``async with`` waits until the turn started, so the turn's own refusals
(``BusyResourceError``, ``ApprovalError``, a bad argument) raise there, as in Trio.

Leaving the block before the turn ended (a ``break``, an exception, the task
cancelled because the HTTP client went away) aborts the turn as ``abort()`` does
(every tool_use answered, processes reaped, the history valid) and waits for the
Trio side to finish before the block is left: when ``__aexit__`` returns (or
raises ``CancelledError``), the turn is over. An error that ends the turn is raised
by the stream's ``receive()`` after the buffered events, or, if the consumer
never got there, by the block's exit: the same exception object Trio would raise.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Generic, TypeVar, final

import trio

from ._guest import (
    GuestRun,
    GuestRunClosedError,
    current_guest_run,
    split_cancelled,
    wait_through_cancellation,
)
from ._stream import EventStream, check_buffer

__all__ = ["TurnStream"]

T = TypeVar("T")

OpenEvents = Callable[[], AbstractAsyncContextManager[trio.abc.ReceiveChannel[T]]]


@final
class TurnStream(Generic[T]):
    """``async with`` a Trio turn's events, from asyncio (see the module doc).

    *open_events* is called in Trio and opens the turn's event channel; *abort*
    (called in Trio, sync) aborts the turn once it started.
    """

    def __init__(self, open_events: OpenEvents[T], abort: Callable[[], None], max_buffered: int):
        self._open_events = open_events
        self._abort = abort
        self._capacity = check_buffer(max_buffered)
        self._run: GuestRun | None = None
        self._stream: EventStream[T] | None = None
        self._entered: asyncio.Future[None] | None = None
        self._done: asyncio.Future[None] | None = None
        self._scope: trio.CancelScope | None = None
        self._started = False
        self._left = False
        self._used = False

    # -- Trio -------------------------------------------------------------------------

    async def _trio(self) -> None:
        assert self._stream is not None
        assert self._entered is not None
        stream, error = self._stream, None
        try:
            with trio.CancelScope() as self._scope:
                if self._left:  # the consumer left before the turn started
                    self._scope.cancel()
                async with self._open_events() as events:
                    self._started = True
                    self._entered.set_result(None)
                    if self._left:
                        self._abort()
                    async for event in events:
                        await stream.send(event)
        except BaseException as exc:
            cancelled, error = split_cancelled(exc)
            if cancelled is not None:  # the run stopping (ours was absorbed)
                error = error or GuestRunClosedError("the Trio guest run stopped the turn")
                raise cancelled from None
        finally:
            if not self._entered.done():
                self._entered.set_exception(error or GuestRunClosedError("the turn did not start"))
            else:
                stream.end(error)
            assert self._done is not None
            self._done.set_result(None)

    def _leave(self) -> None:
        """(Trio) The consumer left: abort the turn (or do not start it)."""
        self._left = True
        if self._started:
            self._abort()
        elif self._scope is not None:
            self._scope.cancel()

    def shutdown(self) -> None:
        """(Trio) The run is stopping: abort the turn; its last events never wait."""
        if self._stream is not None:
            self._stream.unbound()
        self._leave()

    # -- asyncio ----------------------------------------------------------------------

    async def __aenter__(self) -> EventStream[T]:
        if self._used:
            raise RuntimeError("a TurnStream is entered once")
        self._used = True
        run = self._run = await current_guest_run()
        self._stream = EventStream(run.loop, run.token, self._capacity)
        self._entered = run.loop.create_future()
        self._done = run.loop.create_future()
        run.start_soon(self._trio, self._refused, turn=self)
        try:
            await asyncio.shield(self._entered)
        except asyncio.CancelledError:
            await self._finish()
            if not self._entered.cancelled():
                self._entered.exception()  # retrieved: the cancellation is what counts
            raise
        # The turn's refusal (BusyResourceError, ApprovalError...) raises here.
        self._entered.result()
        return self._stream

    def _refused(self, error: BaseException) -> None:
        assert self._entered is not None
        assert self._done is not None
        if not self._entered.done():
            self._entered.set_exception(error)
        if not self._done.done():
            self._done.set_result(None)

    async def _finish(self) -> None:
        """Abort the turn if it still runs and wait for its Trio side to end,
        whatever cancellations come meanwhile (then raise CancelledError)."""
        assert self._run is not None
        assert self._done is not None
        assert self._stream is not None
        if not self._done.done():
            if not self._stream.ended:
                self._stream.close()
                self._run.call_soon(self._leave)
            if await wait_through_cancellation(self._done):
                raise asyncio.CancelledError
        self._stream.close()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._stream is not None
        await self._finish()
        if exc is None:
            error = self._stream.undelivered_error()
            if error is not None:
                raise error
