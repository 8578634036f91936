"""The loop forwards progress and results with one task per model call (issue 13):
a call's progress and its ``ToolFinished`` come before its ``ToolResult``, results
come in tool_use order, each exactly once, and a model call without tools starts
no forwarding task."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trio_agent import (
    BlockFinished,
    TextBlock,
    Tool,
    ToolContext,
    ToolFinished,
    ToolProgress,
    ToolResult,
    ToolUseBlock,
    TurnEnd,
    TurnEndReason,
    UserMessage,
    query,
)
from trio_agent.testing import ScriptedAnswer, ScriptedModel, check_history

DONE = ScriptedAnswer(blocks=[TextBlock("Done.")])


def sleeper_tools() -> list[Tool]:
    async def nap(input: Mapping[str, Any], ctx: ToolContext) -> str:
        ctx.progress("half")
        await trio.sleep(float(input["s"]))
        return f"slept {input['s']}"

    return [
        Tool("Nap", "Sleep.", {"type": "object"}, nap, concurrency_safe=True),
        # Not safe: it waits for the naps before it and holds back those after it.
        Tool("Lock", "Sleep alone.", {"type": "object"}, nap),
    ]


class Counter(trio.abc.Instrument):
    def __init__(self) -> None:
        self.spawned = 0

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        self.spawned += 1


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    calls=st.lists(
        st.tuples(st.sampled_from(["Nap", "Nap", "Lock", "Nope"]), st.integers(0, 5)),
        min_size=1,
        max_size=8,
    ),
    slow_consumer=st.booleans(),
)
def test_results_follow_their_finish_in_order(
    calls: list[tuple[str, int]], slow_consumer: bool
) -> None:
    ids = [f"t{i}" for i in range(len(calls))]
    answer = ScriptedAnswer(
        blocks=[ToolUseBlock(i, name, {"s": s}) for i, (name, s) in zip(ids, calls, strict=True)]
    )
    scripted = ScriptedModel([answer, DONE])

    async def main() -> list[Any]:
        events: list[Any] = []
        async with query(
            scripted.client(),
            [UserMessage("go")],
            tools=sleeper_tools(),
            model="m",
            max_tokens=100,
        ) as stream:
            async for event in stream:
                events.append(event)
                if slow_consumer:
                    await trio.sleep(0.5)
        return events

    events = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    end = events[-1]
    assert isinstance(end, TurnEnd)
    assert end.reason is TurnEndReason.COMPLETED
    check_history(end.messages, strict=True)
    results = [e.tool_use_id for e in events if isinstance(e, ToolResult)]
    assert results == ids  # each once, in tool_use order
    for tool_id in ids:
        finished = [
            i
            for i, e in enumerate(events)
            if isinstance(e, ToolFinished) and e.tool_use_id == tool_id
        ]
        result = [
            i
            for i, e in enumerate(events)
            if isinstance(e, ToolResult) and e.tool_use_id == tool_id
        ]
        announced = [
            i
            for i, e in enumerate(events)
            if isinstance(e, BlockFinished)
            and isinstance(e.block, ToolUseBlock)
            and e.block.id == tool_id
        ]
        assert len(finished) == len(result) == len(announced) == 1
        assert announced[0] < finished[0] < result[0]
        progress = [
            i
            for i, e in enumerate(events)
            if isinstance(e, ToolProgress) and e.tool_use_id == tool_id
        ]
        assert all(p < finished[0] for p in progress)


async def test_a_call_without_tools_starts_no_forwarding_task(turn: Any) -> None:
    async def tasks_for(answers: list[ScriptedAnswer]) -> int:
        counter = Counter()
        trio.lowlevel.add_instrument(counter)
        try:
            await turn(ScriptedModel(answers).client(), tools=sleeper_tools())
        finally:
            trio.lowlevel.remove_instrument(counter)
        return counter.spawned

    text_only = await tasks_for([DONE])
    one_tool = await tasks_for([ScriptedAnswer(blocks=[ToolUseBlock("t", "Nap", {"s": 0})]), DONE])
    # The tool's own task and one forwarding task; nothing for the text-only call.
    assert one_tool - text_only == 2
