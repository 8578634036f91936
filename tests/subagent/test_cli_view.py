"""The CLI's plain live view shows a subagent's steps under its call, indented by
depth (a subagent's subagent further in), and not its streaming text."""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

import trio

from trio_agent import (
    TextBlock,
    Tool,
    ToolContext,
    ToolProgress,
    ToolUseBlock,
    TurnControl,
    UserMessage,
    query,
    subagent,
)
from trio_agent._cli._render import print_plain
from trio_agent._cli._timeline import TurnRecorder
from trio_agent._subagent import SubagentToolStarted
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


async def test_the_live_table_has_a_row_per_subagent_call_under_its_caller(
    autojump_clock: Any,
) -> None:
    # The rich live view (run and chat on a terminal): each call a subagent makes
    # is a row of its own, indented under the call that ran the subagent, with its
    # state and latest progress; the turn's calls keep their numbers.
    from rich.console import Console

    from trio_agent._cli._live import tools_table

    model = ScriptedModel(
        [
            ScriptedAnswer(blocks=[ToolUseBlock("p1", "outer", {"prompt": "go deep"})]),
            ScriptedAnswer(blocks=[ToolUseBlock("o1", "inner", {"prompt": "look"})]),
            ScriptedAnswer(
                blocks=[
                    ToolUseBlock("i1", "look", {"what": "x"}),
                    ToolUseBlock("i2", "fail", {}),
                ]
            ),
            ScriptedAnswer(blocks=[TextBlock("inner saw it")]),
            ScriptedAnswer(blocks=[TextBlock("outer is done")]),
            ScriptedAnswer(blocks=[TextBlock("all done")]),
        ]
    )

    async def fail(input: Mapping[str, Any], ctx: ToolContext) -> str:
        raise ValueError("no")

    inner = subagent(
        "inner",
        "d",
        tools=[
            Tool("look", "Look.", {"type": "object"}, look),
            Tool("fail", "Fail.", {"type": "object"}, fail),
        ],
        system="i",
    )
    outer = subagent("outer", "d", tools=[inner], system="o")
    recorder = TurnRecorder(trio.current_time)
    async with query(
        model.client(), [UserMessage("go")], tools=[outer], model="m", max_tokens=50
    ) as events:
        async for event in events:
            recorder.feed(event)
    (top,) = recorder.tools.values()
    assert [(r.depth, r.name, r.state) for r in top.children] == [
        (1, "inner", "done"),
        (2, "look", "done"),
        (2, "fail", "error"),
    ]
    assert top.children[1].progress == "peeking"
    console = Console(width=100, record=True, color_system=None)
    console.print(tools_table(recorder, 100))
    rows = [line.rstrip() for line in console.export_text().splitlines()]
    at = next(
        i for i, line in enumerate(rows) if line.lstrip().startswith("1 ") and "outer" in line
    )
    assert "  ↳ inner(look)" in rows[at + 1]
    assert "done" in rows[at + 1]
    assert "    ↳ look(x)" in rows[at + 2]
    assert "peeking" in rows[at + 2]
    assert "    ↳ fail" in rows[at + 3]
    assert "error" in rows[at + 3]
    assert not rows[at + 1].lstrip().startswith("1")  # a child has no call number


async def test_a_subagent_call_cut_by_an_abort_is_cancelled_in_the_table(
    autojump_clock: Any,
) -> None:
    async def slow(input: Mapping[str, Any], ctx: ToolContext) -> str:
        await trio.sleep(100)
        return "late"

    model = ScriptedModel(
        [
            ScriptedAnswer(blocks=[ToolUseBlock("p1", "outer", {"prompt": "wait"})]),
            ScriptedAnswer(blocks=[ToolUseBlock("s1", "slow", {})]),
        ]
    )
    outer = subagent("outer", "d", tools=[Tool("slow", "S.", {"type": "object"}, slow)], system="o")
    recorder = TurnRecorder(trio.current_time)
    control = TurnControl()
    async with query(
        model.client(),
        [UserMessage("go")],
        tools=[outer],
        model="m",
        max_tokens=50,
        control=control,
    ) as events:
        async for event in events:
            recorder.feed(event)
            if isinstance(event, ToolProgress) and isinstance(event.data, SubagentToolStarted):
                control.abort()
    assert recorder.end is not None
    assert recorder.end.abort_reason is not None
    (top,) = recorder.tools.values()
    assert [(r.name, r.state) for r in top.children] == [("slow", "cancelled")]
    assert top.children[0].ended_at is not None
