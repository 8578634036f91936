"""The permission question of ``run``: on a terminal it comes after the call is
shown, with the output held until it is answered; with no terminal to ask the call
is denied as such (never "The user said no."), with a hint on stderr once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio

from trio_agent import TextBlock, ToolUseBlock
from trio_agent.testing import ScriptedAnswer, ScriptedModel, serve_scripted_model

DEADLINE = 60

WRITE = ScriptedAnswer(
    blocks=[
        TextBlock("I'll write it."),
        ToolUseBlock("toolu_w", "Write", {"file_path": "note.txt", "content": "hello\n"}),
        TextBlock("AFTER the call, " + "and more " * 40 + "END."),
    ]
)


async def test_the_question_comes_after_the_call_with_the_output_held(
    tmp_path: Path, cli: Any
) -> None:
    scripted = ScriptedModel([WRITE, ScriptedAnswer(blocks=[TextBlock("Written.")])])
    with trio.fail_after(DEADLINE):
        async with serve_scripted_model(scripted) as url:
            argv = ["run", "write it", "--base-url", url, "--workspace", str(tmp_path)]
            async with cli.terminal(argv, env=cli.env()) as term:
                text = await term.until("I'll write it.")
                call = await term.until("→ Write(", after=text)
                question = await term.until("Allow Write? [y/N] ", after=call)
                while scripted.open_streams:  # the whole answer has been sent
                    await trio.sleep(0.01)
                await term.type("y\n")
                answered = await term.until("y\n", after=question)
                # The answer's end was held while the question waited: it comes after.
                end = await term.until("END.", after=answered)
                await term.until("Written.", after=end)
                await term.until("[completed")
                assert await term.process.wait() == 0
    assert (tmp_path / "note.txt").read_text() == "hello\n"
    assert term.text.count("→ Write(") == 1  # shown once, not again with its message


async def test_no_terminal_denies_and_says_so_once(tmp_path: Path, cli: Any) -> None:
    two_writes = ScriptedAnswer(
        blocks=[
            ToolUseBlock("toolu_1", "Write", {"file_path": "a.txt", "content": "a"}),
            ToolUseBlock("toolu_2", "Write", {"file_path": "b.txt", "content": "b"}),
        ]
    )
    scripted = ScriptedModel([two_writes, ScriptedAnswer(blocks=[TextBlock("OK.")])])
    with trio.fail_after(DEADLINE):
        async with serve_scripted_model(scripted) as url:
            argv = ["run", "write", "--base-url", url, "--workspace", str(tmp_path), "--json"]
            async with cli.open(argv) as run:
                await run.close_stdin()
                assert await run.wait() == 0
    message = "not allowed: no terminal to ask; pass --allow Write"
    assert run.stderr.count(message) == 1
    assert "Allow Write" not in run.stderr
    records = [json.loads(line) for line in run.stdout.splitlines()]
    results = [r for r in records if r["type"] == "ToolResult"]
    assert [r["content"] for r in results] == [message, message]
    assert all(r["is_error"] for r in results)
    assert not (tmp_path / "a.txt").exists()


def test_held_output_writes_nothing_until_the_block_ends() -> None:
    import io

    from trio_agent._cli._ask import HeldOutput

    target = io.StringIO()
    out = HeldOutput(target)
    out.write("text so far")
    out.show_call("toolu_1", "Bash", {"command": "ls"})
    with out.held():
        out.write("progress while asking\n")
        out.flush()
        assert target.getvalue() == 'text so far\n  → Bash({"command": "ls"})\n'
    assert target.getvalue().endswith("progress while asking\n")
    out.show_call("toolu_1", "Bash", {"command": "ls"})  # once only
    assert target.getvalue().count("→ Bash") == 1
