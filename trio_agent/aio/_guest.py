"""One Trio run per asyncio loop, in Trio's guest mode; calls from asyncio into it.

:func:`trio.lowlevel.start_guest_run` runs Trio on top of a running asyncio loop:
Trio's tasks run in the loop's thread (each of Trio's scheduler ticks is a loop
callback), its I/O waits happen in a helper thread. So a Trio object can be read
from asyncio code without locks; what *wakes* Trio (a cancel, an event) still goes
through :meth:`trio.lowlevel.TrioToken.run_sync_soon`, because Trio may be blocked
waiting for I/O when asyncio wants something of it.

The run of a loop (:class:`GuestRun`) starts on first use. It stops when the loop
shuts down: ``asyncio.run`` cancels every task it left, among them the run's
watcher, which then stops the run and waits for it, or explicitly with
``async with open_guest_run():`` (an app's lifespan). Stopping aborts the turns
still running (:mod:`._turn`), waits for them to end, then cancels what is left.

Waiting on Trio from asyncio survives cancellation: a cancelled caller first has
its Trio side cancelled and waits for that to finish, then raises
``CancelledError``. The wait absorbs repeated cancellations (anyio's cancel scopes,
hence Starlette's, cancel the task again at every loop iteration until it leaves).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Final, Generic, Protocol, TypeVar, cast, final

import attrs
import outcome
import trio

from .._exceptions import TrioAgentError

__all__ = [
    "GuestRun",
    "GuestRunClosedError",
    "GuestRunStatistics",
    "call_in_trio",
    "current_guest_run",
    "open_guest_run",
    "run_in_trio",
    "running_guest_run",
    "split_cancelled",
    "wait_through_cancellation",
]

T = TypeVar("T")

_RUNS: Final[weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, GuestRun]] = (
    weakref.WeakKeyDictionary()
)


class GuestRunClosedError(TrioAgentError):
    """The loop's Trio guest run stopped before (or while) it could do what was asked."""


class Stoppable(Protocol):
    """What the run stops gracefully before it cancels the rest (a turn)."""

    def shutdown(self) -> None: ...


def split_cancelled(exc: BaseException) -> tuple[BaseException | None, BaseException | None]:
    """*exc* as (its ``trio.Cancelled`` part, the rest); either may be None."""
    if isinstance(exc, trio.Cancelled):
        return exc, None
    if isinstance(exc, BaseExceptionGroup):
        group = cast("BaseExceptionGroup[BaseException]", exc)
        cancelled, rest = group.split(trio.Cancelled)
        return cancelled, rest
    return None, exc


async def wait_through_cancellation(future: asyncio.Future[Any]) -> bool:
    """Wait for *future* even if the task is cancelled meanwhile (once or again and
    again); True if it was. The caller raises ``CancelledError`` afterwards."""
    cancelled = False
    while not future.done():
        try:
            await asyncio.shield(future)
        except asyncio.CancelledError:
            cancelled = True
    return cancelled


@attrs.frozen
class GuestRunStatistics:
    """A snapshot of a :class:`GuestRun`.

    Attributes:
        state: ``"starting"``, ``"running"``, ``"stopping"`` or ``"stopped"``.
        tasks: Trio tasks this bridge started that have not ended (calls, turns,
            contexts).
        turns: turns running (each also counted in *tasks*).
    """

    state: str
    tasks: int
    turns: int


