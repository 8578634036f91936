"""A deferred approval survives across workers: a durable turn ends
``awaiting_approval``, and the approval, given from another process, is run by a
worker that continues the turn."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from conftest import Workers  # pyright: ignore

import json
import os
import pathlib
import sys

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import Allow, Defer, Deny, Reject, UserMessage
from trio_agent.durable import DurableClient, DurableError, SqlSessionStore
from trio_agent.durable._approvals import approvals_from_json, approvals_to_json
from trio_agent.testing import check_history

_APPROVE = """
import json, sys
from trio_agent import Allow
from trio_agent.durable import DurableClient
url, session, call = sys.argv[1:4]
client = DurableClient.connect(url, agent="durable-deferring")
try:
    summary = client.submit(session, approvals={call: Allow()}).result()
finally:
    client.close()
print(json.dumps({"reason": str(summary.reason), "text": summary.text}))
"""


async def test_an_approval_from_another_process_continues_the_turn(
    tmp_path: pathlib.Path, workers: Workers
) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    client = await trio.to_thread.run_sync(
        lambda: DurableClient.connect(url, agent="durable-deferring")
    )
    try:
        workers.start(url, executor_id="d1", app="durable_app:deferring")
        first = await client.submit("erin", "hello").wait()
        assert str(first.reason) == "awaiting_approval"
        (call,) = first.pending
        assert not (tmp_path / "effect-erin").exists()  # deferred: not run
        history = client.history("erin")
        assert [u.id for u in history[-1].tool_uses] == [call]  # kept, unanswered
        # a prompt is refused while the call waits
        with pytest.raises(DurableError, match="await approval"):
            await client.submit("erin", "hello again?").wait()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        approved = await trio.run_process(
            [sys.executable, "-c", _APPROVE, url, "erin", call], capture_stdout=True, env=env
        )
        summary = json.loads(approved.stdout)
        assert summary == {"reason": "completed", "text": "done: hello"}
        lines = (tmp_path / "effect-erin").read_text().splitlines()
        assert len(lines) == 1
        assert lines[0].startswith(call)
        history = client.history("erin")
        check_history(history, strict=True)
        results = history[2]
        assert isinstance(results, UserMessage)
        assert [r.tool_use_id for r in results.tool_results] == [call]
        assert history[-1].text == "done: hello"
    finally:
        client.close()


decisions = st.one_of(
    st.builds(Allow, st.none() | st.dictionaries(st.text(max_size=5), st.integers())),
    st.builds(Deny, st.text(max_size=20)),
    st.builds(Reject, st.text(max_size=20)),
    st.builds(Defer, st.text(max_size=20)),
)


@settings(max_examples=50)
@given(st.dictionaries(st.text(min_size=1, max_size=10), decisions, max_size=4))
def test_approvals_round_trip_through_json(approvals: dict[str, Any]) -> None:
    wire = json.loads(json.dumps(approvals_to_json(approvals)))
    assert approvals_from_json(wire) == approvals


@pytest.mark.parametrize(
    "bad",
    [
        None,
        [],
        {"a": 1},
        {"a": {"decision": "maybe"}},
        {"a": {"decision": "deny"}},
        {"a": {"decision": "allow", "updated_input": [1]}},
    ],
)
def test_malformed_approvals_are_refused(bad: Any) -> None:
    with pytest.raises(DurableError):
        approvals_from_json(bad)


def test_submit_refuses_bad_approvals(tmp_path: pathlib.Path) -> None:
    client = DurableClient.connect(f"sqlite:///{tmp_path / 'db.sqlite'}", agent="a")
    try:
        with pytest.raises(DurableError, match="not Allow, Deny"):
            client.submit("s", approvals={"t": "yes"})  # type: ignore[dict-item]
        with pytest.raises(DurableError, match="a prompt or approvals"):
            client.submit("s")
        with pytest.raises(DurableError, match="a prompt or approvals"):
            client.submit("s", "hi", approvals={"t": Allow()})
    finally:
        client.close()


def test_the_store_keeps_pending_calls_unanswered_until_they_are_not(
    tmp_path: pathlib.Path,
) -> None:
    import sqlalchemy as sa

    from trio_agent import (
        AssistantMessage,
        PendingApprovals,
        ToolResultBlock,
        ToolUseBlock,
        TranscriptError,
    )

    store = SqlSessionStore.connect(f"sqlite:///{tmp_path / 'db.sqlite'}")
    try:
        b, r = ToolUseBlock("b", "Bash", {}), ToolUseBlock("r", "Read", {})
        answer = AssistantMessage(id="m1", model="m", content=(b, r))
        pending = PendingApprovals((b,), (ToolResultBlock("r", "ok"),))
        turn = [UserMessage("go"), answer]
        store.commit_turn("s", "turn-1", turn, {"turn_id": "turn-1"}, pending)
        assert store.load_pending("s") == (tuple(turn), pending)
        # a later message (appended without the turn machinery) answers them: repaired
        store.append("s", [UserMessage([ToolResultBlock("b", "no"), ToolResultBlock("r", "ok")])])
        messages, left = store.load_pending("s")
        assert left is None
        check_history(messages, strict=True)
        # a turn committed without pending calls clears the row
        store.commit_turn("s", "turn-2", [], {"turn_id": "turn-2"}, None)
        with store.engine.connect() as conn:
            rows = conn.execute(sa.text("select count(*) from trio_agent_pending")).scalar()
        assert rows == 0
        # a corrupt row is a clear error
        with store.engine.begin() as conn:
            conn.execute(sa.text("insert into trio_agent_pending values ('s', '{\"calls\": 5')"))
        with pytest.raises(TranscriptError, match="bad pending approvals"):
            store.load("s")
    finally:
        store.close()
