"""The journal's writer and the rest of the per-turn cost cuts, on real databases.

- Records are written behind the turn, in order, in batches; ``flush`` waits for
  them; ``close`` drops what is not written; a failed write surfaces at the next
  record or flush as a DurableError.
- SQLite runs in WAL mode with ``synchronous=NORMAL`` on every engine.
- A worker in the submitter's process starts a submitted turn from its waker
  thread (not at the queue's next poll) and tells the waiting client when it ends.
"""

from __future__ import annotations

import pathlib
import threading
from typing import Any

import pytest
import sqlalchemy as sa
import trio

from trio_agent import AnthropicClient, Session, TextBlock, Tool, ToolUseBlock
from trio_agent.durable import (
    Agent,
    DurableClient,
    DurableError,
    SqlSessionStore,
    _worker,
    open_worker,
)
from trio_agent.durable._writer import RecordWriter
from trio_agent.testing import ScriptedAnswer, ScriptedModel, serve_scripted_model


def _store(tmp_path: pathlib.Path) -> SqlSessionStore:
    return SqlSessionStore.connect(f"sqlite:///{tmp_path / 'db.sqlite'}")


def _agent_with(base_url: str, tool: Tool) -> Agent:
    """An agent whose sessions have *tool*, on the scripted model at *base_url*."""
    model_client = AnthropicClient(api_key="k", base_url=base_url)

    def build(session_id: str) -> Session:
        return Session(model_client, [tool], model="claude-scripted", max_tokens=64)

    return Agent("w", build)


async def test_records_are_written_behind_in_order_and_in_batches(tmp_path: pathlib.Path) -> None:
    store = _store(tmp_path)
    try:
        writer = RecordWriter(store, "t")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(writer.run)
            for i in range(50):  # queued at once: a few transactions, not fifty
                writer.add(f"k{i}", i)
            writer.add("k0", "again")  # the first record of a key wins
            await writer.flush()
            assert store.journal("t") == {f"k{i}": i for i in range(50)}
            assert writer.written == 51
            assert 1 <= writer.batches < 51
            writer.add("late", 1)
            await writer.close()  # drops what is not written yet
            nursery.cancel_scope.cancel()
        assert "late" not in store.journal("t")
    finally:
        store.close()


async def test_a_stopping_worker_writes_what_is_left(tmp_path: pathlib.Path) -> None:
    store = _store(tmp_path)
    try:
        writer = RecordWriter(store, "t")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(writer.run)
            await trio.sleep(0)
            writer.add("a", 1)
            writer.add("b", 2)
            nursery.cancel_scope.cancel()  # the worker stops before the writer ran
        assert store.journal("t") == {"a": 1, "b": 2}
    finally:
        store.close()


