"""The journal's writer: a running turn's records, written behind it, in order, in batches.

A record (a model answer, a tool's result) is handed to the writer and the turn
goes on at once; one task per turn writes what has piled up in one transaction
(``INSERT ... ON CONFLICT DO NOTHING``), then the next pile. Each model call waits
until the records made before it are written (:meth:`RecordWriter.flush`), so a
record lags behind its tool, never behind the next answer: once a later tool has
started, every earlier result is recorded. Before, each record was a thread hop
and a transaction the turn waited for: four per turn of the benchmark's.

What a crash loses is therefore a *suffix* of the records, never one in the middle
(they are written in the order they were made, each batch all or nothing): the
turn re-run after the crash re-runs exactly what a crash a little earlier would
have left unrecorded. A worker stopping (Ctrl+C, its database lost) writes what
is left before it goes, within :data:`FLUSH_BOUND` seconds. The turn's commit
waits for a batch in flight (so no record lands after the commit dropped the
journal) and drops the rest: the commit holds the whole turn.
"""

from __future__ import annotations

from typing import Any, Final, final

import attrs
import trio

from ._errors import DurableError
from ._store import SqlSessionStore

__all__ = ["FLUSH_BOUND", "RecordWriter"]

#: Seconds a stopping worker gives a turn's last records to land.
FLUSH_BOUND: Final = 5.0


@final
@attrs.define(eq=False)
class RecordWriter:
    """Writes one turn's journal records behind it (see the module)."""

    store: SqlSessionStore
    turn_id: str
    #: The first write that failed (the next :meth:`add` raises it).
    error: DurableError | None = None
    #: Transactions written, and records in them (for tests and statistics).
    batches: int = 0
    written: int = 0
    _pending: list[tuple[str, Any]] = attrs.field(factory=list[tuple[str, Any]])
    _more: trio.Event = attrs.field(factory=trio.Event)
    _idle: trio.Event = attrs.field(factory=trio.Event)
    _closed: bool = False
    _started: bool = False
    _done: bool = False
    _writing: bool = False
    _batch_done: trio.Event = attrs.field(factory=trio.Event)

    def add(self, key: str, value: Any) -> None:
        """Queue a record; it is written soon, after every record queued before it.

        Never raises: a failed write is raised by the next :meth:`flush` (the next
        model call), not into the tool whose result is being recorded (the tool
        worked; it is the journal that cannot keep it).
        """
        if self.error is None:
            self._pending.append((key, value))
            self._more.set()

    async def run(self) -> None:
        """Write until :meth:`close`; on cancellation, write what is left (bounded)."""
        self._started = True
        try:
            while not self._closed:
                await self._more.wait()
                self._more = trio.Event()
                await self._write_pending()
        finally:
            self._idle.set()
            if not self._closed:  # the worker stops: what is queued is still owed
                with trio.CancelScope(shield=True) as scope:
                    scope.deadline = trio.current_time() + FLUSH_BOUND
                    await self._write_pending()
            self._done = True
            self._batch_done.set()

    async def flush(self) -> None:
        """Wait until every record queued so far is written.

        The journal calls it before each model call: a record may lag behind its
        tool, never behind the next answer (nor, hence, behind a later tool).

        Raises:
            DurableError: a write failed (the database is not writable).
        """
        while (self._pending or self._writing) and self.error is None and not self._done:
            await self._batch_done.wait()
        if self.error is not None:
            raise self.error

    async def close(self) -> None:
        """Stop writing: wait for a batch in flight, drop what is not written yet."""
        self._closed = True
        self._pending.clear()
        self._more.set()
        if self._started:
            await self._idle.wait()

    async def _write_pending(self) -> None:
        while self._pending and self.error is None:
            batch, self._pending = self._pending, []
            self._writing = True
            try:
                await trio.to_thread.run_sync(
                    self.store.record_many, self.turn_id, batch, abandon_on_cancel=True
                )
            except DurableError as exc:
                self.error = exc
                return
            except Exception as exc:
                # Anything else (a driver's bare error on a value it cannot write) is
                # this turn's failure too, raised at its next flush: never out of this
                # task, which runs in the worker's nursery, beside every other turn.
                self.error = DurableError(
                    f"cannot record in the journal of turn {self.turn_id}:"
                    f" {type(exc).__name__}: {_said(exc)}"
                )
                self.error.__cause__ = exc
                return
            except BaseException:
                # Cancelled before or while the thread wrote: the batch is still owed
                # (the stopping worker's last flush writes it; a write that did land
                # is not doubled, the first record of a key wins).
                self._pending[:0] = batch
                raise
            finally:
                self._writing = False
                self._batch_done.set()
                self._batch_done = trio.Event()
            self.batches += 1
            self.written += len(batch)


def _said(exc: BaseException) -> str:
    """``str(exc)``, at most 300 characters, even when its ``__str__`` raises."""
    try:
        text = str(exc)
    except Exception:
        return "(its message cannot be shown)"
    return text[:300].encode("utf-8", "replace").decode("utf-8")
