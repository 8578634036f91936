"""A worker paused (SIGSTOP) past its lease is taken over; when it comes back, its
commit of the turn it no longer owns is refused and logged, and the turn is
committed once, by the worker that took it over.

On Postgres: on SQLite a process frozen inside a write transaction (which SIGSTOP
may catch it in) holds the file's one write lock, and every other worker waits for
it; SQLite is for one machine, where a paused worker is a stopped one.

The paused worker is stopped in the gate tool while the gate call's answer is still
streaming (its end stalls: tools start mid-stream), so the taker asks the model
again and both workers record that answer and the gate's result. This is where
the woken worker used to fail. Its journal write was a read then an insert, and
raced the taker's: the loser's insert failed with a duplicate key. A woken worker
that lost the race raised before its commit, so the fence was never logged (the
"over 180 s" of the old non-strict xfail). A taker that lost it failed the turn.
Now a record is one ``INSERT ... ON CONFLICT DO NOTHING`` (the first record wins),
and an error in a turn that was taken over is dropped like its result.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conftest import Workers  # pyright: ignore

import pathlib
import signal

import trio

from trio_agent.durable import DurableClient
from trio_agent.testing import check_history

LEASE = 1.0
PROMPT = "hello cut-stream"


async def test_a_paused_worker_that_comes_back_cannot_commit_a_taken_over_turn(
    tmp_path: pathlib.Path, workers: Workers, wait_for, own_postgres, turn_model
) -> None:
    url = own_postgres.url  # its own cluster: no other test's workers, dead or alive
    client = await trio.to_thread.run_sync(lambda: DurableClient.connect(url, agent="durable-test"))
    try:
        (tmp_path / "hold").touch()
        paused = workers.start(url, executor_id="paused", concurrency=1, lease=LEASE)
        handle = client.submit("fence-hana", PROMPT)
        await wait_for(
            lambda: (tmp_path / f"gate-fence-hana-{paused.pid}").exists(), "the gate", workers
        )
        paused.send_signal(signal.SIGSTOP)
        try:
            taker = workers.start(url, executor_id="taker", concurrency=1, lease=LEASE)
            (tmp_path / f"hold-{taker.pid}").touch()  # the taker holds the turn in its gate
            with trio.fail_after(LEASE + 30):
                await wait_for(
                    lambda: (tmp_path / f"gate-fence-hana-{taker.pid}").exists(),
                    "the takeover",
                    workers,
                )
            (tmp_path / "hold").unlink()  # the paused worker's gate opens when it wakes
        finally:
            paused.send_signal(signal.SIGCONT)
        # The woken worker's gate returns at once, its stalled answer ends within
        # the stall, then one model call and its commit: refused.
        with trio.fail_after(turn_model.cut_stall + 30):
            await wait_for(
                lambda: "was taken over by another worker" in workers.logs(), "fence", workers
            )
        (tmp_path / f"hold-{taker.pid}").unlink()
        with trio.fail_after(30):
            summary = await handle.wait()
        history = client.history("fence-hana")
    finally:
        client.close()
    # The paused worker was stopped before the gate call's answer was recorded: the
    # taker asked for it again (the window this test is about).
    assert turn_model.asked[PROMPT, 1] == 2, turn_model.asked
    assert summary.reason == "completed"
    assert summary.replayed_tools == 1  # the effect, recorded by the paused worker
    assert len((tmp_path / "effect-fence-hana").read_text().splitlines()) == 1
    check_history(history, strict=True)
    assert len(history) == 6  # one turn, committed once
    logs = workers.logs()
    assert "worker paused missed its lease" in logs, logs
    assert "took over worker paused" in logs, logs
    assert "Traceback" not in logs, logs  # neither worker's turn raised
    assert paused.poll() is None  # back, and working on
