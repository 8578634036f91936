"""The durable worker: DBOS runs each submitted turn as a workflow of one step; the
step hands the turn to the worker's one Trio loop.

DBOS's queue threads dequeue turns (at most ``concurrency`` at once per worker,
and one at a time per session: the queue is partitioned by session id). Each
turn's step calls ``trio.from_thread.run`` with the worker's ``TrioToken``, so
every turn a worker runs shares one Trio loop, as sessions do in one process.

A worker stopped mid-turn (``kill -9``, a crash, Ctrl+C) leaves the turn's
workflow pending; the worker restarted with the same executor id resumes it.
DBOS is one per process, so a process runs one worker.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any, Final, final

import attrs
import trio
from dbos import DBOS, DBOSConfig

from .. import AssistantMessage, Message, TurnEnd
from ..otel import traced_submit
from ._agent import Agent
from ._approvals import approvals_from_json
from ._errors import DurableError
from ._journal import _TURN_ID, TurnJournal  # pyright: ignore[reportPrivateUsage]
from ._store import SqlSessionStore, engine_url

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
    ) -> dict[str, Any]:
        if self.stopping:
            raise _WorkerStopped
        summary: dict[str, Any] | None = None
        with trio.CancelScope() as scope:
            self.running.add(scope)
            try:
                async with self.limiter:
                    summary = await self._turn(agent_name, session_id, prompt, turn_id, approvals)
            finally:
                self.running.discard(scope)
                if self.stopping and not self.running:
                    self.idle.set()
        if summary is None:  # cancelled: the worker is stopping
            raise _WorkerStopped
        return summary

    async def _turn(
        self,
        agent_name: str,
        session_id: str,
        prompt: str | None,
        turn_id: str,
        approvals: Mapping[str, Any] | None,
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
        _TURN_ID.set(turn_id)  # this task's context: its tools inherit it
        end: TurnEnd | None = None
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
        self.turns_run += 1
        new = session.messages[len(history) :]
        summary = _summary(turn_id, session_id, end, new, journal.replayed_tools)
        left = session.pending_approvals
        with trio.CancelScope(shield=True):  # the turn is done: its commit must land
            summary = await trio.to_thread.run_sync(
                self.store.commit_turn, session_id, turn_id, new, summary, left
            )
        return summary


def _summary(
    turn_id: str,
    session_id: str,
    end: TurnEnd | None,
    new: Sequence[Message],
    replayed_tools: int,
) -> dict[str, Any]:
    last = next((m for m in reversed(new) if isinstance(m, AssistantMessage)), None)
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
    try:
        return trio.from_thread.run(
            worker.run_turn,
            agent_name,
            session_id,
            prompt,
            turn_id,
            approvals,
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
) -> AsyncGenerator[None]:
    """Run a durable worker in this Trio run until the block exits.

    Args:
        agents: the agents whose turns this worker runs (by name).
        database_url: ``sqlite:///file`` (the default, :func:`default_database_url`)
            or ``postgresql://...`` for workers on many machines sharing one queue.
        concurrency: turns in flight at most in this worker.
        executor_id: this worker's identity; a worker restarted with the same id
            resumes the turns its predecessor left unfinished (default ``local``).

    Raises:
        DurableError: bad arguments, or DBOS cannot start.
    """
    global _current
    items = [agents] if isinstance(agents, Agent) else list(agents)
    by_name = {a.name: a for a in items}
    if len(by_name) != len(items) or not items:
        raise DurableError("agents need distinct names, at least one")
    if isinstance(concurrency, bool) or concurrency < 1:
        raise DurableError(f"concurrency must be a positive integer, got {concurrency!r}")
    if _current is not None:
        raise DurableError("a worker already runs in this process (DBOS is one per process)")
    url = database_url or default_database_url()
    engine_url(url)  # a clear error for a bad URL, before DBOS sees it
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
    try:
        await trio.to_thread.run_sync(_launch, config, concurrency)
        try:
            yield
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


def _launch(config: DBOSConfig, concurrency: int) -> None:
    try:
        DBOS(config=config)
        DBOS.launch()
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


def _destroy() -> None:
    DBOS.destroy(workflow_completion_timeout_sec=0)


def run_worker(
    agents: Agent | Sequence[Agent],
    *,
    database_url: str | None = None,
    concurrency: int = 100,
    executor_id: str | None = None,
) -> None:
    """Run a worker until interrupted (Ctrl+C, SIGTERM): ``trio.run`` around :func:`open_worker`."""

    async def serve() -> None:
        async with open_worker(
            agents, database_url=database_url, concurrency=concurrency, executor_id=executor_id
        ):
            await trio.sleep(math.inf)

    trio.run(serve)
