"""The CLI's plain live view shows a subagent's steps under its call, indented by
depth (a subagent's subagent further in), and not its streaming text."""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

import trio

from trio_agent import TextBlock, Tool, ToolContext, ToolUseBlock, UserMessage, query, subagent
from trio_agent._cli._render import print_plain
from trio_agent._cli._timeline import TurnRecorder
from trio_agent.testing import ScriptedAnswer, ScriptedModel


async def look(input: Mapping[str, Any], ctx: ToolContext) -> str:
    ctx.progress("peeking")
    return "seen"


async def test_the_plain_view_indents_a_subagents_steps(autojump_clock: Any) -> None:
    model = ScriptedModel(
        [
            ScriptedAnswer(blocks=[ToolUseBlock("p1", "outer", {"prompt": "go deep"})]),
            ScriptedAnswer(
                blocks=[TextBlock("delegating"), ToolUseBlock("o1", "inner", {"prompt": "look"})]
            ),
            ScriptedAnswer(blocks=[ToolUseBlock("i1", "look", {"what": "x"})]),
            ScriptedAnswer(blocks=[TextBlock("inner saw it")]),
            ScriptedAnswer(blocks=[TextBlock("outer is done")]),
            ScriptedAnswer(blocks=[TextBlock("all done")]),
        ]
    )
    inner = subagent(
        "inner", "d", tools=[Tool("look", "Look.", {"type": "object"}, look)], system="i"
    )
    outer = subagent("outer", "d", tools=[inner], system="o")
    out = io.StringIO()
    recorder = TurnRecorder(trio.current_time)
    async with query(
        model.client(), [UserMessage("go")], tools=[outer], model="m", max_tokens=50
    ) as events:
        await print_plain(events, recorder, out)
    lines = out.getvalue().splitlines()
    call = lines.index('  → outer({"prompt": "go deep"})')
    steps = [line for line in lines[call + 1 :] if line.startswith("    │ ")]
    assert steps == [
        "    │ outer → inner(look)",
        "    │   inner → look(x)",
        "    │   inner │ peeking",
        "    │   inner ✓ i1",
        "    │ outer ✓ o1",
    ]
    assert not any("delegating" in line for line in lines)  # the child's text: not shown
    assert "all done" in out.getvalue()
