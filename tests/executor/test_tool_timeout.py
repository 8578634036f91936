"""Per-tool timeout and the executor / query / Session default, in virtual time."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

import trio_agent
from trio_agent import (
    Allow,
    Session,
    TextBlock,
    Tool,
    ToolContext,
    ToolResult,
    ToolUseBlock,
    TurnEnd,
    TurnEndReason,
    TurnOptions,
)
from trio_agent.testing import ScriptedAnswer, ScriptedModel

SCHEMA: dict[str, Any] = {"type": "object", "properties": {"seconds": {"type": "integer"}}}


def sleeper(name: str, log: dict[str, float], **kw: Any) -> Tool:
    """A tool that sleeps ``input["seconds"]``; *log* gets when it ended or was cancelled."""

    async def run(input: Mapping[str, Any], ctx: ToolContext) -> str:
        try:
            await trio.sleep(input["seconds"])
        finally:
            log[ctx.tool_use_id] = trio.current_time()
        return f"slept {input['seconds']}"

    return Tool(name, "Sleeps.", SCHEMA, run, concurrency_safe=True, **kw)


# Durations are whole seconds and timeouts end in .5: never a tie.
CALLS = st.lists(
    st.tuples(st.integers(0, 6), st.none() | st.integers(0, 5).map(lambda n: n + 0.5)),
    min_size=1,
    max_size=6,
)


@settings(max_examples=40, deadline=None)
@given(CALLS, st.none() | st.integers(0, 5).map(lambda n: n + 0.5))
def test_each_call_runs_until_done_or_its_timeout(
    run_calls: Any, calls: list[tuple[int, float | None]], default: float | None
) -> None:
    log: dict[str, float] = {}
    tools = [sleeper(f"T{i}", log, timeout=timeout) for i, (_, timeout) in enumerate(calls)]
    blocks = [ToolUseBlock(f"c{i}", f"T{i}", {"seconds": s}) for i, (s, _) in enumerate(calls)]

    async def main() -> list[ToolResult]:
        return await run_calls(
            tools, blocks, options=TurnOptions(tool_timeout=default, max_tool_concurrency=10)
        )

    results = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    for i, (seconds, timeout) in enumerate(calls):
        limit = timeout if timeout is not None else default
        result = results[i]
        assert result.started
        if limit is not None and limit < seconds:
            assert result.is_error
            assert result.content == f"Error: T{i} timed out after {limit:g} s"
            assert log[f"c{i}"] == limit  # cancelled at its deadline
        else:  # the others are unaffected
            assert (result.is_error, result.content) == (False, f"slept {seconds}")
            assert log[f"c{i}"] == seconds


async def test_the_permission_wait_does_not_count(
    autojump_clock: trio.testing.MockClock, run_calls: Any
) -> None:
    log: dict[str, float] = {}
    asked: list[str] = []

    async def slow_yes(tool: Tool, input: Mapping[str, Any], ctx: ToolContext) -> Allow:
        asked.append(ctx.tool_use_id)
        await trio.sleep(10)
        return Allow()

    (result,) = await run_calls(
        [sleeper("T", log, timeout=2)],
        [ToolUseBlock("a", "T", {"seconds": 1})],
        options=TurnOptions(can_use_tool=slow_yes),
    )
    assert asked == ["a"]
    assert result.content == "slept 1"
    assert log["a"] == 11


async def test_a_timed_out_cascading_tool_cancels_its_siblings(
    autojump_clock: trio.testing.MockClock, run_calls: Any
) -> None:
    log: dict[str, float] = {}
    bash, other = await run_calls(
        [sleeper("Bash", log, timeout=1, cancels_siblings_on_error=True), sleeper("T", log)],
        [ToolUseBlock("b", "Bash", {"seconds": 5}), ToolUseBlock("t", "T", {"seconds": 5})],
    )
    assert bash.content == "Error: Bash timed out after 1 s"
    assert other.is_error
    assert "Bash" in str(other.content)
    assert log == {"b": 1, "t": 1}


async def test_a_timed_out_sync_tool_is_answered_at_its_deadline(
    autojump_clock: trio.testing.MockClock, run_calls: Any
) -> None:
    release = threading.Event()

    @trio_agent.tool(timeout=3)
    def stuck() -> str:
        """Blocks its thread."""
        release.wait()
        return "never seen"

    try:
        (result,) = await run_calls([stuck], [ToolUseBlock("s", "stuck", {})])
        assert result.content == "Error: stuck timed out after 3 s"
        assert trio.current_time() == 3
    finally:
        release.set()


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        (0, ValueError),
        (-0.5, ValueError),
        (float("nan"), ValueError),
        ("1", TypeError),
        (True, TypeError),
    ],
)
def test_bad_defaults_are_refused_when_the_options_are_built(
    bad: Any, error: type[Exception]
) -> None:
    with pytest.raises(error, match="tool_timeout"):
        TurnOptions(tool_timeout=bad)


async def test_session_default_reaches_the_tools_and_the_model_reads_the_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log: dict[str, float] = {}
    model = ScriptedModel(
        [
            ScriptedAnswer(
                blocks=[
                    ToolUseBlock("slow", "T", {"seconds": 60}),
                    ToolUseBlock("quick", "T", {"seconds": 1}),
                ]
            ),
            ScriptedAnswer(blocks=[TextBlock("The slow one timed out.")]),
        ]
    )
    session = Session(
        model.client(), [sleeper("T", log)], model="m", options=TurnOptions(tool_timeout=5)
    )
    async with session.submit("go") as events:
        ends = [e async for e in events if isinstance(e, TurnEnd)]
    assert [e.reason for e in ends] == [TurnEndReason.COMPLETED]
    assert log == {"slow": 5, "quick": 1}
    sent = model.requests[1].body["messages"][-1]["content"]
    assert [(b["tool_use_id"], b.get("is_error", False), b["content"]) for b in sent] == [
        ("slow", True, "Error: T timed out after 5 s"),
        ("quick", False, "slept 1"),
    ]
    session.close()
