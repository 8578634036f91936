"""What a newcomer meets, on the real command: errors in one or two lines (retries
shown as they happen), --version and usage, help with defaults, transcripts that
are continued only when asked, --allow/--deny, replay of a wrong file, a
core-only install without rich."""

from __future__ import annotations

import argparse
import builtins
import json
from pathlib import Path
from typing import Any

import pytest

import trio_agent
from trio_agent import TextBlock, ToolUseBlock, read_transcript
from trio_agent._cli._main import build_parser, main
from trio_agent._cli._session_options import split_rules
from trio_agent.testing import (
    HTTPErrorAnswer,
    ScriptedAnswer,
    ScriptedModel,
    check_history,
    serve_scripted_model,
)


async def test_an_unreachable_server_says_what_was_tried(cli: Any, tmp_path: Path) -> None:
    args = ["run", "hi", "--base-url", "http://127.0.0.1:9", "--workspace", str(tmp_path)]
    async with cli.open(args) as run:
        status = await run.wait()
    assert status == 1
    cli.clean(run.stderr)
    lines = run.stderr.splitlines()
    assert [line.split(" in ")[0] for line in lines[:2]] == [
        "trio-agent: retry 1/2",
        "trio-agent: retry 2/2",
    ]
    assert lines[2].startswith(
        "trio-agent: error: cannot reach http://127.0.0.1:9/v1/messages (3 attempts): "
    )
    assert len(lines) == 4  # and one hint


async def test_an_api_error_names_its_request_id(cli: Any, tmp_path: Path) -> None:
    model = ScriptedModel([HTTPErrorAnswer(status=401)])
    async with serve_scripted_model(model) as url:
        args = ["run", "hi", "--base-url", url, "--workspace", str(tmp_path)]
        async with cli.open(args) as run:
            status = await run.wait()
    assert status == 1
    cli.clean(run.stderr)
    (line,) = run.stderr.splitlines()
    assert line.startswith("trio-agent: error: the API answered HTTP 401 AuthenticationError")
    assert "(request id req_" in line
    assert "~$" not in run.stdout


async def test_version_and_bare_usage(cli: Any) -> None:
    async with cli.open(["--version"]) as run:
        assert await run.wait() == 0
    assert run.stdout.strip() == f"trio-agent {trio_agent.__version__}"
    async with cli.open([]) as run:
        assert await run.wait() == 0
    assert run.stdout.startswith("usage: trio-agent")
    for command in ("demo", "run", "chat", "replay", "stream"):
        assert f"    {command} " in run.stdout


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)  # type: ignore[arg-type]


def test_every_option_has_help_and_its_default() -> None:
    commands = _subcommands(build_parser())
    assert {"demo", "run", "chat", "replay", "stream"} <= set(commands)
    checked = 0
    for name, parser in commands.items():
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            assert action.help, (name, action.dest)
            text = parser.formatter_class(prog="x")._get_help_string(action) or ""
            if action.option_strings and action.default not in (None, False):
                assert "default" in text, (name, action.dest)
            checked += 1
    assert checked > 20


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "x", "--max-tokens", "0"],
        ["chat", "--max-tokens", "-1"],
        ["demo", "--speed", "nan"],
        ["run"],
        ["nonsense"],
    ],
)
def test_bad_arguments_are_usage_errors(argv: list[str], capsys: Any) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "error:" in err


WRITE_NOTE = ScriptedAnswer(
    blocks=[ToolUseBlock("toolu_w", "Write", {"file_path": "note.txt", "content": "hi\n"})]
)


async def test_a_transcript_is_continued_only_when_asked(cli: Any, tmp_path: Path) -> None:
    transcript = tmp_path / "t.jsonl"
    model = ScriptedModel(
        [ScriptedAnswer(blocks=[TextBlock("First.")]), ScriptedAnswer(blocks=[TextBlock("2nd.")])]
    )
    async with serve_scripted_model(model) as url:
        base = ["--base-url", url, "--workspace", str(tmp_path), "--transcript", str(transcript)]
        async with cli.open(["run", "one", *base]) as run:
            assert await run.wait() == 0
        before = transcript.read_bytes()
        async with cli.open(["run", "two", *base]) as run:
            assert await run.wait() == 2
        assert transcript.read_bytes() == before  # nothing appended
        assert "already holds a conversation" in run.stderr
        assert "--continue" in run.stderr
        cli.clean(run.stderr)
        async with cli.open(["run", "two", *base, "--continue"]) as run:
            assert await run.wait() == 0
    assert "continuing" in run.stderr
    history = read_transcript(transcript).messages
    check_history(history, strict=True)
    assert [m.content for m in history if m.role == "user"] == ["one", "two"]
    # the second request carried the first exchange
    assert len(model.requests[1].body["messages"]) == 3


