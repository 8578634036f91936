"""Leak detection for tests: tasks, scripted streams, HTTP connections, processes, fds.

Example::

    async def test_turn(autojump_clock):
        model = ScriptedModel([...])
        with no_leaks(models=[model]):
            async with query(client_for(model), ...) as events:
                async for event in events:
                    ...

or, around a whole ``trio.run`` (a hypothesis example)::

    check = LeakCheck(models=[model])
    with check:
        trio.run(main, clock=MockClock(autojump_threshold=0), instruments=[check])

On leaving the block, :meth:`LeakCheck.check` raises :class:`LeakError` (an
``AssertionError``) naming every task spawned inside the block that is still alive,
every scripted response body not closed, every httpx connection still busy, every
new child process still running and every new file descriptor left open.

Linux only for processes and file descriptors (``/proc``); elsewhere those checks
are skipped. With ``adopt_orphans=True`` the test process becomes a child
subreaper (``prctl(PR_SET_CHILD_SUBREAPER)``), so a grandchild that outlives its
parent (e.g. a ``sleep &`` left by a Bash command) is re-parented to the test
process and shows up as a leaked child instead of vanishing under ``init``.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import sys
import time
from collections.abc import Generator, Iterable
from types import TracebackType
from typing import Any, Protocol, final

import attrs
import httpx
import trio

__all__ = ["LeakCheck", "LeakError", "Leaks", "no_leaks", "process_exited"]

_PR_SET_CHILD_SUBREAPER = 36
#: Real seconds a just-killed child may take to die before it counts as leaked.
_GRACE_SECONDS = 2.0


class LeakError(AssertionError):
    """Something was left behind by the code under test."""


class _Streams(Protocol):
    @property
    def open_streams(self) -> int: ...


@attrs.frozen
class Leaks:
    """What was left behind (all empty or zero when nothing leaked).

    Attributes:
        tasks: names of tasks spawned inside the block and still alive.
        open_streams: scripted response bodies not closed.
        busy_connections: httpx connections still serving a request.
        processes: ``(pid, command)`` of new child processes still running.
        fds: file descriptors open now that were not open before.
    """

    tasks: tuple[str, ...] = ()
    open_streams: int = 0
    busy_connections: int = 0
    processes: tuple[tuple[int, str], ...] = ()
    fds: tuple[tuple[int, str], ...] = ()

    def __bool__(self) -> bool:
        return bool(
            self.tasks or self.open_streams or self.busy_connections or self.processes or self.fds
        )

    @property
    def count(self) -> int:
        """How many things leaked, in all."""
        return (
            len(self.tasks)
            + self.open_streams
            + self.busy_connections
            + len(self.processes)
            + len(self.fds)
        )


def _proc_available() -> bool:
    return sys.platform.startswith("linux") and os.path.isdir("/proc/self/fd")


def _open_fds() -> dict[int, str]:
    fds: dict[int, str] = {}
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc/self/fd"):
            try:
                fds[int(name)] = os.readlink(f"/proc/self/fd/{name}")
            except OSError:
                continue  # the listing's own directory fd, already closed
    return fds


def _process_state(pid: int) -> tuple[str, str] | None:
    """(state letter, command) of *pid*, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    command = stat[stat.find("(") + 1 : stat.rfind(")")]
    fields = stat[stat.rfind(")") + 2 :].split()
    return (fields[0] if fields else "?"), command


def _children() -> set[int]:
    pids: set[int] = set()
    with contextlib.suppress(OSError):
        for tid in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{tid}/children") as f:
                    pids.update(int(p) for p in f.read().split())
            except OSError:
                continue
    return pids


def _become_subreaper() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _busy_connections(client: httpx.AsyncClient) -> int:
    # httpx keeps its pool in the transport (httpcore.AsyncConnectionPool): idle
    # pooled connections are fine, a connection still serving a request is a leak.
    transport: Any = getattr(client, "_transport", None)
    pool: Any = getattr(transport, "_pool", None)
    if pool is None:
        return 0
    busy = sum(1 for c in getattr(pool, "connections", ()) if not (c.is_idle() or c.is_closed()))
    # A request may be queued for a connection not yet made: count it too.
    return max(busy, len(getattr(pool, "_requests", ())))


