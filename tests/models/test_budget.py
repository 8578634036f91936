"""TurnOptions(max_budget_usd=...): the turn ends budget_exhausted before a call that
would start over budget, its history valid; an unenforceable budget is refused."""

from __future__ import annotations

from typing import Any

import pytest

from trio_agent import (
    DEFAULT_MODEL,
    AssistantMessage,
    Session,
    TextBlock,
    ToolUseBlock,
    TurnEndReason,
    TurnOptions,
    Usage,
    UserMessage,
    query,
    tool,
)
from trio_agent._models import cost_usd
from trio_agent.testing import ScriptedAnswer, ScriptedModel, check_history

CALL = Usage(input_tokens=10_000, output_tokens=1000)  # $0.02 + $0.01 at Sonnet 5.5


@tool
async def Read(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


def tool_call(n: int, model: str = DEFAULT_MODEL) -> ScriptedAnswer:
    return ScriptedAnswer(
        blocks=[ToolUseBlock(f"r{n}a", "Read", {"path": "a"}),
                ToolUseBlock(f"r{n}b", "Read", {"path": "b"})],
        usage=CALL, model=model,
    )  # fmt: skip


async def run(model: ScriptedModel, budget: float, name: str = DEFAULT_MODEL) -> list[Any]:
    async with query(
        model.client(),
        [UserMessage("go")],
        tools=[Read],
        model=name,
        options=TurnOptions(max_budget_usd=budget),
    ) as events:
        return [e async for e in events]


def test_the_option_is_validated() -> None:
    assert TurnOptions().max_budget_usd is None
    with pytest.raises(ValueError, match="max_budget_usd"):
        TurnOptions(max_budget_usd=0)
    with pytest.raises(TypeError, match="max_budget_usd"):
        TurnOptions(max_budget_usd="1")  # type: ignore[arg-type]


async def test_the_turn_ends_before_the_call_that_would_start_over_budget(
    autojump_clock: Any,
) -> None:
    per_call = cost_usd(CALL, DEFAULT_MODEL, "anthropic")
    assert per_call == pytest.approx(0.03)
    model = ScriptedModel([tool_call(n) for n in range(10)])
    events = await run(model, budget=0.05)  # 2 calls: $0.06 >= $0.05
    end = events[-1]
    assert end.reason is TurnEndReason.BUDGET_EXHAUSTED
    assert len(model.requests) == 2
    assert end.usage.cost_usd == pytest.approx(2 * per_call)
    assert "max_budget_usd=0.05" in (end.message or "")
    # The history is valid for the API: every tool_use answered.
    check_history(end.messages, strict=True)
    uses = [u.id for m in end.messages if isinstance(m, AssistantMessage) for u in m.tool_uses]
    assert uses == ["r0a", "r0b", "r1a", "r1b"]


async def test_under_budget_the_turn_completes(autojump_clock: Any) -> None:
    done = ScriptedAnswer(blocks=[TextBlock("done")], usage=CALL, model=DEFAULT_MODEL)
    model = ScriptedModel([tool_call(0), done])
    events = await run(model, budget=0.07)
    assert events[-1].reason is TurnEndReason.COMPLETED


async def test_an_unpriced_model_is_refused_at_the_start(autojump_clock: Any) -> None:
    model = ScriptedModel([tool_call(0)])
    with pytest.raises(ValueError, match=r"cannot be enforced.*'mystery-model-1'"):
        await run(model, budget=1.0, name="mystery-model-1")
    assert model.requests == []


async def test_a_cost_that_becomes_unknown_ends_the_turn(autojump_clock: Any) -> None:
    # The answer names a model without a price: the budget cannot be kept, so stop.
    model = ScriptedModel([tool_call(0, model="mystery-model-1"), tool_call(1)])
    events = await run(model, budget=1.0)
    end = events[-1]
    assert end.reason is TurnEndReason.BUDGET_EXHAUSTED
    assert end.usage.cost_usd is None
    assert "unknown" in (end.message or "")
    assert len(model.requests) == 1
    check_history(end.messages, strict=True)


async def test_a_session_budget_is_per_turn(autojump_clock: Any) -> None:
    done = ScriptedAnswer(blocks=[TextBlock("done")], usage=CALL, model=DEFAULT_MODEL)
    session = Session(
        ScriptedModel([done, done]).client(),
        [Read],
        model=DEFAULT_MODEL,
        options=TurnOptions(max_budget_usd=0.04),
    )
    for prompt in ("one", "two"):
        async with session.submit(prompt) as events:
            ends = [e async for e in events]
        assert ends[-1].reason is TurnEndReason.COMPLETED
    assert session.cost == pytest.approx(0.06)
