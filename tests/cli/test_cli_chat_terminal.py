"""``trio-agent chat`` on a real terminal: ``/help`` lists the commands and is never
sent to the model; readline edits lines and recalls the history (Up), which is kept
in the user's state directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from trio_agent import TextBlock
from trio_agent.testing import ScriptedAnswer, ScriptedModel, serve_scripted_model

DEADLINE = 60
UP = "\x1b[A"


async def test_help_history_and_line_editing(tmp_path: Path, cli: Any) -> None:
    scripted = ScriptedModel(
        [
            ScriptedAnswer(blocks=[TextBlock("First answer.")]),
            ScriptedAnswer(blocks=[TextBlock("Second answer.")]),
        ]
    )
    state = tmp_path / "state"
    env = cli.env(XDG_STATE_HOME=str(state), TERM="xterm")
    with trio.fail_after(DEADLINE):
        async with serve_scripted_model(scripted) as url:
            argv = ["chat", "--base-url", url, "--workspace", str(tmp_path)]
            async with cli.terminal(argv, env=env) as term:
                at = await term.until("> ")
                await term.type("/help\r")
                at = await term.until("/exit, /quit", after=at)
                at = await term.until("> ", after=at)
                await term.type("/nope\r")
                at = await term.until("unknown command /nope", after=at)
                at = await term.until("> ", after=at)
                await term.type("hello thrre\x7f\x7f\x7fere\r")  # backspace edits the line
                at = await term.until("First answer.", after=at)
                at = await term.until("> ", after=at)
                await term.type(UP + "\r")  # the last line again
                at = await term.until("Second answer.", after=at)
                await term.until("> ", after=at)
                await term.type("/exit\r")
                assert await term.process.wait() == 0
    prompts = [r.body["messages"][-1]["content"] for r in scripted.requests]
    texts = [p if isinstance(p, str) else p[0]["text"] for p in prompts]
    assert texts[0] == "hello there"
    assert texts[1] == "hello there"  # recalled with Up, not "^[[A"
    assert len(scripted.requests) == 2  # /help and /nope never reached the model
    history = (state / "trio-agent" / "chat_history").read_text()
    assert "hello there" in history
