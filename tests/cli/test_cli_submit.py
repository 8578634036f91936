"""``trio-agent submit`` never hides how a durable turn ended: a failed turn prints
its error (type and message) and exits 1, calls awaiting approval are listed."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest

import trio_agent.durable as durable
from trio_agent import Usage
from trio_agent._cli._main import main


def summary(**fields: Any) -> Any:
    base: dict[str, Any] = {
        "turn_id": "turn-1",
        "session_id": "alice",
        "reason": "completed",
        "turns": 1,
        "usage": Usage(),
        "text": "Hello.",
        "messages": 2,
        "replayed_tools": 0,
    }
    return durable.TurnSummary(**(base | fields))


@attrs.define
class FakeClient:
    result: Any
    submitted: list[tuple[str, str]] = attrs.Factory(list)

    def submit(self, session: str, prompt: str) -> Any:
        self.submitted.append((session, prompt))
        return _Handle(self.result)

    def close(self) -> None:
        pass


@attrs.define
class _Handle:
    summary: Any
    turn_id: str = "turn-1"

    def result(self, **options: Any) -> Any:
        assert set(options) <= {"no_worker_timeout", "on_no_worker"}  # TurnHandle's
        return self.summary


def submit(monkeypatch: pytest.MonkeyPatch, result: Any) -> int:
    fake = FakeClient(result)
    monkeypatch.setattr(durable.DurableClient, "connect", lambda *a, **k: fake)  # pyright: ignore
    return main(["submit", "alice", "hi", "--agent", "a", "--database-url", "sqlite:///x"])


def test_a_failed_turn_says_its_error_and_exits_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    error = "APIConnectionError('connection refused')"
    status = submit(monkeypatch, summary(reason="error", text="", error=error))
    out, err = capsys.readouterr()
    assert status == 1
    record = json.loads(out)
    assert record["reason"] == "error"
    assert record["error"] == error
    assert "APIConnectionError" in err
    assert "connection refused" in err


def test_pending_calls_are_printed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    result = summary(reason="awaiting_approval", text="", pending=("toolu_1", "toolu_2"))
    status = submit(monkeypatch, result)
    out, err = capsys.readouterr()
    assert status == 1
    assert json.loads(out)["pending"] == ["toolu_1", "toolu_2"]
    assert "awaits approval of 2 tool calls: toolu_1, toolu_2" in err


def test_a_completed_turn_exits_0(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert submit(monkeypatch, summary()) == 0
    out, err = capsys.readouterr()
    record = json.loads(out)
    assert record["text"] == "Hello."
    assert "error" not in record
    assert err == ""
