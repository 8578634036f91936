"""The durable worker: DBOS runs each submitted turn as a workflow of one step; the
step hands the turn to the worker's one Trio loop.

DBOS's queue threads dequeue turns (at most ``concurrency`` at once per worker,
and one at a time per session: the queue is partitioned by session id). Each
turn's step calls ``trio.from_thread.run`` with the worker's ``TrioToken``, so
every turn a worker runs shares one Trio loop, as sessions do in one process.

A worker stopped mid-turn (``kill -9``, a crash, Ctrl+C) leaves the turn's
workflow pending; the worker restarted with the same executor id resumes it, and
if none is, the live workers take it over once its heartbeat is older than its
lease (:mod:`._takeover`). DBOS is one per process, so a process runs one worker.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import logging
import math
import threading
import time
from collections.abc import AsyncGenerator, Callable, Generator, Mapping, Sequence
from typing import Any, Final, cast, final

import attrs
import trio
from dbos import DBOS, DBOSConfig, Queue
from dbos._context import get_local_dbos_context
from dbos._core import execute_dequeued_workflow
from dbos._dbos import _get_dbos_instance  # pyright: ignore[reportPrivateUsage]
from dbos._utils import GlobalParams, generate_uuid

try:
    from opentelemetry import trace as trace_api
except ImportError:  # pragma: no cover - the otel extra is not installed
    trace_api = None

from .. import AssistantMessage, Message, TurnEnd, TurnEndReason
from ..otel import traced_submit
from ._agent import Agent
from ._approvals import approvals_from_json
from ._errors import DurableError
from ._journal import TurnJournal
from ._store import FencedError, SqlSessionStore, engine_url, tune_sqlite
from ._takeover import DEFAULT_LEASE, Watcher, check_lease
from ._writer import FLUSH_BOUND, RecordWriter

__all__ = [
    "APP_NAME",
    "APP_VERSION",
    "QUEUE",
    "WORKFLOW",
    "default_database_url",
    "open_worker",
    "run_worker",
]

APP_NAME: Final = "trio-agent"
#: Fixed, so workers and submitters agree on the version whatever their code.
APP_VERSION: Final = "trio-agent-durable-1"
QUEUE: Final = "trio_agent_turns"
WORKFLOW: Final = "trio_agent.turn"
_POLL: Final = 0.05

logger = logging.getLogger("trio_agent.durable")


def default_database_url() -> str:
    """The embedded default: a SQLite file ``trio_agent.sqlite`` in the working directory."""
    return "sqlite:///trio_agent.sqlite"


class _WorkerStopped(BaseException):
    """The worker stopped mid-turn: DBOS must record nothing (a BaseException), so
    the turn stays pending and is resumed like after a crash."""


@final
@attrs.define(eq=False)
class _Worker:
    agents: Mapping[str, Agent]
    store: SqlSessionStore
    token: trio.lowlevel.TrioToken
    limiter: trio.CapacityLimiter
    running: set[trio.CancelScope] = attrs.field(factory=set[trio.CancelScope])
    idle: trio.Event = attrs.field(factory=trio.Event)
    stopping: bool = False
    turns_run: int = 0
    #: The database URL as given (a submitter in this process on the same URL wakes
    #: the queue at once: :func:`wake_queue`).
    url: str = ""
    #: Where each turn's journal writer runs (None before the worker's nursery is open:
    #: those turns write each record before going on).
    nursery: trio.Nursery | None = None
    #: The shielded waits on the database (a commit, the journal's last batch), which a
    #: lost database cancels: nothing will land, and the worker must stop.
    shielded: set[trio.CancelScope] = attrs.field(factory=set[trio.CancelScope])

    @contextlib.contextmanager
    def _shield(self) -> Generator[None]:
        with trio.CancelScope(shield=True) as scope:
            self.shielded.add(scope)
            try:
                yield
            finally:
                self.shielded.discard(scope)

    async def run_turn(
        self,
        agent_name: str,
        session_id: str,
        prompt: str | None,
        turn_id: str,
        approvals: Mapping[str, Any] | None = None,
        owner: str | None = None,
    ) -> dict[str, Any]:
        if self.stopping:
            raise _WorkerStopped
        summary: dict[str, Any] | None = None
        with trio.CancelScope() as scope:
            self.running.add(scope)
            try:
                async with self.limiter:
                    summary = await self._turn(
                        agent_name, session_id, prompt, turn_id, approvals, owner
                    )
            except FencedError as exc:
                logger.warning("%s", exc)
                raise _WorkerStopped from None
            except Exception as exc:
                # A worker woken after a takeover may fail before its commit (a journal
                # write, the model): its error must not end a turn another worker runs.
                if owner is not None and await self._taken_over(turn_id, owner, exc):
                    raise _WorkerStopped from None
                raise
            finally:
                self.running.discard(scope)
                if self.stopping and not self.running:
                    self.idle.set()
        if summary is None:  # cancelled: the worker is stopping
            raise _WorkerStopped
        return summary

    async def _taken_over(self, turn_id: str, owner: str, exc: Exception) -> bool:
        """Whether *turn_id* was taken over from this execution (logged, with *exc*)."""
        try:
            await trio.to_thread.run_sync(self.store.check_owner, turn_id, owner)
        except FencedError as fenced:
            logger.warning("%s (it failed here: %r)", fenced, exc)
            return True
        except DurableError:  # the database cannot say: the error stands
            return False
        return False

    async def _turn(
        self,
        agent_name: str,
        session_id: str,
        prompt: str | None,
        turn_id: str,
        approvals: Mapping[str, Any] | None,
        owner: str | None,
    ) -> dict[str, Any]:
        # One thread hop and one connection for everything the turn starts from.
        done, history, pending, recorded = await trio.to_thread.run_sync(
            self.store.begin_turn, turn_id, session_id
        )
        if done is not None:  # committed before a crash cut the step's record
            return done
        try:
            agent = self.agents[agent_name]
        except KeyError:
            raise DurableError(f"this worker has no agent named {agent_name!r}") from None
        decisions = None if approvals is None else approvals_from_json(approvals)
        journal = TurnJournal(self.store, turn_id, recorded)
        writer = None
        if self.nursery is not None:
            writer = journal.writer = RecordWriter(self.store, turn_id)
            self.nursery.start_soon(writer.run)
        try:
            return await self._run(
                agent, session_id, prompt, turn_id, decisions, owner, history, pending, journal
            )
        except BaseException:
            # A stopping worker's writer writes what is left when the worker's nursery
            # closes; any other end of the turn drops what is not written.
            if writer is not None and not self.stopping:
                with self._shield():
                    await writer.close()
            raise

    async def _run(
        self,
        agent: Agent,
        session_id: str,
        prompt: str | None,
        turn_id: str,
        decisions: Any,
        owner: str | None,
        history: tuple[Message, ...],
        pending: Any,
        journal: TurnJournal,
    ) -> dict[str, Any]:
        session = agent.factory(session_id)
        session = attrs.evolve(
            session,
            client=journal.client(session.client),
            tools=journal.tools(session.tools),
            messages=list(history),
            pending=pending,
            transcript_path=None,
        )
        journal.bind()  # this task's context: its tools inherit the turn
        end: TurnEnd | None = None
        raised: BaseException | None = None
        try:
            submitted = (
                traced_submit(
                    session,
                    prompt,
                    approvals=decisions,
                    agent_name=agent.name,
                    conversation_id=session_id,
                )
                if _tracing()
                else session.submit(prompt, approvals=decisions)
            )
            async with submitted as events:
                async for event in events:
                    if isinstance(event, TurnEnd):
                        end = event
        except Exception:
            raise  # DBOS records it: the turn fails (TurnHandle.result raises)
        except BaseException as exc:  # a tool's own BaseException ends the turn
            if _is_interrupt(exc):
                raise
            # Re-raised into DBOS's thread, it would record nothing and leave the turn
            # PENDING for ever, the session's later turns behind it: end the turn
            # instead, keeping the history the session kept (valid, as after any error).
            logger.warning("turn %s ended by %r", turn_id, exc)
            raised = exc
        self.turns_run += 1
        final = session.messages
        replace = not _extends(final, history)
        # A turn that compacted the history (or otherwise rewrote it) commits the whole
        # new one; its summary counts the messages the old history did not hold.
        new = final[len(history) :] if not replace else _not_in(final, history)
        summary = _summary(turn_id, session_id, end, new, journal.replayed_tools, raised)
        left = session.pending_approvals
        with self._shield():  # the turn is done: its commit must land
            if journal.writer is not None:  # no record may land after the commit
                await journal.writer.close()
            summary = await trio.to_thread.run_sync(
                self.store.commit_turn,
                session_id,
                turn_id,
                new,
                summary,
                left,
                owner,
                replace,
                abandon_on_cancel=True,  # only a lost database cancels it
            )
        return summary


def _extends(messages: Sequence[Message], history: Sequence[Message]) -> bool:
    """Whether *messages* begins with *history* (the turn appended to it; the same
    objects, unless something replaced them)."""
    return len(messages) >= len(history) and all(
        a is b or a == b for a, b in zip(messages, history, strict=False)
    )


def _not_in(messages: Sequence[Message], history: Sequence[Message]) -> list[Message]:
    """The messages of *messages* that *history* does not hold (by identity: a
    compacted history keeps the messages it kept)."""
    old = {id(m) for m in history}
    return [m for m in messages if id(m) not in old]


def _tracing() -> bool:
    """Whether a turn's spans would be recorded: ``opentelemetry-api`` is installed and
    a tracer provider is set. Else the turn runs untraced: wrapping its client and
    tools for spans nobody records cost a fifth of a durable turn's CPU."""
    if trace_api is None:
        return False
    return not isinstance(trace_api.get_tracer_provider(), trace_api.ProxyTracerProvider)


