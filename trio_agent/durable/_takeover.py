"""Heartbeats and takeover: live workers recover the turns of a worker that died.

Each worker bumps a counter in ``trio_agent_workers`` every third of its lease.
Every worker watches the others' counters with its own monotonic clock (so the
machines' clocks need not agree): a counter seen unchanged for the lease its
worker declared means that worker is gone, and the watcher recovers that
executor's pending turns with DBOS's own recovery (``DBOS._recover_pending_workflows``).

DBOS makes the takeover safe: recovery re-enqueues each ``PENDING`` workflow of the
dead executor in one conditional ``UPDATE`` (``PENDING`` and still that executor's),
back on its own queue (the session's partition, its priority), and a queue hands a
workflow out through one atomic ``ENQUEUED -> PENDING`` dequeue that gives it a new
ownership token (``owner_xid``). Two watchers recovering the same executor at once
therefore never both run a turn: the second one's ``UPDATE`` matches nothing. A
worker that was only paused past its lease and comes back is fenced: the commit of
a turn it no longer owns is refused (:class:`~._store.FencedError`), and DBOS refuses
its record of the step for the same reason.

A worker that cannot write its heartbeat for a whole lease stops with one clear
error (:class:`~trio_agent.durable.DurableError`): its turns are then taken over by
the others, and nothing spins. A SQLite file deleted, replaced or made read-only
stops it at its next heartbeat (no retry brings the file back).
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable
from typing import Final, final

import attrs
import trio

from ._errors import DurableError
from ._store import SqlSessionStore

__all__ = ["DEFAULT_LEASE", "Watcher"]

#: Seconds a worker may go without a heartbeat before the others take over its turns.
DEFAULT_LEASE: Final = 30.0
#: Seconds a heartbeat round may take at least before it counts as failed.
MIN_PATIENCE: Final = 5.0

logger = logging.getLogger("trio_agent.durable")


@final
@attrs.define(eq=False)
class Watcher:
    """Beats for this worker, and recovers the turns of workers whose lease ran out."""

    store: SqlSessionStore
    executor_id: str
    lease: float
    #: Re-enqueues an executor's pending turns; the number of turns (DBOS's recovery).
    recover: Callable[[str], int]
    #: For SQLite: the database file, whose disappearance or replacement is a lost database.
    sqlite_path: str | None = None
    #: Executor ids this worker took over, in order (for tests and statistics).
    taken_over: list[str] = attrs.field(factory=list[str])
    _seen: dict[str, tuple[int, float]] = attrs.field(factory=dict[str, tuple[int, float]])
    _inode: tuple[int, int] | None = None
    _beaten: bool = False

    @property
    def interval(self) -> float:
        return self.lease / 3

    @property
    def patience(self) -> float:
        """Seconds a heartbeat round may take before it counts as failed (the lease,
        at least :data:`MIN_PATIENCE`: a loaded machine is not a lost database)."""
        return max(self.lease, MIN_PATIENCE)

    async def first_beat(self) -> None:
        """The first heartbeat: the worker is connected and writing (raises if not)."""
        self._inode = self._file_identity()
        await self._beat()

    async def run(self) -> None:
        """Beat and watch until cancelled.

        Raises:
            DurableError: no heartbeat could be written for a whole lease.
        """
        last_ok = trio.current_time()
        failing: DurableError | None = None
        while True:
            await trio.sleep(self.interval)
            try:
                # A database that never answers (a lock held for ever, a network that
                # drops every packet) is a database lost too, not a wait in silence.
                with trio.move_on_after(self.patience) as bounded:
                    await self._beat()
                    await self._watch()
                if bounded.cancelled_caught:
                    raise DurableError(f"the database did not answer within {self.patience:g} s")
            except _FileLost as exc:  # not transient: stop at once
                raise DurableError(f"worker {self.executor_id} stopped: {exc}") from None
            except DurableError as exc:
                if failing is None:
                    logger.error("worker %s cannot use its database: %s", self.executor_id, exc)
                failing = exc
                if trio.current_time() - last_ok >= self.lease:
                    raise DurableError(
                        f"worker {self.executor_id} stopped: its database has not been"
                        f" writable for {self.lease:g} s ({exc})"
                    ) from exc
                continue
            if failing is not None:
                logger.warning("worker %s reaches its database again", self.executor_id)
                failing = None
            last_ok = trio.current_time()

    async def _beat(self) -> None:
        self._check_file()
        existed = await trio.to_thread.run_sync(
            self.store.heartbeat, self.executor_id, self.lease, abandon_on_cancel=True
        )
        if self._beaten and not existed:
            logger.warning(
                "worker %s missed its lease (%g s; was it paused?): another worker took over"
                " its turns; the ones it still runs will not be committed",
                self.executor_id,
                self.lease,
            )
        self._beaten = True

    async def _watch(self) -> None:
        peers = await trio.to_thread.run_sync(self.store.workers, abandon_on_cancel=True)
        now = trio.current_time()
        for gone in set(self._seen) - set(peers):
            del self._seen[gone]
        for peer, (beats, lease) in peers.items():
            if peer == self.executor_id:
                continue
            seen = self._seen.get(peer)
            if seen is None or seen[0] != beats:
                self._seen[peer] = (beats, now)
                continue
            if now - seen[1] < lease:
                continue
            # Recover first, then forget the peer (only if it is still silent): a watcher
            # that dies between the two leaves the peer for another watcher to recover,
            # and recovering twice is harmless (DBOS re-enqueues only what is PENDING
            # and still the dead executor's).
            count = await trio.to_thread.run_sync(self.recover, peer, abandon_on_cancel=True)
            try:
                await trio.to_thread.run_sync(
                    self.store.forget_worker, peer, beats, abandon_on_cancel=True
                )
            except DurableError as exc:  # its row is locked (a peer frozen mid-write)
                logger.info(
                    "worker %s keeps worker %s's row for now: %s", self.executor_id, peer, exc
                )
            del self._seen[peer]
            self.taken_over.append(peer)
            logger.warning(
                "worker %s took over worker %s (no heartbeat for %.1f s, lease %g s): %d"
                " pending turn%s re-enqueued",
                self.executor_id,
                peer,
                now - seen[1],
                lease,
                count,
                "" if count == 1 else "s",
            )

    def _file_identity(self) -> tuple[int, int] | None:
        if self.sqlite_path is None:
            return None
        try:
            st = os.stat(self.sqlite_path)
        except OSError:
            return None
        return st.st_dev, st.st_ino

    def _check_file(self) -> None:
        # SQLite writes through a connection already open go to a deleted file's inode
        # and "succeed": look at the file itself.
        if self.sqlite_path is None:
            return
        now = self._file_identity()
        if now is None:
            raise _FileLost(f"the database file {self.sqlite_path} is gone")
        if self._inode is not None and now != self._inode:
            raise _FileLost(f"the database file {self.sqlite_path} was deleted or replaced")
        if not os.access(self.sqlite_path, os.W_OK) or not _writable_by_mode(self.sqlite_path):
            raise _FileLost(f"the database file {self.sqlite_path} is read-only")


class _FileLost(DurableError):
    """The SQLite file was deleted, replaced or made read-only: no retry brings it back."""


def _writable_by_mode(path: str) -> bool:
    # os.access says yes to root whatever the mode; a file nobody may write is read-only.
    try:
        return bool(os.stat(path).st_mode & 0o222)
    except OSError:
        return False


def check_lease(lease: float) -> float:
    """*lease* if it is a positive, finite number of seconds."""
    if isinstance(lease, bool) or not isinstance(lease, int | float):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise DurableError(f"lease is a number of seconds, not {type(lease).__name__}")
    if not (0 < lease < math.inf):
        raise DurableError(f"lease must be a positive number of seconds, got {lease!r}")
    return float(lease)
