"""Ctrl+C on the real command: SIGINT to a subprocess; the turn is aborted and
reported, the exit status is 130, stderr holds no traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trio_agent import TextBlock, ToolUseBlock, read_transcript
from trio_agent.testing import (
    ScriptedAnswer,
    ScriptedModel,
    Timing,
    check_history,
    serve_scripted_model,
)

# A long answer: text streams for many seconds unless something stops it.
SLOW = ScriptedAnswer(
    blocks=[
        TextBlock("Reading it now. " + "Still streaming the answer. " * 200),
        ToolUseBlock("toolu_r", "Read", {"file_path": "notes.txt"}),
    ],
    timing=Timing(token_delay=0.02, text_chunk_size=4),
)


async def test_demo_json_ctrl_c_reports_the_aborted_turn(cli: Any) -> None:
    async with cli.open(["demo", "--json"]) as run:
        await run.until('"type": "TextDelta"')
        run.ctrl_c()
        status = await run.wait()
    assert status == 130
    assert "aborting the turn" in run.stderr
    cli.clean(run.stderr)
    records = [json.loads(line) for line in run.stdout.splitlines()]
    assert [r["type"] for r in records][-2:] == ["TurnEnd", "Timeline"]
    assert records[-2]["reason"].startswith("aborted_")


async def test_run_ctrl_c_mid_stream(cli: Any, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello\n")
    transcript = tmp_path / "t.jsonl"
    model = ScriptedModel([SLOW])
    async with serve_scripted_model(model) as url:
        args = ["run", "read my notes", "--json", "--base-url", url]
        args += ["--workspace", str(tmp_path), "--transcript", str(transcript)]
        async with cli.open(args) as run:
            await run.until('"type": "TextDelta"')
            run.ctrl_c()
            status = await run.wait()
    assert status == 130
    cli.clean(run.stderr)
    records = [json.loads(line) for line in run.stdout.splitlines()]
    assert all("type" in r for r in records)
    assert records[-1]["type"] == "TurnEnd"
    assert records[-1]["reason"] == "aborted_streaming"
    check_history(read_transcript(transcript).messages)


async def test_run_plain_ctrl_c_says_the_turn_ended(cli: Any, tmp_path: Path) -> None:
    model = ScriptedModel([SLOW])
    async with serve_scripted_model(model) as url:
        args = ["run", "read my notes", "--base-url", url, "--workspace", str(tmp_path)]
        async with cli.open(args) as run:
            await run.until("Reading it now.")
            run.ctrl_c()
            status = await run.wait()
    assert status == 130
    assert "[aborted_streaming; 1 model call;" in run.stdout
    assert "~$" not in run.stdout  # next to nothing was used: no "~$0.0000" noise
    cli.clean(run.stderr)


async def test_chat_ctrl_c_aborts_the_turn_not_the_program(cli: Any, tmp_path: Path) -> None:
    model = ScriptedModel([SLOW, ScriptedAnswer(blocks=[TextBlock("Second answer.")])])
    transcript = tmp_path / "chat.jsonl"
    async with serve_scripted_model(model) as url:
        args = ["chat", "--base-url", url, "--workspace", str(tmp_path)]
        args += ["--transcript", str(transcript)]
        async with cli.open(args) as run:
            await run.until("> ", where="err")
            await run.send("first question\n")
            await run.until("Reading it now.")
            run.ctrl_c()
            await run.until("[aborted_streaming;")
            await run.send("second question\n")
            await run.until("Second answer.")
            await run.send("/exit\n")
            status = await run.wait()
    assert status == 0
    cli.clean(run.stderr)
    history = read_transcript(transcript).messages
    check_history(history)
    prompts = [m.content for m in history if m.role == "user" and isinstance(m.content, str)]
    assert prompts == ["first question", "second question"]


async def test_chat_ctrl_c_twice_at_the_prompt_exits(cli: Any, tmp_path: Path) -> None:
    async with cli.open(["chat", "--workspace", str(tmp_path)]) as run:
        await run.until("> ", where="err")
        run.ctrl_c()
        await run.until("Ctrl+C again or /exit to leave", where="err")
        run.ctrl_c()
        status = await run.wait()
    assert status == 130
    assert run.stderr.rstrip().endswith("trio-agent: interrupted")
    cli.clean(run.stderr)