_INTERRUPTS: Final = (trio.Cancelled, KeyboardInterrupt, SystemExit, GeneratorExit)


def _is_interrupt(exc: BaseException) -> bool:
    """A stop of the worker or the process, never to be turned into a turn's end."""
    if isinstance(exc, BaseExceptionGroup):
        group = cast(BaseExceptionGroup[BaseException], exc)
        return any(_is_interrupt(e) for e in group.exceptions)
    return isinstance(exc, (*_INTERRUPTS, _WorkerStopped))


def _summary(
    turn_id: str,
    session_id: str,
    end: TurnEnd | None,
    new: Sequence[Message],
    replayed_tools: int,
    raised: BaseException | None = None,
) -> dict[str, Any]:
    last = next((m for m in reversed(new) if isinstance(m, AssistantMessage)), None)
    if raised is not None:
        return {
            "turn_id": turn_id,
            "session_id": session_id,
            "reason": str(TurnEndReason.ERROR),
            "turns": 0,
            "usage": {},
            "cost_usd": None,
            "message": f"a tool raised {type(raised).__name__}",
            "error": repr(raised),
            "abort_reason": None,
            "text": "" if last is None else last.text,
            "messages": len(new),
            "replayed_tools": replayed_tools,
            "pending": [],
        }
    return {
        "turn_id": turn_id,
        "session_id": session_id,
        "reason": None if end is None else str(end.reason),
        "turns": 0 if end is None else end.turns,
        "usage": {} if end is None else end.usage.to_api(),
        # The API's usage has no cost: kept beside it (None: a price was unknown).
        "cost_usd": None if end is None else end.usage.cost_usd,
        "message": None if end is None else end.message,
        "error": None if end is None or end.error is None else repr(end.error),
        "abort_reason": None if end is None or end.abort_reason is None else str(end.abort_reason),
        "text": "" if last is None else last.text,
        "messages": len(new),
        "replayed_tools": replayed_tools,
        "pending": [] if end is None or end.pending is None else list(end.pending.ids),
    }


