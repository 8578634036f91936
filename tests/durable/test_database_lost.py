"""The database is part of the contract: a worker whose SQLite file is deleted or
made read-only stops with one clear error (exit 1) instead of running on; a client
waiting on a turn no worker heartbeats for gets a DurableError. Every wait bounded."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conftest import Workers  # pyright: ignore

import os
import pathlib
import signal
import subprocess

import pytest
import sqlalchemy as sa
import trio

from trio_agent.durable import DurableClient, DurableError, TurnHandle
from trio_agent.durable._takeover import MIN_PATIENCE

LEASE = 1.0


async def test_a_client_waiting_with_no_worker_gets_an_error(tmp_path: pathlib.Path) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    client = await trio.to_thread.run_sync(lambda: DurableClient.connect(url, agent="durable-test"))
    try:
        handle = client.submit("nobody", "hello?")
        with trio.fail_after(30), pytest.raises(DurableError, match="no worker has heartbeated"):
            await handle.wait(no_worker_timeout=1.0)
        assert handle.status() == "ENQUEUED"
    finally:
        client.close()


async def _exit_of(proc: subprocess.Popen[bytes], bound: float) -> int:
    with trio.move_on_after(bound):
        while proc.poll() is None:
            await trio.sleep(0.05)
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        pytest.fail(f"the worker still ran {bound:g} s after its database went away")
    return proc.returncode


@pytest.mark.parametrize("how", ["deleted", "read-only"])
async def test_a_worker_whose_sqlite_file_goes_away_stops_with_one_clear_error(
    tmp_path: pathlib.Path, workers: Workers, wait_for, how: str
) -> None:
    path = tmp_path / "db.sqlite"
    url = f"sqlite:///{path}"
    client = await trio.to_thread.run_sync(lambda: DurableClient.connect(url, agent="durable-test"))
    try:
        (tmp_path / "hold").touch()
        proc = workers.start(url, executor_id="doomed-db", lease=LEASE)
        handle = client.submit("gina", "hello")
        await wait_for(lambda: list(tmp_path.glob("gate-gina-*")), "the turn in its gate", workers)
        assert "ready" in workers.logs()
        if how == "deleted":
            for extra in ["", "-wal", "-shm"]:
                pathlib.Path(f"{path}{extra}").unlink(missing_ok=True)
        else:
            os.chmod(path, 0o444)
        code = await _exit_of(proc, 30)
        # The waiting client hears of it too: no worker heartbeats any more.
        with trio.fail_after(30), pytest.raises(DurableError):
            await handle.wait(no_worker_timeout=2 * LEASE)
    finally:
        client.close()
    logs = workers.logs()
    assert code == 1, logs
    said = ("is gone", "was deleted or replaced") if how == "deleted" else ("is read-only",)
    # The worker's last word (DBOS's own threads may log before it).
    last = logs.strip().splitlines()[-1]
    assert last.startswith("trio-agent: DurableError: worker doomed-db stopped: "), logs
    assert any(s in last for s in said), logs
    assert str(path) in last


async def test_a_worker_whose_postgres_stops_exits_after_its_lease(
    workers: Workers, wait_for, own_postgres
) -> None:
    url = own_postgres.url
    client = await trio.to_thread.run_sync(lambda: DurableClient.connect(url, agent="durable-test"))
    try:
        proc = workers.start(url, executor_id="pg-doomed-db", lease=LEASE)
        await wait_for(lambda: "ready" in workers.logs(), "the worker ready", workers)
        own_postgres.stop()
        code = await _exit_of(proc, LEASE + 30)
        handle = TurnHandle("no-such-turn", client=client)
        with trio.fail_after(30), pytest.raises(DurableError, match="cannot be read"):
            await handle.wait()
    finally:
        await trio.to_thread.run_sync(client.close)
    logs = workers.logs()
    assert code == 1, logs
    last = logs.strip().splitlines()[-1]
    assert last.startswith("trio-agent: DurableError: worker pg-doomed-db stopped: "), logs
    assert "has not been writable for 1 s" in last, logs


async def test_a_worker_whose_database_stops_answering_exits_and_hands_back_its_turn(
    tmp_path: pathlib.Path, workers: Workers, wait_for, own_postgres
) -> None:
    """A database that never answers the worker (here a lock on its heartbeat row,
    held for ever; a network that drops every packet is the same to the worker)
    stops it with one clear line within the bound, instead of a heartbeat waiting in
    silence; the turn it held goes back to the queue for the others (here another
    worker, started once it stopped), which complete it exactly once."""
    url = own_postgres.url
    client = await trio.to_thread.run_sync(lambda: DurableClient.connect(url, agent="durable-test"))
    locker = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        (tmp_path / "hold").touch()
        stuck = workers.start(url, executor_id="stuck", concurrency=1, lease=LEASE)
        handle = client.submit("ivy", "hello")
        await wait_for(lambda: list(tmp_path.glob("gate-ivy-*")), "the turn in its gate", workers)
        with locker.connect() as conn:
            conn.exec_driver_sql(
                "SELECT * FROM trio_agent_workers WHERE executor_id = 'stuck' FOR UPDATE"
            )
            code = await _exit_of(stuck, MIN_PATIENCE + LEASE + 30)
            conn.rollback()
        logs = workers.logs()
        assert code == 1, logs
        last = logs.strip().splitlines()[-1]
        assert last.startswith("trio-agent: DurableError: worker stuck stopped: "), logs
        assert f"did not answer within {MIN_PATIENCE:g} s" in last, logs
        (tmp_path / "hold").unlink()
        workers.start(url, executor_id="heir", concurrency=1, lease=LEASE)
        with trio.fail_after(LEASE * 3 + 60):
            summary = await handle.wait()
    finally:
        await trio.to_thread.run_sync(client.close)
        locker.dispose()
    assert summary.reason == "completed"
    assert summary.replayed_tools == 1  # the effect, recorded by the stuck worker
    assert len((tmp_path / "effect-ivy").read_text().splitlines()) == 1
    assert "took over worker stuck" in workers.logs()