async def test_resume_picks_up_a_crashed_session(cli: Any, tmp_path: Path) -> None:
    transcript = tmp_path / "t.jsonl"
    crashed = [
        {"type": "header", "version": 1, "model": "claude-sonnet-5-5", "system": None},
        {"type": "user", "message": {"role": "user", "content": "write a note"}},
        {"type": "assistant", "message": WRITE_NOTE.message.to_api()},
    ]
    transcript.write_text("".join(json.dumps(r) + "\n" for r in crashed) + '{"type": "us')
    model = ScriptedModel([ScriptedAnswer(blocks=[TextBlock("Resumed.")])])
    async with serve_scripted_model(model) as url:
        args = ["run", "go on", "--resume", str(transcript), "--base-url", url]
        async with cli.open([*args, "--workspace", str(tmp_path)]) as run:
            assert await run.wait() == 0
    assert "1 unfinished tool call answered as interrupted" in run.stderr
    assert "a torn last line dropped" in run.stderr
    history = read_transcript(transcript).messages
    check_history(history)
    assert "Resumed." in run.stdout
    assert not (tmp_path / "note.txt").exists()


async def test_resume_of_a_missing_or_foreign_file(cli: Any, tmp_path: Path) -> None:
    async with cli.open(["run", "x", "--resume", str(tmp_path / "nope.jsonl")]) as run:
        assert await run.wait() == 2
    assert "no transcript at" in run.stderr
    readme = tmp_path / "README.md"
    readme.write_text("# not a transcript")  # one line, no newline
    async with cli.open(["run", "x", "--resume", str(readme)]) as run:
        assert await run.wait() == 2
    assert "is not a trio-agent transcript" in run.stderr
    assert readme.read_text() == "# not a transcript"
    cli.clean(run.stderr)


async def test_allow_and_deny_flags(cli: Any, tmp_path: Path) -> None:
    answer = ScriptedAnswer(
        blocks=[
            ToolUseBlock("toolu_w", "Write", {"file_path": "note.txt", "content": "hi\n"}),
            ToolUseBlock("toolu_r", "Read", {"file_path": "note.txt"}),
        ]
    )
    model = ScriptedModel([answer, ScriptedAnswer(blocks=[TextBlock("Done.")])])
    async with serve_scripted_model(model) as url:
        args = ["run", "x", "--json", "--base-url", url, "--workspace", str(tmp_path)]
        async with cli.open([*args, "--allow", "Write(note.*)", "--deny", "Read"]) as run:
            await run.close_stdin()  # nobody answers: nothing may be asked
            assert await run.wait() == 0
    assert (tmp_path / "note.txt").read_text() == "hi\n"  # allowed without asking
    assert "Allow " not in run.stderr
    records = [json.loads(line) for line in run.stdout.splitlines()]
    results = {r["tool_use_id"]: r for r in records if r["type"] == "ToolResult"}
    assert not results["toolu_w"]["is_error"]
    assert results["toolu_r"]["is_error"]
    assert "denied by the rule 'Read'" in results["toolu_r"]["content"]


def test_split_rules() -> None:
    assert split_rules(["Read,Grep", "Bash(git a,b) Write"]) == [
        "Read",
        "Grep",
        "Bash(git a,b)",
        "Write",
    ]
    assert split_rules(None) == []


def test_replay_of_a_file_that_is_neither(tmp_path: Path, capsys: Any) -> None:
    for content in (b"just some text\n", b'{"a": 1}\n', b"\x00\xff\x10", b""):
        path = tmp_path / "f.bin"
        path.write_bytes(content)
        assert main(["replay", str(path)]) == 2
        err = capsys.readouterr().err
        assert "is neither a transcript" in err
        assert err.count("\n") == 1


def test_demo_without_rich(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    real_import = builtins.__import__

    def no_rich(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "rich" or name.startswith("rich."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_rich)
    assert main(["demo", "--speed", "8"]) == 0
    out = capsys.readouterr().out
    assert "→ Bash(" in out
    assert "    │ OK\n" in out  # Bash's output, line by line
    assert "model call 4" in out
    assert "Overlapping tools with the stream saved" in out
    assert "[bold" not in out
    assert "[/]" not in out
