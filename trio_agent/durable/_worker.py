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

import contextlib
import logging
import math
import time
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from typing import Any, Final, cast, final

import attrs
import trio
from dbos import DBOS, DBOSConfig
from dbos._context import get_local_dbos_context

from .. import AssistantMessage, Message, TurnEnd, TurnEndReason
from ..otel import traced_submit
from ._agent import Agent
from ._approvals import approvals_from_json
from ._errors import DurableError
from ._journal import TurnJournal
from ._store import FencedError, SqlSessionStore, engine_url
from ._takeover import DEFAULT_LEASE, Watcher, check_lease

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
        done = await trio.to_thread.run_sync(self.store.turn_summary, turn_id)
        if done is not None:  # committed before a crash cut the step's record
            return done
        try:
            agent = self.agents[agent_name]
        except KeyError:
            raise DurableError(f"this worker has no agent named {agent_name!r}") from None
        decisions = None if approvals is None else approvals_from_json(approvals)
        history, pending = await trio.to_thread.run_sync(self.store.load_pending, session_id)
        journal = await TurnJournal.open(self.store, turn_id)
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
            async with traced_submit(
                session,
                prompt,
                approvals=decisions,
                agent_name=agent.name,
                conversation_id=session_id,
            ) as events:
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
        new = session.messages[len(history) :]
        summary = _summary(turn_id, session_id, end, new, journal.replayed_tools, raised)
        left = session.pending_approvals
        with trio.CancelScope(shield=True):  # the turn is done: its commit must land
            summary = await trio.to_thread.run_sync(
                self.store.commit_turn, session_id, turn_id, new, summary, left, owner
            )
        return summary


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
    return _turn_step(agent_name, session_id, prompt, approvals)


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
    global _current
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
        by_name, store, trio.lowlevel.current_trio_token(), trio.CapacityLimiter(concurrency)
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
    try:
        await trio.to_thread.run_sync(_launch, config, concurrency)
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
                try:
                    yield
                finally:
                    nursery.cancel_scope.cancel(reason="the worker stops")
        finally:
            worker.stopping = True
            for scope in list(worker.running):
                scope.cancel()
            with trio.CancelScope(shield=True):
                if worker.running:
                    await worker.idle.wait()
                await trio.to_thread.run_sync(_destroy)
    finally:
        _current = None
        store.close()
    if lost is not None:
        raise lost


def _recover(executor_id: str) -> int:
    # DBOS's own recovery of another executor's pending workflows (what its admin
    # server runs when a cloud executor is lost): re-enqueued, one runner each.
    handles = DBOS._recover_pending_workflows([executor_id])  # pyright: ignore[reportPrivateUsage]
    return len(handles)


def _launch(config: DBOSConfig, concurrency: int) -> None:
    try:
        DBOS(config=config)
        DBOS.launch()
        _quiet_dbos()
        DBOS.register_queue(
            QUEUE,
            worker_concurrency=concurrency,
            partition_concurrency=1,
            polling_interval_sec=_POLL,
            on_conflict="always_update",
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
    for handler in logging.getLogger("dbos").handlers:
        if not any(isinstance(f, _OncePer) for f in handler.filters):
            handler.addFilter(_OncePer(10.0))


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
