"""SqlSessionStore: histories, committed turns and the turn journal in one SQL database.

The database is the durable engine's (DBOS's system database: a SQLite file or
Postgres), so a session's history lives where its turns are queued. Three tables:

- ``trio_agent_messages``: each session's history, one row per message, in order;
- ``trio_agent_turns``: each committed turn (its id is the DBOS workflow id) and
  its summary; committing a turn twice is a no-op that returns the first summary;
- ``trio_agent_sessions``: how many turns each session was given (their order);
- ``trio_agent_journal``: what a running turn recorded (each model answer, each
  tool result), so a turn re-run after a crash answers from the record;
- ``trio_agent_pending``: the tool calls of a session's last answer that await
  approval (a turn that ended ``awaiting_approval``), set and cleared with the
  turn's commit;
- ``trio_agent_workers``: each live worker's heartbeat (a counter it bumps, and
  the lease it promises to bump within), so that live workers take over a dead
  one's turns (:mod:`._takeover`).

Every method is blocking (SQLAlchemy); the worker calls them from threads. Every
database error comes out as a :class:`DurableError` (one translation, :func:`_db`).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Generator, Mapping, Sequence
from typing import Any, cast, final

import attrs
import sqlalchemy as sa
import sqlalchemy.exc
from dbos._schemas import SCHEMA_PLACEHOLDER
from dbos._schemas.system_database import SystemSchema
from sqlalchemy import event
from sqlalchemy.dialects import postgresql, sqlite

from .. import Message, PendingApprovals, TranscriptError, TrioAgentError, repair_history
from ..lowlevel import message_from_api
from ._errors import DurableError

__all__ = ["FencedError", "SqlSessionStore", "engine_url", "redact_url", "tune_sqlite"]

_META = sa.MetaData()
_MESSAGES = sa.Table(
    "trio_agent_messages",
    _META,
    sa.Column("session_id", sa.String(200), primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("turn_id", sa.String(200), nullable=True),
    sa.Column("message", sa.Text, nullable=False),
)
_TURNS = sa.Table(
    "trio_agent_turns",
    _META,
    sa.Column("turn_id", sa.String(200), primary_key=True),
    sa.Column("session_id", sa.String(200), nullable=False),
    sa.Column("summary", sa.Text, nullable=False),
)
_SESSIONS = sa.Table(
    "trio_agent_sessions",
    _META,
    sa.Column("session_id", sa.String(200), primary_key=True),
    sa.Column("submitted", sa.Integer, nullable=False),
)
_JOURNAL = sa.Table(
    "trio_agent_journal",
    _META,
    sa.Column("turn_id", sa.String(200), primary_key=True),
    sa.Column("key", sa.Text, primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)

_PENDING = sa.Table(
    "trio_agent_pending",
    _META,
    sa.Column("session_id", sa.String(200), primary_key=True),
    sa.Column("pending", sa.Text, nullable=False),
)

_WORKERS = sa.Table(
    "trio_agent_workers",
    _META,
    sa.Column("executor_id", sa.String(200), primary_key=True),
    sa.Column("beats", sa.Integer, nullable=False),
    sa.Column("lease", sa.Float, nullable=False),
)
_WORKFLOWS = SystemSchema.workflow_status


class FencedError(DurableError):
    """The turn was taken over by another worker: this worker's commit of it is refused."""


@contextlib.contextmanager
def _db(what: str) -> Generator[None]:
    """Database errors (a missing table, a read-only or vanished file, a server
    that went away) as one :class:`DurableError` naming what was being done."""
    try:
        yield
    except sqlalchemy.exc.SQLAlchemyError as exc:
        cause = getattr(exc, "orig", None) or exc
        said = str(cause).splitlines()[0] if str(cause) else type(cause).__name__
        raise DurableError(f"cannot {what}: {type(cause).__name__}: {said:.300}") from exc


_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://")


def redact_url(text: str) -> str:
    """*text* (a database URL, maybe malformed) with any ``user:password@`` password as ``***``.

    Textual, so it also works on what no URL parser accepts: everything from the
    first ``:`` after the scheme to the last ``@`` goes (a password may hold ``@``,
    ``:`` or ``/``); it may hide more than the password, never less.
    """
    at = text.rfind("@")
    if at < 0:
        return text
    scheme = _SCHEME.match(text)
    start = scheme.end() if scheme is not None and scheme.end() <= at else 0
    colon = text.find(":", start, at)
    if colon < 0:
        return text
    return f"{text[: colon + 1]}***{text[at:]}"