@final
class GuestRun:
    """The Trio run that lives inside one asyncio event loop (Trio's guest mode).

    Get the running loop's with :func:`current_guest_run` (it starts one if there
    is none); stop it with :meth:`aclose` or by leaving :func:`open_guest_run`.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._state = "starting"
        self._started: asyncio.Future[None] = loop.create_future()
        self._done: asyncio.Future[outcome.Outcome[None]] = loop.create_future()
        self._token: trio.lowlevel.TrioToken | None = None
        self._nursery: trio.Nursery | None = None
        self._stop_requested: trio.Event | None = None
        self._turns: set[Stoppable] = set()
        self._turns_gone: trio.Event | None = None
        self._tasks = 0
        self._watcher: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return f"<GuestRun {self._state} tasks={self._tasks} turns={len(self._turns)}>"

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The host loop."""
        return self._loop

    @property
    def token(self) -> trio.lowlevel.TrioToken:
        """The run's Trio token (once started)."""
        if self._token is None:
            raise GuestRunClosedError("the Trio guest run has not started")
        return self._token

    @property
    def stopped(self) -> bool:
        """Whether the Trio run has ended."""
        return self._done.done()

    def statistics(self) -> GuestRunStatistics:
        """The run's state and how many of its tasks and turns are alive."""
        return GuestRunStatistics(state=self._state, tasks=self._tasks, turns=len(self._turns))

    # -- starting and stopping ----------------------------------------------------

    def _start(self) -> None:
        trio.lowlevel.start_guest_run(
            self._main,
            run_sync_soon_threadsafe=self._loop.call_soon_threadsafe,
            run_sync_soon_not_threadsafe=self._loop.call_soon,
            done_callback=self._on_done,
            # asyncio may own signal.set_wakeup_fd (add_signal_handler): Trio leaves it.
            host_uses_signal_set_wakeup_fd=True,
        )
        # Stops the run at the loop's shutdown: asyncio.run cancels this task then.
        self._watcher = self._loop.create_task(self._watch(), name="trio_agent.aio guest run")

    def _on_done(self, result: outcome.Outcome[None]) -> None:
        self._state = "stopped"
        if isinstance(result, outcome.Error):  # pragma: no cover - a TrioInternalError, a KI
            # Said now: with no aclose() waiting (a run started on first use) no one
            # else would see it.
            self._loop.call_exception_handler(
                {"message": "trio_agent.aio: the Trio guest run failed", "exception": result.error}
            )
        if not self._started.done():  # pragma: no cover - main raised before starting
            self._started.set_exception(GuestRunClosedError("the Trio guest run failed to start"))
        self._done.set_result(result)

    async def _main(self) -> None:
        self._stop_requested = trio.Event()
        self._turns_gone = trio.Event()
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self._token = trio.lowlevel.current_trio_token()
            self._state = "running"
            self._started.set_result(None)
            await self._stop_requested.wait()
            self._state = "stopping"
            # The turns first: each is aborted and ends as an aborted turn does (every
            # tool_use answered, processes reaped); then whatever else still runs.
            for turn in list(self._turns):
                turn.shutdown()
            if self._turns:
                await self._turns_gone.wait()
            nursery.cancel_scope.cancel()

    async def _watch(self) -> None:
        try:
            await asyncio.shield(self._done)
        except asyncio.CancelledError:
            await self._stop()
            raise

    async def wait_started(self) -> None:
        """Wait until the run accepts work (raises GuestRunClosedError if it ended)."""
        if not self._started.done():
            await asyncio.shield(self._started)
        self._check_open()

    def _check_open(self) -> None:
        if self._state != "running":
            raise GuestRunClosedError(f"the Trio guest run is {self._state}")

    async def aclose(self) -> None:
        """Stop the run: abort its turns, wait for them to end, cancel the rest, and
        wait for the Trio run to finish. Idempotent. Raises the run's own error (a
        ``TrioInternalError``), if it had one."""
        await self._stop()
        result = self._done.result()
        if isinstance(result, outcome.Error):  # pragma: no cover - a TrioInternalError
            raise result.error

    async def _stop(self) -> None:
        cancelled = await wait_through_cancellation(self._started)
        if not self._done.done():
            self._run_sync_soon(self._request_stop)
            cancelled = await wait_through_cancellation(self._done) or cancelled
        if _RUNS.get(self._loop) is self:
            del _RUNS[self._loop]
        if cancelled:
            raise asyncio.CancelledError

    def _request_stop(self) -> None:
        assert self._stop_requested is not None
        self._stop_requested.set()

    # -- work -----------------------------------------------------------------------

    def _run_sync_soon(self, fn: Callable[[], object]) -> bool:
        """Run *fn* in Trio soon (it must not raise); False if the run has ended."""
        assert self._token is not None
        try:
            self._token.run_sync_soon(fn)
        except trio.RunFinishedError:
            return False
        return True

    def call_soon(self, fn: Callable[[], object]) -> None:
        """Run the sync *fn* in the Trio run soon (an abort, an interrupt); nothing
        if the run has ended. *fn* must not raise."""
        if self._token is not None:
            self._run_sync_soon(fn)

    def start_soon(
        self,
        async_fn: Callable[[], Awaitable[None]],
        on_refused: Callable[[BaseException], None],
        turn: Stoppable | None = None,
    ) -> None:
        """Start ``async_fn()`` as a Trio task of the run (it must not raise); if the
        run no longer takes work, call *on_refused* with the error instead (in Trio
        or right here). A *turn* is stopped gracefully when the run stops."""

        def spawn() -> None:
            if self._state != "running":
                on_refused(GuestRunClosedError(f"the Trio guest run is {self._state}"))
                return
            assert self._nursery is not None
            if turn is not None:
                self._turns.add(turn)
            self._tasks += 1
            self._nursery.start_soon(self._task, async_fn, turn)

        if not self._run_sync_soon(spawn):
            on_refused(GuestRunClosedError("the Trio guest run has ended"))

    async def _task(self, async_fn: Callable[[], Awaitable[None]], turn: Stoppable | None) -> None:
        try:
            await async_fn()
        finally:
            self._tasks -= 1
            if turn is not None:
                self._turns.discard(turn)
                if not self._turns and self._turns_gone is not None:
                    self._turns_gone.set()