# DBOS is a process-wide singleton; so is the worker its functions hand turns to.
_current: _Worker | None = None


@DBOS.step(name="trio_agent.run_turn")
def _turn_step(
    agent_name: str,
    session_id: str,
    prompt: str | None,
    approvals: dict[str, Any] | None = None,
) -> dict[str, Any]:
    worker = _current
    turn_id = DBOS.workflow_id
    if worker is None or turn_id is None:
        raise _WorkerStopped
    ctx = get_local_dbos_context()
    # This execution's ownership token: a takeover gives the workflow a new one.
    owner = None if ctx is None else ctx.owner_xid
    try:
        return trio.from_thread.run(
            worker.run_turn,
            agent_name,
            session_id,
            prompt,
            turn_id,
            approvals,
            owner,
            trio_token=worker.token,
        )
    except trio.RunFinishedError:
        raise _WorkerStopped from None
    except trio.Cancelled:
        raise _WorkerStopped from None


@DBOS.workflow(name=WORKFLOW)
def _turn_workflow(
    agent_name: str,
    session_id: str,
    prompt: str | None,
    approvals: dict[str, Any] | None = None,
) -> dict[str, Any]:
    summary = _turn_step(agent_name, session_id, prompt, approvals)
    turn_id = DBOS.workflow_id
    ending = None if turn_id is None else _endings.get(turn_id)
    if ending is not None:  # a waiter in this process: it has the summary now
        ending.summary = summary
        ending.set()
    return summary


