"""Session.usage with a priced model: a turn that ends takes TurnEnd's total; a turn
left before its TurnEnd prices the answers it received (the session prices them
only then, not as each one arrives)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import trio

from trio_agent import (
    DEFAULT_MODEL,
    AssistantMessage,
    Session,
    TextBlock,
    Tool,
    ToolContext,
    ToolUseBlock,
    TurnEnd,
    Usage,
)
from trio_agent._models import cost_usd
from trio_agent.testing import ScriptedAnswer, ScriptedModel


def _tools() -> list[Tool]:
    async def run(input: Mapping[str, Any], ctx: ToolContext) -> str:
        await trio.sleep(float(input.get("seconds", 1.0)))
        return "done"

    return [Tool("Read", "Read a file.", {"type": "object"}, run, concurrency_safe=True)]


def _answer(*blocks: Any, output_tokens: int) -> ScriptedAnswer:
    return ScriptedAnswer(
        blocks=list(blocks),
        usage=Usage(input_tokens=1000, output_tokens=output_tokens),
        model=DEFAULT_MODEL,
    )


async def test_a_completed_turn_counts_turn_ends_usage(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel(
        [
            _answer(ToolUseBlock("a", "Read", {}), output_tokens=20),
            _answer(TextBlock("done"), output_tokens=5),
        ]
    )
    session = Session(model.client(), _tools(), model=DEFAULT_MODEL)
    ends: list[TurnEnd] = []
    async with session.submit("go") as events:
        async for event in events:
            if isinstance(event, TurnEnd):
                ends.append(event)
    (end,) = ends
    assert end.usage.cost_usd is not None
    assert end.usage.cost_usd > 0
    assert session.usage == end.usage
    assert session.cost == end.usage.cost_usd


async def test_a_turn_left_early_prices_the_answers_it_received(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel(
        [
            _answer(ToolUseBlock("a", "Read", {"seconds": 30.0}), output_tokens=20),
            _answer(TextBlock("done"), output_tokens=5),
        ]
    )
    session = Session(model.client(), _tools(), model=DEFAULT_MODEL)
    received: list[AssistantMessage] = []
    async with session.submit("go") as events:
        async for event in events:
            if isinstance(event, AssistantMessage):
                received.append(event)
                break
    (answer,) = received
    expected = cost_usd(answer.usage, answer.model, "anthropic")
    assert expected is not None
    assert expected > 0
    assert session.usage.input_tokens == 1000
    assert session.usage.output_tokens == 20
    assert session.cost == expected
    # The next turn (the script's second answer) adds to it.
    await session.run("more")
    assert session.usage.output_tokens == 25
    assert session.cost is not None
    assert session.cost > expected
