"""A subagent under a durable worker killed with SIGKILL and restarted: once the
subagent's result is recorded, the re-run turn answers its call from the record (the
child's turn does not run again); a subagent cut mid-turn runs again, its model
calls and its tools' results answered from the records kept under the call's key."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conftest import Workers  # pyright: ignore

import collections
import json
import pathlib

import pytest
import trio

from trio_agent import TextBlock, ToolUseBlock
from trio_agent.durable import DurableClient
from trio_agent.testing import Faults, ScriptedAnswer, ScriptedModel, Timing

APP = "subagent_app:agent"
AGENT = "durable-subagent-test"
#: subagent_app.CHILD_SYSTEM (a test module never imports the app).
CHILD_SYSTEM = "You are the child helper."
FAST = Timing(first_event_delay=0.0, token_delay=0.0)


class SubagentModel(ScriptedModel):
    """Answers by conversation: the parent calls ``helper`` then ``gate`` then ends;
    the child (its requests carry the helper's system prompt) calls ``child_effect``
    then ``child_gate`` then ends. ``asked`` counts the requests by (who, step)."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: collections.Counter[tuple[str, int]] = collections.Counter()
        self.stall_child_gate = False

    def respond(self, method, path, headers, content):
        body = json.loads(content)
        who = "child" if CHILD_SYSTEM in json.dumps(body.get("system")) else "parent"
        step = sum(1 for m in body.get("messages", []) if m["role"] == "assistant")
        self.asked[who, step] += 1
        n = self.asked[who, step]  # a fresh id each time, as a re-asked model gives
        script = {
            ("parent", 0): [ToolUseBlock(f"toolu_helper_{n}", "helper", {"prompt": "sub task"})],
            ("parent", 1): [ToolUseBlock(f"toolu_gate_{n}", "gate", {})],
            ("child", 0): [ToolUseBlock(f"toolu_ceffect_{n}", "child_effect", {})],
            ("child", 1): [ToolUseBlock(f"toolu_cgate_{n}", "child_gate", {})],
        }
        blocks = script.get((who, step), [TextBlock(f"{who} done")])
        faults = Faults()
        if self.stall_child_gate and (who, step, n) == ("child", 1, 1):
            # The first child_gate answer stalls before its end: the gate runs (tools
            # start mid-stream) while the answer is not recorded, whatever the timing.
            end = len(ScriptedAnswer(blocks=blocks, timing=FAST).events()) - 2
            faults = Faults(stall_before_event=end, stall_seconds=60.0)
        self.append(ScriptedAnswer(blocks=blocks, timing=FAST, faults=faults))
        return super().respond(method, path, headers, content)


@pytest.fixture
def turn_model() -> SubagentModel:
    return SubagentModel()


async def _restart(
    tmp_path: pathlib.Path, workers: Workers, wait_for, hold: str, mark: str
) -> tuple[DurableClient, object]:
    url = f"sqlite:///{tmp_path / 'agents.sqlite'}"
    client = await trio.to_thread.run_sync(lambda: DurableClient.connect(url, agent=AGENT))
    (tmp_path / hold).touch()
    first = workers.start(url, app=APP)
    handle = client.submit("s1", "task")
    await wait_for(lambda: list(tmp_path.glob(f"{mark}-s1-*")), mark, workers)
    workers.kill9(first)
    assert handle.status() == "PENDING"
    (tmp_path / hold).unlink()
    workers.start(url, app=APP)
    return client, await handle.wait()


async def test_a_finished_subagent_is_not_run_again_after_a_restart(
    tmp_path: pathlib.Path, workers: Workers, wait_for, turn_model: SubagentModel
) -> None:
    # Killed in the parent's gate: the helper's result was recorded before it.
    client, summary = await _restart(tmp_path, workers, wait_for, "hold", "gate")
    try:
        assert summary.reason == "completed", workers.logs()
        assert summary.text == "parent done"
        assert summary.replayed_tools == 1  # the helper's call, from the record
        history = client.history("s1")
    finally:
        client.close()
    # The child's turn ran once: each of its model calls asked once, its effect once.
    assert [turn_model.asked["child", step] for step in range(3)] == [1, 1, 1]
    assert len((tmp_path / "childeffect-s1").read_text().splitlines()) == 1
    assert len(list(tmp_path.glob("childgate-s1-*"))) == 1
    assert len(list(tmp_path.glob("gate-s1-*"))) == 2  # never returned: ran again
    results = [b for m in history if m.role == "user" for b in getattr(m, "tool_results", ())]
    assert [r.content for r in results] == ["child done", "gate open"]


async def test_a_subagent_cut_mid_turn_runs_again_from_its_records(
    tmp_path: pathlib.Path, workers: Workers, wait_for, turn_model: SubagentModel
) -> None:
    # Killed in the child's gate, its answer still streaming (so not recorded): its
    # first answer and its effect were recorded.
    turn_model.stall_child_gate = True
    client, summary = await _restart(tmp_path, workers, wait_for, "hold-child", "childgate")
    try:
        assert summary.reason == "completed", workers.logs()
        assert summary.text == "parent done"
    finally:
        client.close()
    # The child ran again: its first answer came from the record (asked once), its
    # effect too (one line, the same idempotency key under the helper's call key);
    # its gate, never returned, ran twice.
    assert turn_model.asked["child", 0] == 1
    assert turn_model.asked["child", 1] == 2
    lines = (tmp_path / "childeffect-s1").read_text().splitlines()
    assert len(lines) == 1
    key = lines[0].split()[1]
    assert "/tool/0/helper/" in key
    assert key.endswith("/tool/0/child_effect/" + key.rsplit("/", 2)[-2] + "/0")
    assert len(list(tmp_path.glob("childgate-s1-*"))) == 2
    assert turn_model.asked["parent", 0] == 1  # the parent's answer: from the record