@final
class LeakCheck(trio.abc.Instrument):
    """A Trio instrument and resource snapshot; use as a context manager.

    Args:
        models: objects with an ``open_streams`` count (a ``ScriptedModel``), which
            must be 0 at the end.
        http_clients: ``httpx.AsyncClient`` objects whose pools must hold no busy
            connection at the end.
        processes: check that no new child process is left running.
        fds: check that no new file descriptor is left open.
        adopt_orphans: make this process a child subreaper first (see the module).
        grace: real seconds a new child may take to exit before it counts as leaked
            (a process group just sent SIGKILL is not gone at once).

    Tasks are tracked once the instrument is installed: inside a Trio run, entering
    the block installs it (``trio.lowlevel.add_instrument``); around ``trio.run``,
    pass it as ``instruments=[check]``.
    """

    def __init__(
        self,
        *,
        models: Iterable[_Streams] = (),
        http_clients: Iterable[httpx.AsyncClient] = (),
        processes: bool = True,
        fds: bool = True,
        adopt_orphans: bool = False,
        grace: float = _GRACE_SECONDS,
    ) -> None:
        self.grace = grace
        self.models = tuple(models)
        self.http_clients = tuple(http_clients)
        self._proc = _proc_available()
        self.check_processes = processes and self._proc
        self.check_fds = fds and self._proc
        self.adopt_orphans = adopt_orphans
        self._tasks: dict[trio.lowlevel.Task, None] = {}
        self.spawned = 0
        self._fds_before: dict[int, str] = {}
        self._children_before: set[int] = set()
        self._installed = False

    # -- trio.abc.Instrument ----------------------------------------------------------

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        self._tasks[task] = None
        self.spawned += 1

    def task_exited(self, task: trio.lowlevel.Task) -> None:
        self._tasks.pop(task, None)

    # -- the block --------------------------------------------------------------------

    def __enter__(self) -> LeakCheck:
        if self.adopt_orphans and self._proc:
            _become_subreaper()
        self._fds_before = _open_fds() if self.check_fds else {}
        self._children_before = _children() if self.check_processes else set()
        try:
            trio.lowlevel.current_task()
        except RuntimeError:
            pass  # outside Trio: the caller passes us to trio.run(instruments=...)
        else:
            trio.lowlevel.add_instrument(self)
            self._installed = True
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._installed:
            self._installed = False
            trio.lowlevel.remove_instrument(self)
        if exc_type is None:
            self.check()

    def leaks(self) -> Leaks:
        """What is left behind now (waits up to ``grace`` real seconds for dying children)."""
        tasks = tuple(sorted(t.name for t in self._tasks))
        streams = sum(m.open_streams for m in self.models)
        busy = sum(_busy_connections(c) for c in self.http_clients)
        processes = self._leaked_processes() if self.check_processes else ()
        fds: tuple[tuple[int, str], ...] = ()
        if self.check_fds:
            now = _open_fds()
            fds = tuple(
                sorted(
                    (fd, target) for fd, target in now.items() if self._fds_before.get(fd) != target
                )
            )
        return Leaks(
            tasks=tasks, open_streams=streams, busy_connections=busy, processes=processes, fds=fds
        )

    def _leaked_processes(self) -> tuple[tuple[int, str], ...]:
        deadline = time.monotonic() + self.grace
        while True:
            alive: list[tuple[int, str]] = []
            for pid in sorted(_children() - self._children_before):
                state = _process_state(pid)
                if state is None:
                    continue
                if state[0] in "ZX":
                    # A dead orphan adopted as subreaper: nobody else will reap it.
                    with contextlib.suppress(ChildProcessError, OSError):
                        os.waitpid(pid, os.WNOHANG)
                    continue
                alive.append((pid, state[1]))
            if not alive or time.monotonic() >= deadline:
                return tuple(alive)
            time.sleep(0.01)

    def check(self) -> None:
        """Raise :class:`LeakError` if anything is left behind; count the check."""
        leaks = self.leaks()
        STATISTICS.checks += 1
        STATISTICS.leaks += leaks.count
        if leaks:
            raise LeakError(f"left behind: {leaks!r}")


@attrs.define
class LeakStatistics:
    """Counts over every :meth:`LeakCheck.check` of this process (for reports)."""

    checks: int = 0
    leaks: int = 0


#: Totals of every leak check run in this process.
STATISTICS = LeakStatistics()


@contextlib.contextmanager
def no_leaks(
    *,
    models: Iterable[_Streams] = (),
    http_clients: Iterable[httpx.AsyncClient] = (),
    processes: bool = True,
    fds: bool = True,
    adopt_orphans: bool = False,
    grace: float = _GRACE_SECONDS,
) -> Generator[LeakCheck]:
    """``with no_leaks(models=[model]):`` fails if the block leaves anything behind.

    See :class:`LeakCheck` for the arguments.
    """
    with LeakCheck(
        models=models,
        http_clients=http_clients,
        processes=processes,
        fds=fds,
        adopt_orphans=adopt_orphans,
        grace=grace,
    ) as check:
        yield check


def process_exited(pid: int, *, timeout: float) -> bool:
    """Whether process *pid* has exited within *timeout* real seconds (a zombie has
    exited), whoever its parent is: waits on a pidfd, readable once the process ends,
    so nothing polls. Linux only (``os.pidfd_open``)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True  # gone: exited and reaped
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(max(0.0, timeout) * 1000))
    finally:
        os.close(fd)
