"""A worker killed with SIGKILL mid-turn, restarted: every session completes, the
histories are valid, and no tool call whose result was recorded runs again."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conftest import Workers  # pyright: ignore

import pathlib

import trio

from trio_agent import AssistantMessage, ToolResultBlock, UserMessage
from trio_agent.durable import DurableClient

SESSIONS = [f"s{i}" for i in range(4)]


def _gates(directory: pathlib.Path, session: str) -> list[pathlib.Path]:
    return list(directory.glob(f"gate-{session}-*"))


async def test_kill9_mid_turn_then_restart_resumes_without_rerunning_recorded_tools(
    tmp_path: pathlib.Path, workers: Workers, wait_for, wait_all
) -> None:
    url = f"sqlite:///{tmp_path / 'agents.sqlite'}"
    client = await trio.to_thread.run_sync(lambda: DurableClient.connect(url, agent="durable-test"))
    try:
        (tmp_path / "hold").touch()
        first = workers.start(url, executor_id="w1")
        handles = [client.submit(s, f"task {s}") for s in SESSIONS]
        # Every turn has run its effect tool (recorded) and sits in its gate tool.
        await wait_for(lambda: all(_gates(tmp_path, s) for s in SESSIONS), "the gates", workers)
        workers.kill9(first)
        assert {h.status() for h in handles} == {"PENDING"}

        (tmp_path / "hold").unlink()
        workers.start(url, executor_id="w1")
        summaries = await wait_all(client, handles, workers)
    finally:
        client.close()

    loops: set[str] = set()
    for session, summary in zip(SESSIONS, summaries, strict=True):
        assert summary.session_id == session
        assert summary.reason == "completed"
        assert summary.text == f"done: task {session}"
        assert summary.replayed_tools == 1  # the effect, answered from the record
        # The side effect happened once; the gate (never returned) ran twice.
        lines = (tmp_path / f"effect-{session}").read_text().splitlines()
        assert len(lines) == 1
        tool_use_id, key, loop = lines[0].split()
        assert key.startswith(f"{summary.turn_id}/tool/0/effect/")  # not the tool_use_id
        assert tool_use_id not in key
        loops.add(loop)
        assert len(_gates(tmp_path, session)) == 2
    # Every turn of the first worker ran on its one Trio loop.
    (loop,) = loops
    assert loop.startswith(f"{first.pid}:")

    check = DurableClient.connect(url, agent="durable-test")
    try:
        for session in SESSIONS:
            history = check.history(session)
            assert [m.role for m in history] == [
                "user",
                "assistant",
                "user",
                "assistant",
                "user",
                "assistant",
            ]
            assert history[0] == UserMessage(f"task {session}")
            results = [b for m in history if isinstance(m, UserMessage) for b in m.tool_results]
            assert all(isinstance(r, ToolResultBlock) and not r.is_error for r in results)
            assert isinstance(history[-1], AssistantMessage)
    finally:
        check.close()