async def test_a_batch_cut_while_it_is_written_is_still_written(tmp_path: pathlib.Path) -> None:
    # The worker stops while the writer's thread holds a batch (the thread is
    # abandoned, as a cancelled to_thread is): the batch is owed, and the stopping
    # writer writes it, not only what was queued after it.
    store = _store(tmp_path)
    gate = threading.Event()
    inserts: list[int] = []

    def hold_the_first_insert(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        if statement.lstrip().upper().startswith("INSERT"):
            inserts.append(1)
            if len(inserts) == 1:
                gate.wait(10)

    sa.event.listen(store.engine, "before_cursor_execute", hold_the_first_insert)
    try:
        writer = RecordWriter(store, "t")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(writer.run)
            writer.add("a", 1)
            while not inserts:  # the thread is inside the first batch's INSERT
                await trio.sleep(0.001)
            writer.add("b", 2)
            nursery.cancel_scope.cancel()
        assert len(inserts) == 2  # the cut batch went again, with the one after it
        gate.set()
        assert store.journal("t") == {"a": 1, "b": 2}
    finally:
        gate.set()
        store.close()


async def test_a_failed_write_surfaces_as_a_durable_error(tmp_path: pathlib.Path) -> None:
    store = _store(tmp_path)
    try:
        with store.engine.begin() as conn:
            conn.exec_driver_sql("DROP TABLE trio_agent_journal")
        writer = RecordWriter(store, "t")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(writer.run)
            writer.add("a", 1)
            with pytest.raises(DurableError, match="record in the journal"):
                await writer.flush()
            writer.add("b", 2)  # not into the tool: the next flush raises
            with pytest.raises(DurableError, match="record in the journal"):
                await writer.flush()
            await writer.close()
    finally:
        store.close()


def test_sqlite_runs_in_wal_mode_with_normal_sync(tmp_path: pathlib.Path) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    client = DurableClient.connect(url, agent="a")
    try:
        engines = [client.store.engine, client.dbos._sys_db.engine]  # pyright: ignore[reportPrivateUsage]
        for engine in engines:
            with engine.connect() as conn:
                assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
                assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL
    finally:
        client.close()
    with sa.create_engine(url).connect() as conn:  # a property of the file
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"


async def test_an_in_process_submit_is_started_by_the_waker(tmp_path: pathlib.Path) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    model = ScriptedModel([ScriptedAnswer(blocks=[TextBlock(f"hi {i}")]) for i in range(3)])
    async with serve_scripted_model(model) as base_url:
        model_client = AnthropicClient(api_key="k", base_url=base_url)

        def build(session_id: str) -> Session:
            return Session(model_client, [], model="claude-scripted", max_tokens=64)

        client = await trio.to_thread.run_sync(lambda: DurableClient.connect(url, agent="w"))
        try:
            async with open_worker(Agent("w", build), database_url=url, concurrency=4):
                waker = _worker._waker  # pyright: ignore[reportPrivateUsage]
                assert waker is not None
                assert _worker.serves(url)
                for i in range(3):
                    handle = await trio.to_thread.run_sync(client.submit, f"s{i}", "hello")
                    summary = await handle.wait()
                    assert summary.reason == "completed"
                    assert summary.text == f"hi {i}"
                # The worker's own dequeue claimed every turn (DBOS's queue thread
                # serves none of them).
                assert waker.dequeued == 3, (waker.passes, waker.dequeued)
            assert not _worker.serves(url)
        finally:
            await trio.to_thread.run_sync(client.close)


async def test_an_in_process_wait_takes_the_summary_without_reading_the_database(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client waiting in the worker's process gets the summary from the workflow as
    it returns: no look at the turn's status after it ended, no read of DBOS's
    result. The turn is held in its tool until the wait has begun, so the hand-off
    is what ran."""
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    model = ScriptedModel(
        [
            ScriptedAnswer(blocks=[ToolUseBlock("toolu_1", "Hold", {})]),
            ScriptedAnswer(blocks=[TextBlock("held and done")]),
        ]
    )

    async def hold(input: object, ctx: object) -> str:
        with trio.fail_after(30):
            while not _worker._endings:  # pyright: ignore[reportPrivateUsage]
                await trio.sleep(0.001)  # the waiter's thread registers its turn
        return "held"

    async with serve_scripted_model(model) as base_url:
        agent = _agent_with(base_url, Tool("Hold", "Hold.", {"type": "object"}, hold))
        client = await trio.to_thread.run_sync(lambda: DurableClient.connect(url, agent="w"))
        looks: list[str] = []  # each look at the status: after the turn's end or before
        real_status = SqlSessionStore.workflow_status

        def counted_status(self: SqlSessionStore, turn_id: str) -> str | None:
            ending = _worker._endings.get(turn_id)  # pyright: ignore[reportPrivateUsage]
            looks.append("after" if ending is not None and ending.is_set() else "before")
            return real_status(self, turn_id)

        monkeypatch.setattr(SqlSessionStore, "workflow_status", counted_status)
        try:
            async with open_worker(agent, database_url=url, concurrency=1):
                handle = await trio.to_thread.run_sync(client.submit, "s", "hello")
                with trio.fail_after(60):
                    summary = await handle.wait()
                assert (summary.reason, summary.text, summary.turn_id) == (
                    "completed",
                    "held and done",
                    handle.turn_id,
                )
                # The wait looks while the turn runs (another worker could run it),
                # never once it ended here: the summary came from the workflow itself.
                assert "after" not in looks, looks
                looks.clear()
                assert not _worker._endings  # pyright: ignore[reportPrivateUsage]
                # DBOS records the workflow's end right after: the same summary.
                with trio.fail_after(30):
                    while handle.status() != "SUCCESS":
                        await trio.sleep(0.01)
                again = await handle.wait()  # the turn ended before: read from DBOS
                assert again == summary
                assert looks == ["before"]
        finally:
            await trio.to_thread.run_sync(client.close)


async def test_a_worker_that_cannot_record_fails_the_turn_for_the_client(
    tmp_path: pathlib.Path,
) -> None:
    """The worker can still reach its database but not write the journal (a trigger
    refuses every insert): the turn fails (ERROR, not left pending), and the waiting
    client gets a DurableError naming the write; the tool's own result was not turned
    into an error (the journal's failure surfaces at the next model call)."""
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    model = ScriptedModel(
        [
            ScriptedAnswer(blocks=[ToolUseBlock("toolu_1", "Echo", {})]),
            ScriptedAnswer(blocks=[TextBlock("never")]),
        ]
    )
    ran: list[str] = []

    async def echo(input: object, ctx: object) -> str:
        ran.append("echo")
        return "echoed"

    async with serve_scripted_model(model) as base_url:
        agent = _agent_with(base_url, Tool("Echo", "Echo.", {"type": "object"}, echo))
        client = await trio.to_thread.run_sync(lambda: DurableClient.connect(url, agent="w"))
        try:
            async with open_worker(agent, database_url=url, concurrency=1):
                with client.store.engine.begin() as conn:  # readable, not writable
                    conn.exec_driver_sql(
                        "CREATE TRIGGER no_journal BEFORE INSERT ON trio_agent_journal"
                        " BEGIN SELECT RAISE(ABORT, 'the journal is read-only'); END"
                    )
                handle = await trio.to_thread.run_sync(client.submit, "s", "hello")
                with (
                    trio.fail_after(60),
                    pytest.raises(DurableError, match="cannot record in the journal"),
                ):
                    await handle.wait()
                assert handle.status() == "ERROR"  # failed, not left pending
        finally:
            await trio.to_thread.run_sync(client.close)
    assert ran == ["echo"]  # the turn ran up to its first record's wait
