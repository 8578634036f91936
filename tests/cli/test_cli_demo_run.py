"""``trio-agent demo`` end to end (real tools, real time, the stream sped up) and
``trio-agent run`` past the key check, on the scripted model."""

from __future__ import annotations

import argparse
import io
import json
import os
import signal
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import attrs
import pytest

from trio_agent import (
    DEFAULT_MODEL,
    AssistantMessage,
    TextBlock,
    ToolUseBlock,
    UserMessage,
    read_transcript,
)
from trio_agent._cli import _agent as cli_agent
from trio_agent._cli._main import main
from trio_agent.lowlevel import message_from_api
from trio_agent.testing import ScriptedAnswer, ScriptedModel, check_history


def test_demo_json_end_to_end(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--json", "--speed", "8"]) == 0  # real tools; the stream 8x faster
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    kinds = [r["type"] for r in records]
    assert kinds[-2:] == ["TurnEnd", "Timeline"]
    end = records[-2]
    assert (end["reason"], end["turns"]) == ("completed", 4)
    assert end["usage"]["output_tokens"] > 0
    times = [r["t"] for r in records[:-1]]
    assert times == sorted(times)

    # the history the events tell is valid: each tool_use answered exactly once
    messages = [
        message_from_api(r["message"])
        for r in records
        if r["type"] in ("AssistantMessage", "UserMessage")
    ]
    # the events carry the answers and results, not the prompt that starts the turn
    check_history([UserMessage("the demo prompt"), *messages], strict=True)
    answers = [m for m in messages if isinstance(m, AssistantMessage)]
    assert len(answers) == 4
    uses = [u for a in answers for u in a.tool_uses]
    assert [u.name for u in uses] == [
        *("Read", "Read", "Grep", "Glob", "Read", "Read"),
        *("Bash", "Write", "Edit"),
    ]
    results = Counter(r["tool_use_id"] for r in records if r["type"] == "ToolResult")
    assert results == Counter(u.id for u in uses)
    assert set(results.values()) == {1}
    started = [r["tool_use_id"] for r in records if r["type"] == "ToolStarted"]
    assert sorted(started) == sorted(u.id for u in uses)  # every tool really ran
    finished = [r for r in records if r["type"] == "ToolFinished"]
    assert not any(f["is_error"] for f in finished)

    # tools started while their answer still streamed: before its AssistantMessage
    answer_at = [i for i, k in enumerate(kinds) if k == "AssistantMessage"]
    start_at = {r["tool_use_id"]: i for i, r in enumerate(records) if r["type"] == "ToolStarted"}
    for u in answers[0].tool_uses[:4]:
        assert start_at[u.id] < answer_at[0]
    bash = answers[1].tool_uses[0]
    assert answer_at[0] < start_at[bash.id] < answer_at[1]
    # the Bash output streamed as progress lines, and the tests passed
    progress = [r["data"] for r in records if r["type"] == "ToolProgress"]
    assert "OK" in progress

    # the timeline agrees with the events
    timeline = records[-1]
    calls = timeline["calls"]
    assert [c["index"] for c in calls] == [1, 2, 3, 4]
    bash_row = next(t for t in calls[1]["tools"] if t["tool_use_id"] == bash.id)
    assert bash_row["state"] == "done"
    assert bash_row["started_at"] < calls[1]["stream_ended_at"]
    assert timeline["saved"] == pytest.approx(sum(c["saved"] for c in calls), abs=0.01)
    assert timeline["saved"] >= 0


def test_demo_live_view(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--speed", "8"]) == 0
    out = capsys.readouterr().out
    for expected in (
        "Read(README.md)",
        "Bash(",
        "Write(STATUS.md)",
        "done",
        "block 1 finished streaming: Read(README.md)",
        "stream ended",
        "model call 4",
        "Overlapping tools with the stream saved",
        "The agent wrote STATUS.md",
        "turn ended: completed (4 model calls)",
    ):
        assert expected in out, expected


def test_demo_bad_speed(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--speed", "0"]) == 2
    assert "--speed: must be positive" in capsys.readouterr().err


def run_args(tmp_path: Path, prompt: str = "Write a note.", **kw: Any) -> argparse.Namespace:
    values: dict[str, Any] = {
        "prompt": prompt,
        "model": DEFAULT_MODEL,
        "base_url": None,
        "workspace": str(tmp_path),
        "transcript": str(tmp_path / "t.jsonl"),
        "max_tokens": 1024,
        "json": False,
        "continue_": False,
        "resume": None,
        "allow": None,
        "deny": None,
    }
    return argparse.Namespace(**(values | kw))


WRITE = ScriptedAnswer(
    blocks=[
        TextBlock("I'll write it."),
        ToolUseBlock("toolu_w", "Write", {"file_path": "note.txt", "content": "hello\n"}),
        ToolUseBlock("toolu_r", "Read", {"file_path": "note.txt"}),
    ]
)


async def test_run_asks_and_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []
    monkeypatch.setattr(cli_agent, "input_line", lambda q: asked.append(q) or "y\n")
    # Answers that name a priced model: the summary shows their cost.
    model = ScriptedModel(
        [
            attrs.evolve(WRITE, model=DEFAULT_MODEL),
            ScriptedAnswer(blocks=[TextBlock("Written.")], model=DEFAULT_MODEL),
        ]
    )
    out = io.StringIO()
    args = run_args(tmp_path)
    assert await cli_agent.run_prompt(args, client=model.client(), out=out) == 0  # type: ignore[arg-type]
    assert (tmp_path / "note.txt").read_text() == "hello\n"
    assert len(asked) == 1
    assert "Allow Write(" in asked[0]  # Read is allowed without asking
    assert "→ Write(" in out.getvalue()
    assert "Written." in out.getvalue()
    assert "[completed; 2 model calls;" in out.getvalue()
    assert "; $0.0" in out.getvalue()  # the cost of the calls, at the published prices
    check_history(read_transcript(args.transcript).messages, strict=True)


async def test_run_denied_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli_agent, "input_line", lambda q: "n\n")
    model = ScriptedModel([WRITE, ScriptedAnswer(blocks=[TextBlock("OK, I won't.")])])
    out = io.StringIO()
    args = run_args(tmp_path, json=True)
    assert await cli_agent.run_prompt(args, client=model.client(), out=out) == 0  # type: ignore[arg-type]
    assert not (tmp_path / "note.txt").exists()
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    results = {r["tool_use_id"]: r for r in records if r["type"] == "ToolResult"}
    assert results["toolu_w"]["is_error"]
    assert "The user said no." in results["toolu_w"]["content"]
    assert records[-1]["type"] == "TurnEnd"


async def test_run_ctrl_c_aborts_the_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl+C while the permission prompt waits: the turn is aborted, the prompt
    abandoned, every tool_use answered, the transcript valid."""
    release = threading.Event()

    def ctrl_c_then_wait(question: str) -> str:
        os.kill(os.getpid(), signal.SIGINT)
        release.wait(10)  # only the abort can end the turn
        return "y\n"

    monkeypatch.setattr(cli_agent, "input_line", ctrl_c_then_wait)
    model = ScriptedModel([WRITE])
    out = io.StringIO()
    args = run_args(tmp_path)
    try:
        status = await cli_agent.run_prompt(args, client=model.client(), out=out)  # type: ignore[arg-type]
    finally:
        release.set()
    assert status == 130
    assert "aborting the turn" in capsys.readouterr().err
    assert "[aborted_" in out.getvalue()  # streaming or tools: when the signal lands
    assert not (tmp_path / "note.txt").exists()
    history = read_transcript(args.transcript).messages
    check_history(history, strict=True)
    assert all(r.is_error for r in history[-1].tool_results)  # type: ignore[union-attr]
