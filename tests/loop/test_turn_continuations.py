"""Why a turn goes on after an answer that would end it (issue 12, items 7 and 8):
stop hooks that see ``stop_hook_active`` and a guard against hooks that always
block; the token-budget continuation."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import (
    Hooks,
    Message,
    Session,
    StopHookResult,
    TextBlock,
    Transition,
    TransitionReason,
    TurnEnd,
    TurnEndReason,
    TurnOptions,
    Usage,
)
from trio_agent.testing import ScriptedAnswer, ScriptedModel, check_history, run_virtual


def answer(text: str, output_tokens: int = 10) -> ScriptedAnswer:
    return ScriptedAnswer(
        blocks=[TextBlock(text)], usage=Usage(input_tokens=5, output_tokens=output_tokens)
    )


def reasons(events: list[Any]) -> list[TransitionReason]:
    return [e.reason for e in events if isinstance(e, Transition)]


# -- item 7: stop hooks -------------------------------------------------------------------


async def test_stop_hooks_see_stop_hook_active(autojump_clock: Any, turn: Any) -> None:
    seen: list[bool] = []

    async def hook(messages: tuple[Message, ...], *, stop_hook_active: bool) -> StopHookResult:
        seen.append(stop_hook_active)
        return StopHookResult(block=not stop_hook_active, message="Check your work.")

    scripted = ScriptedModel([answer("Done."), answer("Checked. Done.")])
    events, end = await turn(scripted.client(), options=TurnOptions(hooks=Hooks(stop=hook)))
    assert seen == [False, True]
    assert reasons(events) == [TransitionReason.STOP_HOOK_BLOCKING]
    assert end.reason is TurnEndReason.COMPLETED
    assert len(scripted.requests) == 2


@pytest.mark.parametrize("limit", [0, 1, 3])
async def test_hooks_that_keep_blocking_end_the_turn(
    autojump_clock: Any, limit: int, turn: Any
) -> None:
    calls: list[bool] = []

    async def stubborn(messages: tuple[Message, ...], *, stop_hook_active: bool) -> StopHookResult:
        calls.append(stop_hook_active)
        return StopHookResult(block=True, message="Not yet.")

    scripted = ScriptedModel([answer(f"Done {i}.") for i in range(limit + 5)])
    events, end = await turn(
        scripted.client(),
        options=TurnOptions(hooks=Hooks(stop=stubborn), max_stop_hook_blocks=limit),
    )
    # bounded model calls: the first answer plus one per allowed block
    assert len(scripted.requests) == limit + 1
    assert reasons(events) == [TransitionReason.STOP_HOOK_BLOCKING] * limit
    assert end.reason is TurnEndReason.STOP_HOOK_LIMIT
    assert "max_stop_hook_blocks" in (end.message or "")
    assert calls == [False] + [True] * limit
    # the last answer is kept: the conversation can go on
    assert end.messages[-1].text == f"Done {limit}."  # type: ignore[union-attr]


async def test_the_default_guard_holds_without_max_turns(autojump_clock: Any, turn: Any) -> None:
    async def stubborn(messages: tuple[Message, ...], *, stop_hook_active: bool) -> StopHookResult:
        return StopHookResult(block=True)

    scripted = ScriptedModel([answer(f"Done {i}.") for i in range(50)])
    _, end = await turn(scripted.client(), options=TurnOptions(hooks=Hooks(stop=stubborn)))
    assert end.reason is TurnEndReason.STOP_HOOK_LIMIT
    assert len(scripted.requests) == 9  # DEFAULT_MAX_STOP_HOOK_BLOCKS + 1


# -- item 8: token budget -------------------------------------------------------------------


async def test_under_budget_the_turn_continues(autojump_clock: Any, turn: Any) -> None:
    scripted = ScriptedModel([answer("Part one.", 300), answer("Part two.", 700)])
    events, end = await turn(scripted.client(), options=TurnOptions(token_budget=1000))
    assert reasons(events) == [TransitionReason.TOKEN_BUDGET_CONTINUATION]
    assert end.reason is TurnEndReason.COMPLETED
    assert len(scripted.requests) == 2
    nudge = scripted.requests[1].body["messages"][-1]
    assert nudge["role"] == "user"
    assert "300 / 1000" in nudge["content"]
    assert end.usage.output_tokens == 1000


async def test_diminishing_returns_end_the_budget(autojump_clock: Any, turn: Any) -> None:
    scripted = ScriptedModel([answer(f"Bit {i}.", 20) for i in range(10)])
    events, end = await turn(scripted.client(), options=TurnOptions(token_budget=100_000))
    assert reasons(events) == [TransitionReason.TOKEN_BUDGET_CONTINUATION] * 3
    assert len(scripted.requests) == 4
    assert end.reason is TurnEndReason.COMPLETED


async def test_the_session_takes_a_budget(autojump_clock: Any) -> None:
    scripted = ScriptedModel([answer("a", 100), answer("b", 900)])
    session = Session(scripted.client(), [], model="m", options=TurnOptions(token_budget=1000))
    async with session.submit("go") as events:
        async for _ in events:
            pass
    assert len(scripted.requests) == 2
    check_history(session.messages, strict=True)


@settings(max_examples=30, deadline=None)
@given(
    budget=st.integers(1, 5000),
    outputs=st.lists(st.integers(1, 2000), min_size=1, max_size=8),
)
def test_the_budget_stops_at_90_percent_or_when_the_script_ends(
    budget: int, outputs: list[int], turn: Any
) -> None:
    scripted = ScriptedModel([answer(f"p{i}", n) for i, n in enumerate(outputs)])
    ends: list[TurnEnd] = []

    async def main() -> None:
        ends.append((await turn(scripted.client(), options=TurnOptions(token_budget=budget)))[1])

    run_virtual(main)
    (end,) = ends
    calls = len(scripted.requests)
    used = sum(outputs[: min(calls, len(outputs))])
    if end.reason is TurnEndReason.COMPLETED:
        # it stopped: at 90% of the budget, or after diminishing returns
        assert used >= 0.9 * budget or (calls >= 4 and outputs[calls - 1] < 500)
        # and never before
        for i in range(calls - 1):
            assert sum(outputs[: i + 1]) < 0.9 * budget
    else:  # the script ran out while still under budget
        assert end.reason is TurnEndReason.ERROR
        assert calls == len(outputs) + 1
