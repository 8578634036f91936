"""Context modifiers carry across model calls and turns (issue 12, item 9)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trio_agent import (
    Session,
    TextBlock,
    Tool,
    ToolContext,
    ToolOutput,
    ToolUseBlock,
    TurnEndReason,
)
from trio_agent.testing import ScriptedAnswer, ScriptedModel, check_history


def counter_tools(seen: list[tuple[str, Any]]) -> list[Tool]:
    async def bump(input: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        seen.append((ctx.tool_use_id, ctx.context))
        return ToolOutput("bumped", context_modifier=lambda c: (c or 0) + 1)

    async def peek(input: Mapping[str, Any], ctx: ToolContext) -> str:
        seen.append((ctx.tool_use_id, ctx.context))
        return f"context is {ctx.context}"

    return [
        Tool("Bump", "Add one.", {"type": "object"}, bump),
        Tool("Peek", "Look.", {"type": "object"}, peek, concurrency_safe=True),
    ]


def uses(*calls: tuple[str, str]) -> ScriptedAnswer:
    return ScriptedAnswer(blocks=[ToolUseBlock(i, name, {}) for i, name in calls])


DONE = ScriptedAnswer(blocks=[TextBlock("Done.")])


async def test_the_next_call_sees_what_the_last_one_made(autojump_clock: Any, turn: Any) -> None:
    seen: list[tuple[str, Any]] = []
    scripted = ScriptedModel(
        [uses(("b1", "Bump"), ("b2", "Bump")), uses(("p1", "Peek"), ("b3", "Bump")), DONE]
    )
    _, end = await turn(scripted.client(), tools=counter_tools(seen), context=10)
    assert end.reason is TurnEndReason.COMPLETED
    assert seen == [("b1", 10), ("b2", 11), ("p1", 12), ("b3", 12)]
    assert end.context == 13
    assert len(scripted.requests) == 3


async def test_the_session_keeps_it_across_turns(autojump_clock: Any) -> None:
    seen: list[tuple[str, Any]] = []
    scripted = ScriptedModel([uses(("b1", "Bump")), DONE, uses(("p1", "Peek")), DONE])
    session = Session(scripted.client(), counter_tools(seen), model="m", context=0)
    for prompt in ("one", "two"):
        async with session.submit(prompt) as events:
            async for _ in events:
                pass
    assert seen == [("b1", 0), ("p1", 1)]
    assert session.context == 1
    check_history(session.messages, strict=True)


async def test_without_context_tools_see_none(autojump_clock: Any, turn: Any) -> None:
    seen: list[tuple[str, Any]] = []
    scripted = ScriptedModel([uses(("p1", "Peek")), DONE])
    _, end = await turn(scripted.client(), tools=counter_tools(seen), max_tokens=None)
    assert seen == [("p1", None)]
    assert end.context is None