@final
class Ending(threading.Event):
    """Set as the turn's workflow returns in this process, with its ``summary``.

    The summary is the step's recorded output, committed with the turn's messages
    (``commit_turn``) before the workflow returns: DBOS records the workflow's end
    just after, and a recovery of the workflow returns the same summary. So a
    waiter in this process takes it from here, without reading the database.
    """

    summary: dict[str, Any] | None = None


#: Turns awaited in this process: the workflow hands its summary over as it
#: returns, and the waiter (TurnHandle.result) takes it instead of polling.
_endings: dict[str, Ending] = {}


def await_ending(turn_id: str) -> Ending:
    """What the turn *turn_id* sets as it ends, if it runs in this process."""
    return _endings.setdefault(turn_id, Ending())


def forget_ending(turn_id: str) -> None:
    _endings.pop(turn_id, None)


def serves(database_url: str) -> bool:
    """Whether a worker runs in this process on *database_url*."""
    waker = _waker
    return waker is not None and waker.url == database_url


def wake_queue(database_url: str) -> None:
    """Have this process's worker, if it serves *database_url*, look at its queue now.

    A submitter in the worker's process (one process, or a web server that runs
    both) calls this after each enqueue: the worker's waker thread runs one pass of
    DBOS's dequeue, so the turn starts without waiting for the queue's poll (every
    50 ms). Several wakes before the pass coalesce into one.
    """
    waker = _waker
    if waker is not None and waker.url == database_url:
        waker.event.set()


@final
@attrs.define(eq=False)
class _Waker:
    """The thread that dequeues this worker's turns from :data:`QUEUE`: one pass every
    :data:`_POLL` seconds, and one at once when a submitter in this process wakes it.

    DBOS's own queue thread does not serve :data:`QUEUE` (``DBOS.listen_queues``): its
    budget is the queue's ``worker_concurrency``, which DBOS keeps in the database,
    shared by every worker and overwritten by the last one to start. A worker started
    with ``--concurrency 4`` after one with 100 then claimed up to 100 turns, ran 4,
    and kept the others from every other worker. Here the budget is this worker's own
    *concurrency*, less the turns it claimed that have not ended (counted here at the
    claim: DBOS counts a turn only once a thread of its pool runs it).

    A pass is the one DBOS's queue thread runs for a queue partitioned one turn at a
    time (``start_queued_partitioned_workflows``, then each claimed workflow started):
    the claim is the same atomic ``ENQUEUED -> PENDING`` update, so two workers never
    both run a turn. Private DBOS functions: if a DBOS release changes them, every
    pass fails, said once every 10 s.
    """

    url: str
    queue: Queue
    concurrency: int
    event: threading.Event = attrs.field(factory=threading.Event)
    stop: bool = False
    #: Passes run, and turns they claimed (for tests and statistics).
    passes: int = 0
    dequeued: int = 0
    #: The turns this worker claimed that have not ended.
    _claimed: set[str] = attrs.field(factory=set[str])
    _lock: threading.Lock = attrs.field(factory=threading.Lock)
    _failing: bool = False
    _said_at: float = -math.inf

    def run(self) -> None:
        while True:
            woken = self.event.wait(_POLL)
            self.event.clear()
            if self.stop:
                return
            try:
                # A pass a submitter asked for looks only at turns of this version
                # (every DurableClient enqueues with it), not also unversioned ones,
                # which need a read of the latest registered version; the polls do.
                self._dequeue(latest=False if woken else None)
            except Exception as exc:
                now = time.monotonic()
                if now - self._said_at >= 10.0:
                    logger.warning("the worker cannot dequeue its turns: %r", exc)
                    self._said_at = now
                self._failing = True
            else:
                if self._failing:
                    logger.warning("the worker dequeues its turns again")
                    self._failing = False

    def _dequeue(self, *, latest: bool | None) -> None:
        dbos = _get_dbos_instance()
        running = dbos._active_workflows_set.count_for_queue(QUEUE)  # pyright: ignore[reportPrivateUsage]
        with self._lock:
            budget = self.concurrency - max(running, len(self._claimed))
        if budget <= 0:
            return
        owner = generate_uuid()
        sys_db = dbos._sys_db  # pyright: ignore[reportPrivateUsage]
        ids = sys_db.start_queued_partitioned_workflows(
            self.queue,
            GlobalParams.executor_id,
            GlobalParams.app_version,
            budget,
            owner_xid=owner,
            is_latest_version=latest,
        )
        self.passes += 1
        self.dequeued += len(ids)
        if not ids:
            return
        with self._lock:
            self._claimed.update(ids)
        statuses = {s["workflow_uuid"]: s for s in sys_db.get_workflow_statuses(ids)}
        for turn_id in ids:
            try:
                status = statuses.get(turn_id)
                if status is None:
                    raise DurableError(f"turn {turn_id} was claimed but has no status")
                handle = execute_dequeued_workflow(dbos, status, owner)
            except Exception:
                self._release(turn_id)
                raise
            future: object = getattr(handle, "future", None)
            if isinstance(future, concurrent.futures.Future):
                future.add_done_callback(functools.partial(self._released, turn_id))
            else:  # not started here (the row moved on since the claim)
                self._release(turn_id)

    def _released(self, turn_id: str, _: object) -> None:
        self._release(turn_id)

    def _release(self, turn_id: str) -> None:
        with self._lock:
            self._claimed.discard(turn_id)