def engine_url(database_url: str) -> sa.URL:
    """*database_url* (``sqlite:///file`` or ``postgresql://...``) with the driver we use.

    Raises:
        DurableError: not a URL, or not SQLite or Postgres; the message never
            shows the URL's password.
    """
    if not isinstance(database_url, str):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise DurableError(f"a database URL is a string, not {type(database_url).__name__}")
    try:
        url = sa.make_url(database_url)
    except (sqlalchemy.exc.ArgumentError, ValueError):  # ValueError: a port that is no int
        # Not chained: the parser's error may quote the URL, password and all.
        shown = redact_url(database_url)
        raise DurableError(f"not a database URL: {shown!r:.200}") from None
    if url.get_backend_name() in ("postgresql", "postgres"):
        return url.set(drivername="postgresql+psycopg")
    if url.get_backend_name() == "sqlite":
        return url
    raise DurableError(f"unsupported database (sqlite or postgresql only): {url.drivername}")


def tune_sqlite(engine: sa.Engine, *, wal: bool = False) -> None:
    """On a SQLite *engine* (else nothing): each connection with ``synchronous=NORMAL``
    and, with *wal*, the database file in WAL mode (a property of the file: every
    process's connections then use it).

    Each write transaction of a rollback journal with ``synchronous=FULL`` (SQLite's
    default) waits for several fsyncs: 9-11 ms each on the 2-core machine the durable
    benchmark runs on, ten of them per turn. In WAL mode with ``NORMAL`` a commit
    waits for none (0.02 ms) and is still durable when the process dies (``kill -9``,
    a crash): only a power cut or a crash of the machine's OS may lose the last
    transactions, never consistency. A connection is tuned when it is first checked
    out of the pool, so an engine already in use (DBOS's, whose threads run) is
    tuned without disturbing its pool.
    """
    if engine.dialect.name != "sqlite":
        return
    event.listen(engine, "checkout", _tune_connection)
    if wal:
        with engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA journal_mode=WAL")


