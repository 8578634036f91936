"""Going on with a transcript, on the real command: the summary counts this run's
usage only, a file that is no transcript is called so, and a transcript written
while the server repeated a tool_use id reads back (with unique ids for the API)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trio_agent import TextBlock, ToolUseBlock, Usage, read_transcript
from trio_agent.lowlevel import message_from_api
from trio_agent.testing import ScriptedAnswer, ScriptedModel, check_history, serve_scripted_model


def _summary(stdout: str) -> str:
    (line,) = [line for line in stdout.splitlines() if line.startswith("[completed;")]
    return line


async def test_the_summary_after_continue_counts_this_run_only(cli: Any, tmp_path: Path) -> None:
    transcript = tmp_path / "t.jsonl"
    model = ScriptedModel(
        [
            ScriptedAnswer(
                blocks=[TextBlock("First.")], usage=Usage(input_tokens=1000, output_tokens=500)
            ),
            ScriptedAnswer(
                blocks=[TextBlock("2nd.")], usage=Usage(input_tokens=7, output_tokens=3)
            ),
        ]
    )
    async with serve_scripted_model(model) as url:
        base = ["--base-url", url, "--workspace", str(tmp_path), "--transcript", str(transcript)]
        async with cli.open(["run", "one", *base]) as run:
            assert await run.wait() == 0
        assert "1000 in / 500 out tokens" in _summary(run.stdout)
        async with cli.open(["run", "two", *base, "--continue"]) as run:
            assert await run.wait() == 0
    cli.clean(run.stderr)
    assert "1 model call; 7 in / 3 out tokens" in _summary(run.stdout)


async def test_a_file_that_is_no_transcript_is_called_so(cli: Any, tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    text = "# A project\n\nSome words.\n"
    readme.write_text(text)
    args = ["run", "x", "--transcript", str(readme), "--workspace", str(tmp_path)]
    async with cli.open(args) as run:
        assert await run.wait() == 2
    cli.clean(run.stderr)
    assert "is not a trio-agent transcript" in run.stderr
    assert "already holds a conversation" not in run.stderr
    assert readme.read_text() == text
    async with cli.open([*args, "--continue"]) as run:
        assert await run.wait() == 2
    cli.clean(run.stderr)
    assert "is not a trio-agent transcript" in run.stderr
    assert readme.read_text() == text


def _read(path: str) -> ScriptedAnswer:
    return ScriptedAnswer(blocks=[ToolUseBlock("toolu_1", "Read", {"file_path": path})])


async def test_a_transcript_with_a_repeated_tool_use_id_goes_on(cli: Any, tmp_path: Path) -> None:
    # Some servers number their calls per answer: toolu_1 in every turn.
    (tmp_path / "a.txt").write_text("a\n")
    (tmp_path / "b.txt").write_text("b\n")
    transcript = tmp_path / "t.jsonl"
    model = ScriptedModel(
        [
            _read("a.txt"),
            _read("b.txt"),
            ScriptedAnswer(blocks=[TextBlock("Read both.")]),
            ScriptedAnswer(blocks=[TextBlock("Going on.")]),
        ]
    )
    async with serve_scripted_model(model) as url:
        base = ["--base-url", url, "--workspace", str(tmp_path), "--transcript", str(transcript)]
        async with cli.open(["run", "read them", *base]) as run:
            assert await run.wait() == 0
        async with cli.open(["run", "go on", *base, "--continue"]) as run:
            assert await run.wait() == 0
    cli.clean(run.stderr)
    assert "Going on." in run.stdout
    history = read_transcript(transcript).messages
    check_history(history, strict=True)
    uses = [u.id for m in history if m.role == "assistant" for u in m.tool_uses]
    assert uses == ["toolu_1_2", "toolu_1"]  # the last use keeps its id
    results = [r.tool_use_id for m in history if m.role == "user" for r in m.tool_results]
    assert results == uses
    read = [r for m in history if m.role == "user" for r in m.tool_results]
    assert [r.is_error for r in read] == [False, False]  # both files were read
    # what the continued run sent: unique ids, each answered by its own result
    sent = [message_from_api(m) for m in model.requests[3].body["messages"]]
    check_history(sent, strict=True)
    assert [r.content for m in sent if m.role == "user" for r in m.tool_results] == [
        r.content for m in history if m.role == "user" for r in m.tool_results
    ]
