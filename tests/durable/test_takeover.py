"""A worker killed with SIGKILL for good, never restarted: the live workers (other
executor ids) take over its pending turns once its lease runs out, and every
session completes exactly once.

The waits are real (worker processes, a real lease) but bounded: past the lease
plus 30 s the test fails, saying which turns are still not done.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conftest import Workers  # pyright: ignore

import pathlib
import time

import pytest
import trio

from trio_agent.durable import DurableClient

LEASE = 2.0
CONCURRENCY = 4


def _gate_pids(directory: pathlib.Path) -> list[int]:
    return [int(p.name.rsplit("-", 1)[1]) for p in directory.glob("gate-*")]


@pytest.mark.parametrize(
    ("backend", "survivors", "sessions"),
    [
        pytest.param("sqlite", 1, 8, id="sqlite-2-workers"),
        pytest.param("postgres", 2, 30, id="postgres-3-workers-30-sessions"),
    ],
)
async def test_a_worker_killed_for_good_has_its_turns_taken_over(
    tmp_path: pathlib.Path,
    workers: Workers,
    wait_for,
    wait_all,
    request: pytest.FixtureRequest,
    backend: str,
    survivors: int,
    sessions: int,
) -> None:
    url = (
        f"sqlite:///{tmp_path / 'agents.sqlite'}"
        if backend == "sqlite"
        else request.getfixturevalue("postgres_url")
    )
    session_ids = [f"t{i}" for i in range(sessions)]
    client = await trio.to_thread.run_sync(lambda: DurableClient.connect(url, agent="durable-test"))
    try:
        (tmp_path / "hold").touch()
        doomed = workers.start(url, executor_id="doomed", concurrency=CONCURRENCY, lease=LEASE)
        live = [
            workers.start(url, executor_id=f"live{i}", concurrency=CONCURRENCY, lease=LEASE)
            for i in range(survivors)
        ]
        handles = [client.submit(s, f"job {s}") for s in session_ids]
        everyone = sorted(p.pid for p in [doomed, *live])
        # Every worker is full: CONCURRENCY turns each, in their gate tool.
        await wait_for(
            lambda: (
                sorted(set(_gate_pids(tmp_path))) == everyone
                and len(_gate_pids(tmp_path)) == CONCURRENCY * len(everyone)
            ),
            "every worker busy",
            workers,
        )
        workers.kill9(doomed)  # never restarted
        killed_at = time.monotonic()
        (tmp_path / "hold").unlink()
        summaries = await wait_all(client, handles, workers, bound=LEASE + 30)
        took = time.monotonic() - killed_at
    finally:
        client.close()

    assert [s.session_id for s in summaries] == session_ids
    assert {s.reason for s in summaries} == {"completed"}, summaries
    for session in session_ids:
        # The side effect, recorded before the kill, happened exactly once.
        lines = (tmp_path / f"effect-{session}").read_text().splitlines()
        assert len(lines) == 1, (session, lines)
    # The doomed worker's turns were re-run elsewhere, their effect from the record.
    assert sum(s.replayed_tools for s in summaries) == CONCURRENCY
    pids = _gate_pids(tmp_path)
    assert pids.count(doomed.pid) == CONCURRENCY
    # The doomed worker's turns held a cut tool (the gate): it ran again on a
    # survivor with the same idempotency key.
    cut = [s for s in session_ids if (tmp_path / f"gate-{s}-{doomed.pid}").exists()]
    assert len(cut) == CONCURRENCY
    for session in cut:
        keys = [
            line.split()[1] for line in (tmp_path / f"gatekey-{session}").read_text().splitlines()
        ]
        assert len(keys) == 2, keys
        assert keys[0] == keys[1]
    logs = workers.logs()
    assert "took over worker doomed" in logs, logs
    print(
        f"{backend}: all {sessions} sessions done {took:.1f} s after the kill (lease {LEASE:g} s)"
    )
