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
import trio

from trio_agent.durable import DurableClient, DurableError, TurnHandle

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