def running_guest_run() -> GuestRun | None:
    """The running loop's Trio guest run if it has one that has not stopped."""
    run = _RUNS.get(asyncio.get_running_loop())
    return None if run is None or run.stopped else run


async def current_guest_run() -> GuestRun:
    """The running loop's Trio guest run, started if it has none (or it stopped)."""
    loop = asyncio.get_running_loop()
    run = _RUNS.get(loop)
    if run is None or run.stopped:
        run = _RUNS[loop] = GuestRun(loop)
        run._start()  # pyright: ignore[reportPrivateUsage]
    await run.wait_started()
    return run


@final
class open_guest_run:
    """The running loop's Trio guest run for the life of an ``async with`` block
    (an app's lifespan): started on entry if it is not running yet, stopped on exit
    (the turns still running are aborted, see :meth:`GuestRun.aclose`).

    Without it the run starts on first use and stops when ``asyncio.run`` shuts the
    loop down.

    Example::

        @contextlib.asynccontextmanager
        async def lifespan(app):
            async with trio_agent.aio.open_guest_run():
                yield
    """

    def __init__(self) -> None:
        self._run: GuestRun | None = None

    async def __aenter__(self) -> GuestRun:
        self._run = await current_guest_run()
        return self._run

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._run is not None
        await self._run.aclose()


@final
class _Call(Generic[T]):
    """One call of :func:`run_in_trio`: its Trio task and the asyncio future of its
    outcome."""

    def __init__(
        self,
        run: GuestRun,
        fn: Callable[[], Awaitable[T]],
        on_cancel: Callable[[], bool] | None = None,
    ) -> None:
        self._run = run
        self._fn = fn
        self._on_cancel = on_cancel
        self._outcome: asyncio.Future[outcome.Outcome[T]] = run.loop.create_future()
        self._scope: trio.CancelScope | None = None
        self._cancel_requested = False

    def _deliver(self, result: outcome.Outcome[T]) -> None:
        if not self._outcome.done():
            self._outcome.set_result(result)

    def _refused(self, error: BaseException) -> None:
        self._deliver(outcome.Error(error))

    async def _trio(self) -> None:
        result: outcome.Outcome[T] = outcome.Error(
            GuestRunClosedError("the Trio guest run stopped")
        )
        try:
            with trio.CancelScope() as self._scope:
                if self._cancel_requested:
                    self._scope.cancel()
                result = outcome.Value(await self._fn())
        except BaseException as exc:
            cancelled, error = split_cancelled(exc)
            if error is not None:
                result = outcome.Error(error)  # the caller's: not raised in the run
            if cancelled is not None:
                raise cancelled from None  # the run stopping: its nursery absorbs it
        finally:
            self._deliver(result)

    def _cancel(self) -> None:
        self._cancel_requested = True
        if self._on_cancel is not None and self._on_cancel():
            return  # it stops the call its own way (a turn's abort)
        if self._scope is not None:
            self._scope.cancel()

    async def result(self) -> T:
        self._run.start_soon(self._trio, self._refused)
        try:
            result = await asyncio.shield(self._outcome)
        except asyncio.CancelledError:
            self._run.call_soon(self._cancel)
            await wait_through_cancellation(self._outcome)
            raise
        return result.unwrap()


async def call_in_trio(
    fn: Callable[[], Awaitable[T]], on_cancel: Callable[[], bool] | None = None
) -> T:
    """:func:`run_in_trio` of ``fn()``; a cancellation first calls *on_cancel* (in
    Trio), which returns True if it stops the call itself (no Trio cancel then)."""
    run = await current_guest_run()
    return await _Call(run, fn, on_cancel).result()


async def run_in_trio(async_fn: Callable[..., Awaitable[T]], *args: Any) -> T:
    """``await async_fn(*args)`` in the running loop's Trio guest run, from asyncio.

    Returns what it returns and raises what it raises (the same exception object).
    Cancelling the awaiting asyncio task cancels the Trio call and waits for it to
    end before ``CancelledError`` is raised.

    Example::

        summary = await trio_agent.aio.run_in_trio(handle.wait)

    Raises:
        GuestRunClosedError: the run stopped before the call ended.
    """
    return await call_in_trio(lambda: async_fn(*args))