def _tune_connection(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
    if record.info.get("trio_agent_tuned"):
        return
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA synchronous=NORMAL")
    finally:
        cursor.close()
    record.info["trio_agent_tuned"] = True


def _dumps(value: Any) -> str:
    """*value* as JSON text any database can store: UTF-8 as is, unless it holds a
    lone surrogate (a string decoded with ``surrogateescape``, an opaque block read
    from the API's ``"\\ud800"``), which UTF-8 cannot carry: then escaped, every
    non-ASCII character as ``\\uXXXX`` (lossless: read back, it is the same).

    Raises:
        DurableError: *value* is not JSON (a ``datetime``, a set...).
    """
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        if not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                text = json.dumps(value, ensure_ascii=True, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError) as exc:
        raise DurableError(f"cannot store a value that is not JSON: {exc}") from exc
    return text


@final
@attrs.define(eq=False)
class SqlSessionStore:
    """The histories of durable sessions in SQL, with the durable turn's records.

    Example::

        store = SqlSessionStore.connect("sqlite:///agents.sqlite")
        store.load("alice")   # the history, valid for the API
    """

    engine: sa.Engine
    #: Where DBOS keeps its tables (``dbos`` on Postgres; SQLite has no schemas).
    system_schema: str | None = None

    @classmethod
    def connect(cls, database_url: str) -> SqlSessionStore:
        """Open the store at *database_url*, creating its tables if missing."""
        url = engine_url(database_url)
        kwargs: dict[str, Any] = {"pool_pre_ping": True}
        if url.get_backend_name() == "sqlite":
            kwargs["connect_args"] = {"timeout": 30}
        engine = sa.create_engine(url, **kwargs)
        system_schema = None if url.get_backend_name() == "sqlite" else "dbos"
        try:
            tune_sqlite(engine, wal=True)
            _META.create_all(engine, checkfirst=True)
        except (
            sqlalchemy.exc.IntegrityError
        ):  # pragma: no cover - another process created them first
            pass
        except sqlalchemy.exc.SQLAlchemyError as exc:
            engine.dispose()
            raise DurableError(f"cannot open the session store: {exc}") from exc
        return cls(engine, system_schema)

    def close(self) -> None:
        self.engine.dispose()

    # -- SessionStore ---------------------------------------------------------------

    def load(self, session_id: str) -> tuple[Message, ...]:
        """The history of *session_id* (repaired to be valid for the API, except the
        calls that await approval: see :meth:`load_pending`)."""
        return self.load_pending(session_id)[0]

    def load_pending(self, session_id: str) -> tuple[tuple[Message, ...], PendingApprovals | None]:
        """The history of *session_id* and the calls of its last answer that await
        approval (None if none do); every other tool use is answered."""
        with _db(f"read session {session_id!r}"), self.engine.connect() as conn:
            return self._load_pending(conn, session_id)

    def begin_turn(
        self, turn_id: str, session_id: str
    ) -> tuple[dict[str, Any] | None, tuple[Message, ...], PendingApprovals | None, dict[str, Any]]:
        """What a worker reads to run the turn *turn_id*, on one connection: its summary
        if it was committed (then nothing else is read), else the session's history,
        the calls awaiting approval and the turn's journal."""
        with _db(f"read turn {turn_id}"), self.engine.connect() as conn:
            summary = self._summary(conn, turn_id)
            if summary is not None:
                return summary, (), None, {}
            history, pending = self._load_pending(conn, session_id)
            return None, history, pending, self._journal(conn, turn_id)

    def _load_pending(
        self, conn: sa.Connection, session_id: str
    ) -> tuple[tuple[Message, ...], PendingApprovals | None]:
        waiting = conn.execute(
            sa.select(_PENDING.c.pending).where(_PENDING.c.session_id == session_id)
        ).scalar()
        rows = conn.execute(
            sa.select(_MESSAGES.c.seq, _MESSAGES.c.message)
            .where(_MESSAGES.c.session_id == session_id)
            .order_by(_MESSAGES.c.seq)
        ).all()
        messages: list[Message] = []
        for seq, text in rows:
            try:
                data = json.loads(text)
                if not isinstance(data, dict):
                    raise ValueError(f"not a JSON object: {text[:80]!r}")
                messages.append(message_from_api(cast(dict[str, Any], data)))
            except (TrioAgentError, ValueError, RecursionError) as exc:
                raise TranscriptError(f"session {session_id!r}, message {seq}: {exc}") from exc
        pending = None
        if waiting is not None:
            try:
                pending = PendingApprovals.from_api(json.loads(waiting))
            except (ValueError, RecursionError) as exc:
                raise TranscriptError(f"session {session_id!r}: bad pending approvals") from exc
        held: list[Message] = []
        if pending is not None and messages and pending.belongs_to(messages[-1]):
            held = [messages.pop()]  # its calls wait for approval: not repaired
        else:
            pending = None
        return (*repair_history(messages)[0], *held), pending

    def append(self, session_id: str, messages: Sequence[Message]) -> None:
        """Add *messages* at the end of *session_id*'s history, in one transaction."""
        with _db(f"append to session {session_id!r}"), self.engine.begin() as conn:
            self._insert(conn, session_id, None, messages)

    # -- turns ----------------------------------------------------------------------

    def next_turn_number(self, session_id: str) -> int:
        """Count one more turn submitted to *session_id*; its number (1, 2, ...).

        Turns of a session run in this order (it is their priority in the queue).
        """
        count = (
            self._dialect_insert(_SESSIONS)
            .values(session_id=session_id, submitted=1)
            .on_conflict_do_update(
                index_elements=[_SESSIONS.c.session_id],
                set_={"submitted": _SESSIONS.c.submitted + 1},
            )
            .returning(_SESSIONS.c.submitted)
        )  # one atomic statement: two first turns at once both count
        with _db("number a turn"), self.engine.begin() as conn:
            return int(conn.execute(count).scalar_one())

    def commit_turn(
        self,
        session_id: str,
        turn_id: str,
        messages: Sequence[Message],
        summary: Mapping[str, Any],
        pending: PendingApprovals | None = None,
        owner: str | None = None,
        replace: bool = False,
    ) -> dict[str, Any]:
        """Append a turn's *messages* and record its *summary*, all or nothing;
        *pending* (the calls the turn left awaiting approval) replaces the
        session's. With *replace*, *messages* is the session's whole new history (a
        turn that compacted it): it replaces the stored one, in the same transaction.

        Returns the summary recorded: *summary*, or the first one if *turn_id* was
        already committed (a turn re-run after its commit appends nothing).

        Raises:
            FencedError: *owner* (the DBOS execution's ownership token) no longer
                owns the turn's workflow: another worker took it over.
        """
        row = {"turn_id": turn_id, "session_id": session_id, "summary": _dumps(summary)}
        with _db(f"commit turn {turn_id}"), self.engine.begin() as conn:
            # The summary first: a turn committed before (or by a peer committing now,
            # whose row this waits for) inserts nothing, and its summary stands.
            if not conn.execute(self._insert_new(_TURNS).values(row)).rowcount:
                recorded = self._summary(conn, turn_id)
                if recorded is None:  # pragma: no cover - nothing deletes a turn's row
                    raise DurableError(f"turn {turn_id}: its committed summary is gone")
                return recorded
            if owner is not None:  # fenced: the rollback takes the summary back
                self._check_owner(conn, turn_id, owner)
            if replace:
                conn.execute(_MESSAGES.delete().where(_MESSAGES.c.session_id == session_id))
            self._insert(conn, session_id, turn_id, messages)
            conn.execute(_PENDING.delete().where(_PENDING.c.session_id == session_id))
            if pending is not None:
                conn.execute(
                    _PENDING.insert().values(
                        session_id=session_id, pending=_dumps(pending.to_api())
                    )
                )
            conn.execute(_JOURNAL.delete().where(_JOURNAL.c.turn_id == turn_id))
        return dict(summary)

    def turn_summary(self, turn_id: str) -> dict[str, Any] | None:
        """The summary of the committed turn *turn_id*, or None."""
        with _db(f"read turn {turn_id}"), self.engine.connect() as conn:
            return self._summary(conn, turn_id)

    @staticmethod
    def _summary(conn: sa.Connection, turn_id: str) -> dict[str, Any] | None:
        text = conn.execute(sa.select(_TURNS.c.summary).where(_TURNS.c.turn_id == turn_id)).scalar()
        return None if text is None else json.loads(text)

    def _insert(
        self, conn: sa.Connection, session_id: str, turn_id: str | None, messages: Sequence[Message]
    ) -> None:
        last = conn.execute(
            sa.select(sa.func.max(_MESSAGES.c.seq)).where(_MESSAGES.c.session_id == session_id)
        ).scalar()
        start = 0 if last is None else int(last) + 1
        if messages:
            conn.execute(
                _MESSAGES.insert(),
                [
                    {
                        "session_id": session_id,
                        "seq": start + i,
                        "turn_id": turn_id,
                        "message": _dumps(m.to_api()),
                    }
                    for i, m in enumerate(messages)
                ],
            )

    # -- the journal of a running turn ----------------------------------------------

    def journal(self, turn_id: str) -> dict[str, Any]:
        """Everything recorded so far by the turn *turn_id*: key -> value."""
        with _db(f"read the journal of turn {turn_id}"), self.engine.connect() as conn:
            return self._journal(conn, turn_id)

    @staticmethod
    def _journal(conn: sa.Connection, turn_id: str) -> dict[str, Any]:
        rows = conn.execute(
            sa.select(_JOURNAL.c.key, _JOURNAL.c.value).where(_JOURNAL.c.turn_id == turn_id)
        ).all()
        return {key: json.loads(value) for key, value in rows}

    def record(self, turn_id: str, key: str, value: Any) -> None:
        """Record *value* under *key* for *turn_id* (the first record of a key wins)."""
        self.record_many(turn_id, [(key, value)])

    def record_many(self, turn_id: str, records: Sequence[tuple[str, Any]]) -> None:
        """Record each ``(key, value)`` of *records* for *turn_id*, in one transaction
        (the first record of a key wins, whoever wrote it).

        One ``INSERT ... ON CONFLICT DO NOTHING``: two workers recording the same key
        at once (a paused worker woken after another took its turn over) both
        succeed, and the journal keeps the first value. A read-then-insert raced
        there: the second writer's insert failed, and the turn with it.
        """
        if not records:
            return
        try:
            rows = [{"turn_id": turn_id, "key": k, "value": _dumps(v)} for k, v in records]
        except DurableError as exc:
            raise DurableError(f"cannot record in the journal of turn {turn_id}: {exc}") from exc
        with _db(f"record in the journal of turn {turn_id}"), self.engine.begin() as conn:
            conn.execute(self._insert_new(_JOURNAL), rows)

    def _insert_new(self, table: sa.Table) -> sa.Insert:
        """``INSERT`` into *table* that skips rows whose key is already there."""
        return self._dialect_insert(table).on_conflict_do_nothing()

    def _dialect_insert(self, table: sa.Table) -> postgresql.Insert | sqlite.Insert:
        """``INSERT`` into *table* with the database's ``ON CONFLICT`` clauses."""
        if self.engine.dialect.name == "postgresql":
            return postgresql.insert(table)
        return sqlite.insert(table)

    # -- ownership of turns ---------------------------------------------------------

    def _check_owner(
        self, conn: sa.Connection, turn_id: str, owner: str, *, lock: bool = True
    ) -> None:
        query = sa.select(_WORKFLOWS.c.owner_xid).where(_WORKFLOWS.c.workflow_uuid == turn_id)
        if lock and self.system_schema is not None:
            query = query.with_for_update()  # a takeover waits for this commit, or wins
        mapped = conn.execution_options(
            schema_translate_map={SCHEMA_PLACEHOLDER: self.system_schema}
        )
        current = mapped.execute(query).scalar()
        if current != owner:
            raise FencedError(
                f"turn {turn_id} was taken over by another worker (this worker missed its"
                " lease): its result here is dropped, the other worker's stands"
            )

    def workflow_status(self, turn_id: str) -> str | None:
        """DBOS's status of the turn *turn_id*'s workflow (``ENQUEUED``, ``PENDING``,
        ``SUCCESS``...), or None if there is no such workflow: one indexed read."""
        query = sa.select(_WORKFLOWS.c.status).where(_WORKFLOWS.c.workflow_uuid == turn_id)
        with _db(f"read the status of turn {turn_id}"), self.engine.connect() as conn:
            mapped = conn.execution_options(
                schema_translate_map={SCHEMA_PLACEHOLDER: self.system_schema}
            )
            status = mapped.execute(query).scalar()
        return None if status is None else str(status)

    def check_owner(self, turn_id: str, owner: str) -> None:
        """Raise :class:`FencedError` if *owner* (a DBOS execution's ownership token) no
        longer owns the turn *turn_id*'s workflow."""
        with _db(f"read the owner of turn {turn_id}"), self.engine.connect() as conn:
            self._check_owner(conn, turn_id, owner, lock=False)

    # -- heartbeats -----------------------------------------------------------------

    def heartbeat(self, executor_id: str, lease: float) -> bool:
        """Bump *executor_id*'s heartbeat; False if its row was missing (first beat,
        or another worker took it over)."""
        with _db("write this worker's heartbeat"), self.engine.begin() as conn:
            updated = conn.execute(
                _WORKERS.update()
                .where(_WORKERS.c.executor_id == executor_id)
                .values(beats=_WORKERS.c.beats + 1, lease=lease)
            ).rowcount
            if not updated:
                conn.execute(
                    _WORKERS.insert().values(executor_id=executor_id, beats=1, lease=lease)
                )
        return bool(updated)

    def workers(self) -> dict[str, tuple[int, float]]:
        """Every worker's heartbeat: executor id -> (beats, lease in seconds)."""
        with _db("read the workers' heartbeats"), self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(_WORKERS.c.executor_id, _WORKERS.c.beats, _WORKERS.c.lease)
            ).all()
        return {str(e): (int(b), float(le)) for e, b, le in rows}

    def forget_worker(self, executor_id: str, beats: int | None = None) -> bool:
        """Remove *executor_id*'s heartbeat (only if it still is *beats*, when given):
        True if removed."""
        with _db("remove a worker's heartbeat"), self.engine.begin() as conn:
            if self.system_schema is not None:  # a peer frozen mid-heartbeat holds the row
                conn.execute(sa.text("SET LOCAL lock_timeout = '2s'"))
            query = _WORKERS.delete().where(_WORKERS.c.executor_id == executor_id)
            if beats is not None:
                query = query.where(_WORKERS.c.beats == beats)
            return bool(conn.execute(query).rowcount)
