"""open_in_trio: hold a Trio async context manager open from asyncio.

``async with open_in_trio(open_mcp_tools, config) as tools:`` enters
``open_mcp_tools(config)`` in a Trio task of the loop's guest run and keeps that
task (and the servers, nurseries and cancel scopes the manager opened in it) alive
until the asyncio block is left; then the Trio block ends and the manager exits in
its own task, as structured concurrency wants.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any, Generic, TypeVar, final

import outcome
import trio

from ._guest import (
    GuestRun,
    GuestRunClosedError,
    current_guest_run,
    split_cancelled,
    wait_through_cancellation,
)

__all__ = ["open_in_trio"]

T = TypeVar("T")


@final
class open_in_trio(Generic[T]):
    """``async with open_in_trio(factory, *args) as value:`` enters the Trio async
    context manager ``factory(*args)`` (called in Trio) and gives its value to
    asyncio code; leaving the block exits it, in Trio, and waits for that.

    The manager exits as if its block ended normally (an asyncio exception is not
    thrown into Trio). An error of the manager, on entry or exit, is raised here;
    the Trio task holding it open is cancelled when the run stops (then
    leaving raises :class:`GuestRunClosedError`).

    Example::

        async with trio_agent.aio.open_in_trio(open_mcp_tools, config) as tools:
            session = trio_agent.aio.Session(client, tools, model=...)
    """

    def __init__(self, factory: Callable[..., AbstractAsyncContextManager[T]], *args: Any) -> None:
        self._factory = factory
        self._args = args
        self._run: GuestRun | None = None
        self._entered: asyncio.Future[outcome.Outcome[T]] | None = None
        self._exited: asyncio.Future[outcome.Outcome[None]] | None = None
        self._leave: trio.Event | None = None
        self._scope: trio.CancelScope | None = None
        self._cancel_requested = False

    async def _trio(self) -> None:
        assert self._entered is not None
        assert self._exited is not None
        self._leave = trio.Event()
        result: outcome.Outcome[None] = outcome.Error(GuestRunClosedError("the run stopped"))
        try:
            with trio.CancelScope() as self._scope:
                if self._cancel_requested:
                    self._scope.cancel()
                async with self._factory(*self._args) as value:
                    self._entered.set_result(outcome.Value(value))
                    await self._leave.wait()
            result = outcome.Value(None)
        except BaseException as exc:
            cancelled, error = split_cancelled(exc)
            if error is not None:
                result = outcome.Error(error)
            if cancelled is not None:
                raise cancelled from None
        finally:
            if not self._entered.done():
                self._entered.set_result(result)  # type: ignore[arg-type]
            self._exited.set_result(result)

    def _refused(self, error: BaseException) -> None:
        assert self._entered is not None
        assert self._exited is not None
        for future in (self._entered, self._exited):
            if not future.done():
                future.set_result(outcome.Error(error))

    def _release(self) -> None:
        if self._leave is not None:
            self._leave.set()

    def _cancel(self) -> None:
        self._cancel_requested = True
        if self._scope is not None:
            self._scope.cancel()

    async def __aenter__(self) -> T:
        if self._run is not None:
            raise RuntimeError("open_in_trio() is entered once")
        run = self._run = await current_guest_run()
        self._entered = run.loop.create_future()
        self._exited = run.loop.create_future()
        run.start_soon(self._trio, self._refused)
        try:
            entered = await asyncio.shield(self._entered)
        except asyncio.CancelledError:
            run.call_soon(self._cancel)
            await wait_through_cancellation(self._exited)
            raise
        if isinstance(entered, outcome.Error):
            await wait_through_cancellation(self._exited)
        return entered.unwrap()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._run is not None
        assert self._exited is not None
        self._run.call_soon(self._release)
        if await wait_through_cancellation(self._exited):
            raise asyncio.CancelledError
        result = self._exited.result()
        if exc is None or isinstance(result, outcome.Error):
            result.unwrap()