_waker: _Waker | None = None


@contextlib.asynccontextmanager
async def open_worker(
    agents: Agent | Sequence[Agent],
    *,
    database_url: str | None = None,
    concurrency: int = 100,
    executor_id: str | None = None,
    lease: float = DEFAULT_LEASE,
) -> AsyncGenerator[None]:
    """Run a durable worker in this Trio run until the block exits.

    The block is entered once the worker is connected and has written its first
    heartbeat. The worker heartbeats every ``lease / 3`` seconds; when another
    worker's heartbeat is older than that worker's lease, this one takes over its
    pending turns (:mod:`._takeover`).

    Args:
        agents: the agents whose turns this worker runs (by name).
        database_url: ``sqlite:///file`` (the default, :func:`default_database_url`)
            or ``postgresql://...`` for workers on many machines sharing one queue.
        concurrency: turns in flight at most in this worker.
        executor_id: this worker's identity; a worker restarted with the same id
            resumes the turns its predecessor left unfinished (default ``local``).
        lease: seconds this worker may go without a heartbeat before the others
            take over its turns (default 30).

    Raises:
        DurableError: bad arguments, DBOS cannot start, or the database stopped
            being writable for a whole lease (the block is cancelled first).
    """
    global _current, _waker
    items = [agents] if isinstance(agents, Agent) else list(agents)
    by_name = {a.name: a for a in items}
    if len(by_name) != len(items) or not items:
        raise DurableError("agents need distinct names, at least one")
    if isinstance(concurrency, bool) or concurrency < 1:
        raise DurableError(f"concurrency must be a positive integer, got {concurrency!r}")
    lease = check_lease(lease)
    if _current is not None:
        raise DurableError("a worker already runs in this process (DBOS is one per process)")
    url = database_url or default_database_url()
    parsed = engine_url(url)  # a clear error for a bad URL, before DBOS sees it
    store = await trio.to_thread.run_sync(SqlSessionStore.connect, url)
    worker = _Worker(
        by_name,
        store,
        trio.lowlevel.current_trio_token(),
        trio.CapacityLimiter(concurrency),
        url=url,
    )
    config: DBOSConfig = {
        "name": APP_NAME,
        "system_database_url": url,
        "application_version": APP_VERSION,
        "executor_id": executor_id,
        "log_level": "WARNING",
        "notification_listener_polling_interval_sec": _POLL,
    }
    _current = worker
    lost: DurableError | None = None
    waker: _Waker | None = None
    try:
        queue = await trio.to_thread.run_sync(_launch, config)
        waker = _Waker(url, queue, concurrency)
        threading.Thread(target=waker.run, name="trio-agent-waker", daemon=True).start()
        _waker = waker
        try:
            sqlite = parsed.database if parsed.get_backend_name() == "sqlite" else None
            watcher = Watcher(store, DBOS.executor_id, lease, _recover, sqlite_path=sqlite or None)
            await watcher.first_beat()
            async with trio.open_nursery() as nursery:

                async def watch() -> None:
                    nonlocal lost
                    try:
                        await watcher.run()
                    except DurableError as exc:  # raised when the block exits
                        lost = exc
                        nursery.cancel_scope.cancel(reason="the database is lost")

                nursery.start_soon(watch)
                worker.nursery = nursery
                try:
                    yield
                finally:
                    waker.stop = True  # claim no more turns: they would only wait here
                    waker.event.set()
                    await _stop_turns(worker, lost=lost is not None)
                    nursery.cancel_scope.cancel(reason="the worker stops")
                # Leaving the nursery: each turn's writer writes what is left (bounded).
        finally:
            _waker = None
            waker.stop = True
            waker.event.set()
            await _stop_turns(worker, lost=lost is not None)
            with trio.CancelScope(shield=True) as scope:
                if lost is not None:  # DBOS's threads may hang on the database: go anyway
                    scope.deadline = trio.current_time() + FLUSH_BOUND
                await trio.to_thread.run_sync(_destroy, abandon_on_cancel=True)
    finally:
        if waker is not None:
            waker.stop = True
            waker.event.set()
        _waker = None
        _current = None
        store.close()
    if lost is not None:
        raise lost


