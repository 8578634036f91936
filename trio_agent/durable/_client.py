"""Submitting durable turns: :class:`DurableClient`, :class:`TurnHandle`, :class:`TurnSummary`.

A client talks only to the database (DBOS's ``DBOSClient``): it enqueues turns and
reads results; any worker sharing the database runs them.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping
from typing import Any, Final, cast, final

import attrs
import trio
from dbos import DBOS, DBOSClient, EnqueueOptions, WorkflowHandle

from .. import Message, PermissionDecision, TurnEndReason, Usage
from .._session import check_session_id
from ._approvals import approvals_to_json
from ._errors import DurableError
from ._store import SqlSessionStore, engine_url, tune_sqlite
from ._worker import (
    APP_NAME,
    APP_VERSION,
    QUEUE,
    WORKFLOW,
    Ending,
    await_ending,
    default_database_url,
    forget_ending,
    serves,
    wake_queue,
)

__all__ = ["DurableClient", "TurnHandle", "TurnSummary"]

_POLL: Final = 0.05  # seconds between looks at a turn's status, at most
#: The first look's delay: a wait starts polling fast, then backs off (x1.5) to _POLL,
#: and starts again when the status changes (the turn dequeued: it may end soon).
_POLL_FIRST: Final = 0.002
_POLL_GROWTH: Final = 1.5
_WATCH: Final = 1.0  # seconds between looks at the workers' heartbeats
_DB_ATTEMPTS: Final = 5  # failed reads of the database in a row before giving up
#: Seconds a waiting client tolerates with no worker heartbeating (the default lease, twice).
NO_WORKER_TIMEOUT: Final = 60.0
#: Seconds a waiting client lets pass before it says no worker is registered at all.
NO_WORKER_NOTICE: Final = 3.0
_ACTIVE: Final = frozenset({"PENDING", "ENQUEUED", "DELAYED"})
_MAX_PRIORITY: Final = 2**31 - 1  # DBOS's bound


def _cost(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"cost_usd is not a number: {value!r:.80}")
    return float(value)


@attrs.frozen
class TurnSummary:
    """What a durable turn did: the :class:`~trio_agent.TurnEnd` facts, kept in the database.

    Attributes:
        turn_id: the turn's id (its DBOS workflow id).
        session_id: the session it belongs to.
        reason: why the turn ended.
        turns: model calls made.
        usage: their usage, summed, with its ``cost_usd`` (None: a price was unknown).
        text: the text of the turn's last answer.
        messages: how many messages the turn added to the history (a turn that
            compacted it: the messages of the new history the old one did not hold).
        replayed_tools: tool calls answered from the record (the turn was re-run).
        message: TurnEnd's explanation, if any.
        error: the repr of TurnEnd's error, if any.
        abort_reason: TurnEnd's abort reason, if any.
        pending: the tool_use ids that await approval (``reason ==
            "awaiting_approval"``); answer them with
            ``DurableClient.submit(session_id, approvals=...)``.
    """

    turn_id: str
    session_id: str
    reason: TurnEndReason | None
    turns: int
    usage: Usage
    text: str
    messages: int
    replayed_tools: int
    message: str | None = None
    error: str | None = None
    abort_reason: str | None = None
    pending: tuple[str, ...] = ()

    @classmethod
    def from_record(cls, data: Mapping[str, Any]) -> TurnSummary:
        try:
            reason = data.get("reason")
            return cls(
                turn_id=str(data["turn_id"]),
                session_id=str(data["session_id"]),
                reason=None if reason is None else TurnEndReason(reason),
                turns=int(data.get("turns", 0)),
                usage=attrs.evolve(
                    Usage.from_api(data.get("usage") or {}), cost_usd=_cost(data.get("cost_usd"))
                ),
                text=str(data.get("text", "")),
                messages=int(data.get("messages", 0)),
                replayed_tools=int(data.get("replayed_tools", 0)),
                message=data.get("message"),
                error=data.get("error"),
                abort_reason=data.get("abort_reason"),
                pending=tuple(str(i) for i in data.get("pending") or ()),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise DurableError(f"a turn summary is malformed: {exc}") from exc


@final
@attrs.define(eq=False)
class TurnHandle:
    """A submitted turn; :meth:`result` waits for its summary."""

    turn_id: str
    _client: DurableClient = attrs.field(alias="client", repr=False)

    def result(
        self,
        *,
        no_worker_timeout: float = NO_WORKER_TIMEOUT,
        on_no_worker: Callable[[], None] | None = None,
    ) -> TurnSummary:
        """Block until the turn is done; its summary.

        Never waits in silence for ever: when no worker has heartbeated for
        *no_worker_timeout* seconds (none runs, or the database went away under
        them), or the database cannot be read several times in a row, it raises.
        *on_no_worker* is called once if, :data:`NO_WORKER_NOTICE` seconds in, no
        worker is registered on the database at all (``submit`` says "waiting for a
        worker" then).

        Raises:
            DurableError: the turn failed (the worker raised), or was cancelled;
                no worker heartbeats; the database cannot be read.
        """
        clock = time.monotonic
        # A worker in this process sets it as the turn ends: then look at once.
        ending = await_ending(self.turn_id)
        try:
            return self._wait(clock, ending, no_worker_timeout, on_no_worker)
        finally:
            forget_ending(self.turn_id)

    def _wait(
        self,
        clock: Callable[[], float],
        ending: Ending,
        no_worker_timeout: float,
        on_no_worker: Callable[[], None] | None,
    ) -> TurnSummary:
        beats: dict[str, tuple[int, float]] | None = None
        started = alive_at = watched_at = clock()
        failures = 0
        status = last = ""
        # With a worker in this process, its ending hands the summary over (a turn run
        # by another process is still seen, at the queue's pace); else poll fast first.
        local = serves(self._client.url)
        first = _POLL if local else _POLL_FIRST
        delay = first
        while True:
            if ending.summary is not None:  # the workflow returned in this process
                return TurnSummary.from_record(ending.summary)
            try:
                status = self._client.store.workflow_status(self.turn_id) or ""
                if not status:
                    raise DurableError(f"there is no turn {self.turn_id}")
                if status not in _ACTIVE:
                    break
                if status != last:
                    last, delay = status, first
                if clock() - watched_at >= _WATCH:
                    watched_at = clock()
                    now = self._client.store.workers()
                    if now != beats:  # a worker beat (or one came or went)
                        beats, alive_at = now, watched_at
                    if (
                        on_no_worker is not None
                        and not now
                        and watched_at - started >= NO_WORKER_NOTICE
                    ):
                        on_no_worker()
                        on_no_worker = None
                failures = 0
            except DurableError as exc:
                failures += 1
                if failures >= _DB_ATTEMPTS:
                    raise DurableError(
                        f"waiting for turn {self.turn_id}: the database cannot be read"
                        f" ({failures} attempts): {exc}"
                    ) from exc
                time.sleep(min(1.0, _POLL * 2**failures))
                continue
            if clock() - alive_at >= no_worker_timeout:
                raise DurableError(
                    f"turn {self.turn_id} is still {status}: no worker has heartbeated for"
                    f" {no_worker_timeout:g} s (is one running on this database?)"
                )
            if not ending.wait(delay):  # set while waiting: take its summary
                delay = min(_POLL, delay * _POLL_GROWTH)
        try:
            record: Any = self._retrieve().get_result(polling_interval_sec=_POLL)
        except Exception as exc:
            raise DurableError(f"turn {self.turn_id} failed: {exc!r}") from exc
        if not isinstance(record, Mapping):
            raise DurableError(f"turn {self.turn_id} returned {type(record).__name__}")
        return TurnSummary.from_record(cast(Mapping[str, Any], record))

    async def wait(self, *, no_worker_timeout: float = NO_WORKER_TIMEOUT) -> TurnSummary:
        """:meth:`result` for Trio code (in a worker thread, abandoned on cancel)."""
        return await trio.to_thread.run_sync(
            functools.partial(self.result, no_worker_timeout=no_worker_timeout),
            abandon_on_cancel=True,
        )

    def status(self) -> str:
        """DBOS's status: ``ENQUEUED``, ``PENDING``, ``SUCCESS``, ``ERROR``...

        Raises:
            DurableError: the database cannot be read.
        """
        return self._status(self._retrieve())

    def _retrieve(self) -> WorkflowHandle[Any]:
        try:
            return self._client.dbos.retrieve_workflow(self.turn_id)
        except Exception as exc:
            raise DurableError(f"cannot read the status of turn {self.turn_id}: {exc}") from exc

    def _status(self, handle: WorkflowHandle[Any]) -> str:
        # One read of the database per look (retrieving the handle is another).
        try:
            return str(handle.get_status().status)
        except Exception as exc:
            raise DurableError(f"cannot read the status of turn {self.turn_id}: {exc}") from exc


@final
@attrs.define(eq=False)
class DurableClient:
    """Submits turns to the workers sharing *database_url*, and reads histories.

    Example::

        client = DurableClient.connect("sqlite:///agents.sqlite", agent="helper")
        handle = client.submit("alice", "What changed since yesterday?")
        print(handle.result().text)
        client.close()
    """

    dbos: DBOSClient
    store: SqlSessionStore
    agent: str
    #: The database URL as given.
    url: str = ""

    @classmethod
    def connect(cls, database_url: str | None = None, *, agent: str) -> DurableClient:
        """Connect to the database (created, with its tables, if missing)."""
        url = database_url or default_database_url()
        engine_url(url)
        try:
            DBOS.migrate(url)
            # No endless retries on a lost connection: the client says so (result()).
            dbos = DBOSClient(
                system_database_url=url, application_name=APP_NAME, retry_connection_errors=False
            )
            tune_sqlite(dbos._sys_db.engine)  # pyright: ignore[reportPrivateUsage]
        except Exception as exc:
            raise DurableError(f"cannot connect to {_safe(url)}: {exc}") from exc
        try:
            store = SqlSessionStore.connect(url)
        except BaseException:
            dbos.destroy()
            raise
        return cls(dbos, store, agent, url)

    def submit(
        self,
        session_id: str,
        prompt: str | None = None,
        *,
        approvals: Mapping[str, PermissionDecision] | None = None,
    ) -> TurnHandle:
        """Enqueue a turn of *session_id*: *prompt* as the user's message, or
        *approvals* for the calls its last turn left awaiting approval
        (``{tool_use_id: Allow() | Deny(...)}``, as ``Session.submit`` takes them);
        any process may give them, and any worker runs them.

        Turns of one session run one at a time, in submission order. Approvals
        that answer no pending call fail the turn (:meth:`TurnHandle.result`).

        Raises:
            TranscriptError: *session_id* is not a valid id.
            DurableError: the turn cannot be enqueued; neither or both of a prompt
                and approvals; approvals that are not permission decisions.
        """
        check_session_id(session_id)
        if (prompt is None) == (approvals is None):
            raise DurableError("submit() takes a prompt or approvals (one of them)")
        if prompt is not None and not isinstance(prompt, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise DurableError(f"a prompt is a string, not {type(prompt).__name__}")
        wire = None if approvals is None else approvals_to_json(approvals)
        try:
            number = self.store.next_turn_number(session_id)
            # The queue runs a session's turns by priority: in submission order.
            options: EnqueueOptions = {
                "queue_name": QUEUE,
                "workflow_name": WORKFLOW,
                "queue_partition_key": session_id,
                "app_version": APP_VERSION,
                "priority": min(number, _MAX_PRIORITY),
            }
            turn_id = self.dbos.enqueue(
                options, self.agent, session_id, prompt, wire
            ).get_workflow_id()
        except Exception as exc:
            raise DurableError(f"cannot enqueue the turn: {exc}") from exc
        wake_queue(self.url)  # a worker in this process starts it now, not at its next poll
        return TurnHandle(turn_id, client=self)

    def history(self, session_id: str) -> tuple[Message, ...]:
        """*session_id*'s history, as committed by its finished turns."""
        return self.store.load(check_session_id(session_id))

    def close(self) -> None:
        self.dbos.destroy()
        self.store.close()


def _safe(url: str) -> str:
    try:
        return engine_url(url).render_as_string(hide_password=True)
    except DurableError:  # pragma: no cover - checked before
        return "the database"
