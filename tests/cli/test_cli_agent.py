import json
from pathlib import Path

import pytest

from trio_agent import Message, TextBlock, ToolUseBlock, UserMessage
from trio_agent._cli._main import main
from trio_agent._session._transcript import TranscriptWriter
from trio_agent.testing import Faults, ScriptedAnswer, render_sse

ANSWER = ScriptedAnswer(
    blocks=[
        TextBlock("Let me look at the file."),
        ToolUseBlock("toolu_1", "Read", {"path": "README.md"}),
    ]
)


def test_run_without_a_key_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    assert main(["run", "hello"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith("trio-agent: error: ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN is not set")


def test_run_with_a_missing_workspace(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-sentinel-0123")
    assert main(["run", "hi", "--workspace", str(tmp_path / "nope")]) == 2
    _, err = capsys.readouterr()
    assert "is not a directory" in err
    assert "sk-sentinel" not in err


def test_replay_sse(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "answer.sse"
    path.write_bytes(render_sse(ANSWER))
    assert main(["replay", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Let me look at the file.\n")
    assert '→ Read({"path": "README.md"}) [toolu_1]' in out
    assert "[tool_use;" in out


def test_replay_sse_as_json_with_crlf_and_splits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "answer.sse"
    answer = ScriptedAnswer(blocks=ANSWER.blocks, faults=Faults(line_ending="\r\n", bom=True))
    path.write_bytes(render_sse(answer))
    assert main(["replay", "--json", str(path)]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {r["type"] for r in records} == {"StreamEvent"}
    assert records[0]["event"]["type"] == "message_start"
    assert records[-1]["event"]["type"] == "message_stop"


def test_replay_truncated_sse(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "answer.sse"
    path.write_bytes(render_sse(ScriptedAnswer(blocks=ANSWER.blocks, faults=Faults(truncate=True))))
    assert main(["replay", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("trio-agent: error: StreamTruncatedError")
    assert err.count("\n") == 1


def test_replay_transcript(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], history: tuple[Message, ...]
) -> None:
    path = tmp_path / "t.jsonl"
    w = TranscriptWriter.open(path, model="m")
    for m in history[:4]:
        w.append(m)
    w.close()
    assert main(["replay", str(path)]) == 0
    out = capsys.readouterr().out
    assert "> fix the bug" in out
    assert '→ Read({"path": "ft1.py"}) [t1]' in out
    assert "✓ t1: content of t1" in out
    # the last tool never finished: the replay shows the repaired history
    assert "✗ t3: interrupted: the session ended before this tool finished" in out


def test_replay_transcript_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.jsonl"
    w = TranscriptWriter.open(path, model="m")
    w.append(UserMessage([TextBlock("go")]))  # (a tool_result here would answer nothing)
    w.close()
    assert main(["replay", "--json", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    records = [json.loads(line) for line in lines]
    assert [(r["type"], r["message"]["role"]) for r in records] == [("UserMessage", "user")]


def test_replay_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", str(tmp_path / "missing")]) == 2
    assert "cannot read" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"type": "header", "model": "m"}\n{oops\n{"type": "user"}\n')
    assert main(["replay", str(bad)]) == 2
    assert "TranscriptError: line 2" in capsys.readouterr().err