async def _stop_turns(worker: _Worker, *, lost: bool) -> None:
    """Cancel the worker's running turns and wait for them to end (their workflows
    stay pending); with its database lost, stop waiting on the database first, and
    give up waiting after :data:`FLUSH_BOUND` seconds."""
    worker.stopping = True
    for scope in list(worker.running):
        scope.cancel()
    if lost:
        for scope in list(worker.shielded):
            scope.cancel()
    with trio.CancelScope(shield=True) as wait:
        if lost:
            wait.deadline = trio.current_time() + FLUSH_BOUND
        if worker.running:
            await worker.idle.wait()


def _recover(executor_id: str) -> int:
    # DBOS's own recovery of another executor's pending workflows (what its admin
    # server runs when a cloud executor is lost): re-enqueued, one runner each.
    handles = DBOS._recover_pending_workflows([executor_id])  # pyright: ignore[reportPrivateUsage]
    return len(handles)


def _launch(config: DBOSConfig) -> Queue:
    try:
        DBOS(config=config)
        # This worker dequeues its turns itself, within its own concurrency (_Waker);
        # DBOS's queue threads serve only DBOS's internal queues.
        DBOS.listen_queues([])
        DBOS.launch()
        _quiet_dbos()
        tune_sqlite(_get_dbos_instance()._sys_db.engine)  # pyright: ignore[reportPrivateUsage]
        # The queue's row: partitioned by session, one turn of a session at a time. No
        # worker_concurrency there: the database's one number would be every worker's.
        return DBOS.register_queue(
            QUEUE, partition_concurrency=1, polling_interval_sec=_POLL, on_conflict="always_update"
        )
    except Exception as exc:
        _destroy()
        raise DurableError(f"the durable engine cannot start: {exc}") from exc


@final
class _OncePer(logging.Filter):
    """Lets a log line from one place through once per *seconds*: DBOS's queue thread
    warns at every 50 ms poll while the database is unreachable."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds
        self.last: dict[tuple[str, int], float] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        where = (record.pathname, record.lineno)
        now = time.monotonic()
        if now - self.last.get(where, -math.inf) < self.seconds:
            return False
        self.last[where] = now
        return True


def _quiet_dbos() -> None:
    """DBOS's own records, once per place per 10 s: the filter is on its logger, which
    filters only the records made there. (On its handlers it filtered whatever else
    they handle: a handler shared with other loggers, as pytest's log capture is,
    then lost the second record of any line of any logger.)"""
    dbos = logging.getLogger("dbos")
    if not any(isinstance(f, _OncePer) for f in dbos.filters):
        dbos.addFilter(_OncePer(10.0))


def _destroy() -> None:
    DBOS.destroy(workflow_completion_timeout_sec=0)


def run_worker(
    agents: Agent | Sequence[Agent],
    *,
    database_url: str | None = None,
    concurrency: int = 100,
    executor_id: str | None = None,
    lease: float = DEFAULT_LEASE,
    on_ready: Callable[[], None] | None = None,
) -> None:
    """Run a worker until interrupted (Ctrl+C, SIGTERM): ``trio.run`` around :func:`open_worker`.

    *on_ready* is called once the worker is connected (its first heartbeat written).
    """

    async def serve() -> None:
        async with open_worker(
            agents,
            database_url=database_url,
            concurrency=concurrency,
            executor_id=executor_id,
            lease=lease,
        ):
            if on_ready is not None:
                on_ready()
            await trio.sleep(math.inf)

    trio.run(serve)
