"""The CLI consumes the tombstone (issue 12, item 11): ``trio-agent demo --fault
reset`` shows a mid-stream recovery; the live view drops a discarded call's text and
says what happened."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from trio_agent import (
    AssistantMessage,
    AttemptDiscarded,
    ModelFallback,
    StreamTruncatedError,
    TextDelta,
    Transition,
    TransitionReason,
    UserMessage,
)
from trio_agent._cli._demo_script import demo_script
from trio_agent._cli._main import main
from trio_agent._cli._timeline import TurnRecorder
from trio_agent.lowlevel import message_from_api
from trio_agent.testing import check_history


def test_demo_fault_reset_recovers(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--json", "--speed", "8", "--fault", "reset"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    (tombstone,) = [r for r in records if r["type"] == "AttemptDiscarded"]
    assert tombstone["reason"] == "stream_retry"
    assert tombstone["model_call"] == 1
    assert tombstone["error"].startswith("StreamTruncatedError")
    assert [t["id"] for t in tombstone["started_tools"]] == ["toolu_demo_01"]
    reasons = [r["reason"] for r in records if r["type"] == "Transition"]
    answers = len(demo_script())
    assert reasons == ["stream_retry", *["next_turn"] * (answers - 1)]
    end = next(r for r in records if r["type"] == "TurnEnd")
    assert end["reason"] == "completed"
    messages = [
        message_from_api(r["message"])
        for r in records
        if r["type"] in ("AssistantMessage", "UserMessage")
    ]
    check_history([UserMessage("the demo prompt"), *messages], strict=True)
    assert len([m for m in messages if isinstance(m, AssistantMessage)]) == answers
    # the discarded attempt's started tool got its (cancelled) result, then the retry's
    results = Counter(r["tool_use_id"] for r in records if r["type"] == "ToolResult")
    assert results["toolu_demo_01"] == 2


def test_demo_fault_reset_live_view(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--speed", "8", "--fault", "reset"]) == 0
    assert f"turn ended: completed ({len(demo_script())} model calls)" in capsys.readouterr().out


def test_the_recorder_drops_a_discarded_calls_text() -> None:
    now = [0.0]
    recorder = TurnRecorder(lambda: now[0])
    events: list[Any] = [
        TextDelta("kept from call one. ", 0),
        Transition(TransitionReason.NEXT_TURN, 2, "big", 100),
        TextDelta("half an answ", 0),
        AttemptDiscarded(TransitionReason.STREAM_RETRY, 2, StreamTruncatedError("reset")),
        Transition(TransitionReason.STREAM_RETRY, 2, "big", 100),
        TextDelta("the whole answer", 0),
        ModelFallback("big", "small", ()),
    ]
    for event in events:
        recorder.feed(event)
    text = "".join(recorder.text)
    assert "half an answ" not in text
    assert text.startswith("kept from call one. ")
    assert "[model call 2 discarded after StreamTruncatedError: stream_retry]" in text
    assert "the whole answer" in text
    assert "falling back from big to small" in text
