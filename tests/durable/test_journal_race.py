"""Two writers record the same journal key at once (a paused worker, woken after
another took its turn over, and the taker): both succeed and the first record wins.

Deterministic on Postgres: one transaction inserts the key and stays open, the
store's record of the same key is seen blocked on that row, then the transaction
commits. A read-then-insert sees no row, waits, and fails with a duplicate key.
"""

from __future__ import annotations

import pathlib

import sqlalchemy as sa
import trio

from trio_agent.durable import DurableClient, SqlSessionStore
from trio_agent.durable._store import _JOURNAL  # pyright: ignore[reportPrivateUsage]


async def _blocked_on_a_lock(store: SqlSessionStore) -> None:
    query = sa.text(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
        " AND query LIKE 'INSERT INTO trio_agent_journal%'"
    )
    with trio.fail_after(30):
        while True:
            with store.engine.connect() as conn:
                if conn.execute(query).scalar():
                    return
            await trio.sleep(0.01)


async def test_a_record_racing_an_uncommitted_one_keeps_the_first(postgres_url: str) -> None:
    # The client creates the database (DBOS's migration), and its store's tables.
    client = await trio.to_thread.run_sync(
        lambda: DurableClient.connect(postgres_url, agent="race")
    )
    store = client.store
    try:
        with store.engine.connect() as other:
            other.execute(_JOURNAL.insert().values(turn_id="race", key="k", value='"first"'))
            async with trio.open_nursery() as nursery:
                nursery.start_soon(trio.to_thread.run_sync, store.record, "race", "k", "second")
                await _blocked_on_a_lock(store)  # the record waits for the other writer
                other.commit()
        # The record returned without error, and the first value stands.
        assert store.journal("race") == {"k": "first"}
        store.record_many("race", [("k", "third"), ("j", 1), ("j", 2)])
        assert store.journal("race") == {"k": "first", "j": 1}
    finally:
        client.close()


def test_on_sqlite_the_first_record_of_a_key_wins(tmp_path: pathlib.Path) -> None:
    store = SqlSessionStore.connect(f"sqlite:///{tmp_path / 'db.sqlite'}")
    try:
        store.record("t", "model/0", {"a": 1})
        store.record("t", "model/0", {"a": 2})
        store.record_many("t", [("tool/0/x", "one"), ("model/0", 3), ("tool/0/x", "two")])
        store.record_many("t", [])
        assert store.journal("t") == {"model/0": {"a": 1}, "tool/0/x": "one"}
        assert store.journal("other") == {}
    finally:
        store.close()
