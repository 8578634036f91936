"""Each worker claims turns within its own ``--concurrency``, whatever the others'.

DBOS keeps a queue's ``worker_concurrency`` in the database: one number, shared by
every worker and overwritten by the last one to start. Before the worker dequeued
its turns itself, a worker started with 2 beside one with 6 both ran under
whichever number was written last: one claimed more turns than it runs (the rest
waited in it, out of every other worker's reach), or both were held to 2.

Here a worker with 2 and a worker with 6 share 8 sessions that wait at their gate:
exactly 2 and 6 are held, and every session then completes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conftest import Workers  # pyright: ignore

import collections
import pathlib

import pytest
import trio

from trio_agent.durable import DurableClient


def _gates_by_pid(directory: pathlib.Path) -> collections.Counter[int]:
    return collections.Counter(int(p.name.rsplit("-", 1)[1]) for p in directory.glob("gate-*"))


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_each_worker_holds_turns_up_to_its_own_concurrency(
    tmp_path: pathlib.Path,
    workers: Workers,
    wait_for,
    wait_all,
    request: pytest.FixtureRequest,
    backend: str,
) -> None:
    url = (
        f"sqlite:///{tmp_path / 'agents.sqlite'}"
        if backend == "sqlite"
        else request.getfixturevalue("postgres_url")
    )
    sessions = [f"c{i}-{backend}" for i in range(8)]
    client = await trio.to_thread.run_sync(lambda: DurableClient.connect(url, agent="durable-test"))
    try:
        (tmp_path / "hold").touch()
        big = workers.start(url, executor_id=f"big-{backend}", concurrency=6)
        small = workers.start(url, executor_id=f"small-{backend}", concurrency=2)
        handles = [client.submit(s, f"job {s}") for s in sessions]
        # Every session is held at its gate: 6 by one worker, 2 by the other. A worker
        # that claimed more than it runs would keep the other from its share.
        await wait_for(
            lambda: _gates_by_pid(tmp_path) == {big.pid: 6, small.pid: 2},
            "6 turns held by one worker and 2 by the other",
            workers,
        )
        held = {
            h.turn_id: await trio.to_thread.run_sync(client.store.workflow_status, h.turn_id)
            for h in handles
        }
        (tmp_path / "hold").unlink()
        summaries = await wait_all(client, handles, workers)
    finally:
        client.close()
    assert set(held.values()) == {"PENDING"}
    assert [s.session_id for s in summaries] == sessions
    assert {s.reason for s in summaries} == {"completed"}
    assert _gates_by_pid(tmp_path) == {big.pid: 6, small.pid: 2}
