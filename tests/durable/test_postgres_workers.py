"""Postgres: two worker processes share one queue; one is killed with SIGKILL
mid-turn and restarted; every session completes once."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conftest import Workers  # pyright: ignore

import os
import pathlib

import trio

from trio_agent.durable import DurableClient

SESSIONS = [f"pg{i}" for i in range(16)]
CONCURRENCY = 4


def _gate_pids(directory: pathlib.Path) -> list[int]:
    return [int(p.name.rsplit("-", 1)[1]) for p in directory.glob("gate-*")]


async def test_two_workers_share_a_queue_and_survive_a_kill(
    tmp_path: pathlib.Path, workers: Workers, wait_for, postgres_url: str
) -> None:
    client = await trio.to_thread.run_sync(
        lambda: DurableClient.connect(postgres_url, agent="durable-test")
    )
    try:
        (tmp_path / "hold").touch()
        first = workers.start(postgres_url, executor_id="pg-w1", concurrency=CONCURRENCY)
        second = workers.start(postgres_url, executor_id="pg-w2", concurrency=CONCURRENCY)
        handles = [client.submit(s, f"job {s}") for s in SESSIONS]
        # Both workers are full: CONCURRENCY turns each, waiting in their gate tool.
        await wait_for(
            lambda: (
                sorted(set(_gate_pids(tmp_path))) == sorted([first.pid, second.pid])
                and len(_gate_pids(tmp_path)) == 2 * CONCURRENCY
            ),
            "both workers busy",
            workers,
        )
        workers.kill9(first)
        (tmp_path / "hold").unlink()
        workers.start(postgres_url, executor_id="pg-w1", concurrency=CONCURRENCY)
        summaries = [await h.wait() for h in handles]
    finally:
        client.close()

    assert [s.session_id for s in summaries] == SESSIONS
    assert {s.reason for s in summaries} == {"completed"}
    # Each session's side effect happened exactly once, across the kill.
    for session in SESSIONS:
        assert len((tmp_path / f"effect-{session}").read_text().splitlines()) == 1
    # The killed worker's turns were resumed, answering their effect from the record.
    assert sum(s.replayed_tools for s in summaries) == CONCURRENCY
    pids = _gate_pids(tmp_path)
    assert pids.count(first.pid) == CONCURRENCY
    assert second.pid in pids
    assert os.getpid() not in pids
