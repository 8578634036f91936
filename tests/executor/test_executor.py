"""The streaming tool executor: scheduling, results, every abort path."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import pytest
import trio
import trio.testing

import trio_agent
from trio_agent import (
    AbortReason,
    Allow,
    Deny,
    ExecutorClosedError,
    Reject,
    TextBlock,
    Tool,
    ToolContext,
    ToolFinished,
    ToolOutput,
    ToolProgress,
    ToolResult,
    ToolResultBlock,
    ToolUseBlock,
    TurnOptions,
    open_tool_executor,
)

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}, "cmd": {"type": "string"}}}


class Log:
    """What the tools did, with virtual times."""

    def __init__(self) -> None:
        self.events: list[tuple[float, str, str]] = []

    def add(self, what: str, name: str) -> None:
        self.events.append((trio.current_time(), what, name))

    def starts(self) -> dict[str, float]:
        return {name: t for t, what, name in self.events if what == "start"}

    def ends(self) -> dict[str, float]:
        return {name: t for t, what, name in self.events if what == "end"}


def make_tool(
    name: str,
    log: Log,
    *,
    safe: Any = True,
    duration: float = 1.0,
    outcome: str = "ok",
    interrupt: str = "block",
    cascade: bool = False,
) -> Tool:
    """A tool that sleeps *duration* and then does *outcome*; call labels come
    from the input's ``cmd`` (or the tool name)."""

    async def run(input: Mapping[str, Any], ctx: ToolContext) -> Any:
        label = input.get("cmd", name)
        log.add("start", label)
        try:
            if outcome == "hang":
                await trio.sleep_forever()
            await trio.sleep(duration)
        except trio.Cancelled:
            log.add("cancelled", label)
            raise
        log.add("end", label)
        if outcome == "error":
            return ToolOutput(f"{label} failed", is_error=True)
        if outcome == "raise":
            raise RuntimeError(f"{label} blew up")
        if outcome == "garbage":
            return 42
        return f"{label} ok"

    return Tool(
        name,
        f"the {name} tool",
        SCHEMA,
        run,
        concurrency_safe=safe,
        interrupt_behavior=interrupt,  # type: ignore[arg-type]
        cancels_siblings_on_error=cascade,
    )


def call(i: int | str, name: str, cmd: str | None = None, **input: Any) -> ToolUseBlock:
    if cmd is not None:
        input["cmd"] = cmd
    return ToolUseBlock(f"toolu_{i}", name, input)


async def timed_results(executor: trio_agent.ToolExecutor) -> list[tuple[float, ToolResult]]:
    """Every result of a running *executor*, each with the (virtual) time it arrived."""
    return [(trio.current_time(), r) async for r in executor.results]


# -- scheduling -----------------------------------------------------------------------


async def test_read_read_write_read_timeline(autojump_clock: trio.testing.MockClock) -> None:
    log = Log()
    tools = [make_tool("Read", log), make_tool("Write", log, safe=False, duration=2)]
    async with open_tool_executor(tools) as executor:
        executor.add_tool(call(1, "Read", "r1"))
        executor.add_tool(call(2, "Read", "r2"))
        executor.add_tool(call(3, "Write", "w"))
        executor.add_tool(call(4, "Read", "r3"))
        executor.finish()
        got = await timed_results(executor)
    assert log.starts() == {"r1": 0, "r2": 0, "w": 1, "r3": 3}
    assert log.ends() == {"r1": 1, "r2": 1, "w": 3, "r3": 4}
    assert [(t, r.tool_use_id, r.content) for t, r in got] == [
        (1, "toolu_1", "r1 ok"),
        (1, "toolu_2", "r2 ok"),
        (3, "toolu_3", "w ok"),
        (4, "toolu_4", "r3 ok"),
    ]
    assert executor.drain() == []
    assert executor.statistics() == trio_agent.ExecutorStatistics(0, 0, 4, 2)


async def test_tools_start_while_blocks_arrive(autojump_clock: trio.testing.MockClock) -> None:
    """The seed's [Read_1, Read_2, Bash_1, Read_3, Read_4] arriving one per second."""
    log = Log()
    tools = [make_tool("Read", log, duration=3), make_tool("Bash", log, safe=False, duration=2)]
    async with open_tool_executor(tools) as executor:
        for i, (name, cmd) in enumerate(
            [("Read", "r1"), ("Read", "r2"), ("Bash", "b1"), ("Read", "r3"), ("Read", "r4")]
        ):
            executor.add_tool(call(i, name, cmd))
            await trio.sleep(1)
        executor.finish()
        await timed_results(executor)
    # r1 [0,3], r2 [1,4], Bash waits for both [4,6], r3 and r4 wait for Bash [6,9].
    assert log.starts() == {"r1": 0, "r2": 1, "b1": 4, "r3": 6, "r4": 6}
    assert log.ends() == {"r1": 3, "r2": 4, "b1": 6, "r3": 9, "r4": 9}


async def test_safety_is_decided_per_input(autojump_clock: trio.testing.MockClock) -> None:
    log = Log()

    def safe_when_reading(input: Mapping[str, Any]) -> bool:
        if input["cmd"] == "boom":
            raise ValueError("cannot parse")
        return str(input["cmd"]).startswith("cat")

    tools = [make_tool("Bash", log, safe=safe_when_reading)]
    async with open_tool_executor(tools) as executor:
        executor.add_tool(call(1, "Bash", "cat a"))
        executor.add_tool(call(2, "Bash", "cat b"))
        executor.add_tool(call(3, "Bash", "boom"))  # a raising check: unsafe
        executor.add_tool(call(4, "Bash", "cat c"))
        executor.finish()
    assert log.starts() == {"cat a": 0, "cat b": 0, "boom": 1, "cat c": 2}


async def test_schema_invalid_input_counts_as_unsafe(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log = Log()
    async with open_tool_executor([make_tool("Read", log, duration=2)]) as executor:
        executor.add_tool(call(1, "Read", "r1"))
        executor.add_tool(call(2, "Read", n="not a number"))
        executor.add_tool(call(3, "Read", "r3"))
        executor.finish()
        got = await timed_results(executor)
    # The invalid call waits for r1 (it is unsafe), answers at once, then r3 runs.
    assert log.starts() == {"r1": 0, "r3": 2}
    assert got[1][0] == 2
    assert got[1][1].is_error
    assert (
        got[1][1].content
        == "<tool_use_error>InputValidationError: Read: n: 'not a number' is not of type "
        "'integer'</tool_use_error>"
    )
    assert not got[1][1].started


async def test_invalid_json_is_answered_without_running(
    autojump_clock: trio.testing.MockClock, run_calls: Any
) -> None:
    log = Log()
    (result,) = await run_calls(
        [make_tool("Read", log)], [ToolUseBlock("toolu_1", "Read", {}, invalid_input='{"cmd": "x')]
    )
    assert log.events == []
    assert result.is_error
    assert result.content == (
        "<tool_use_error>InputValidationError: Read: the input is not valid JSON: "
        """'{"cmd": "x'</tool_use_error>"""
    )


async def test_safe_call_that_cannot_start_does_not_block_later_safe(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log = Log()
    tools = [make_tool("Read", log, duration=2), make_tool("Write", log, safe=False)]
    async with open_tool_executor(tools, options=TurnOptions(max_tool_concurrency=2)) as executor:
        for i in range(5):
            executor.add_tool(call(i, "Read", f"r{i}"))
        executor.finish()
        stats_during = executor.statistics()
    assert stats_during == trio_agent.ExecutorStatistics(3, 2, 0, 2)
    assert log.starts() == {"r0": 0, "r1": 0, "r2": 2, "r3": 2, "r4": 4}
    assert executor.statistics().peak_concurrency == 2


async def test_non_safe_call_blocks_everything_after_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log = Log()
    tools = [make_tool("Read", log, duration=5), make_tool("Write", log, safe=False)]
    async with open_tool_executor(tools) as executor:
        executor.add_tool(call(1, "Read", "long"))
        executor.add_tool(call(2, "Write", "w"))
        executor.add_tool(call(3, "Read", "after"))
        executor.finish()
    assert log.starts() == {"long": 0, "w": 5, "after": 6}


async def test_results_arrive_in_add_order(autojump_clock: trio.testing.MockClock) -> None:
    log = Log()
    tools = [make_tool("Slow", log, duration=5), make_tool("Fast", log, duration=1)]
    async with open_tool_executor(tools) as executor:
        executor.add_tool(call(1, "Slow"))
        executor.add_tool(call(2, "Fast"))
        executor.finish()
        got = await timed_results(executor)
    assert [(t, r.tool_use_id) for t, r in got] == [(5, "toolu_1"), (5, "toolu_2")]


async def test_progress_is_delivered_at_once_out_of_band(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def slow(input: Mapping[str, Any], ctx: ToolContext) -> str:
        for i in range(3):
            ctx.progress(i)
            await trio.sleep(1)
        return "done"

    async def fast(input: Mapping[str, Any], ctx: ToolContext) -> str:
        await trio.sleep(0.5)
        ctx.progress("fast")
        return "quick"

    tools = [
        Tool("Slow", "d", SCHEMA, slow, concurrency_safe=True),
        Tool("Fast", "d", SCHEMA, fast, concurrency_safe=True),
    ]
    seen: list[tuple[float, Any]] = []
    async with open_tool_executor(tools) as executor:
        executor.add_tool(call(1, "Slow"))
        executor.add_tool(call(2, "Fast"))
        executor.finish()
        async for item in executor.progress:
            seen.append((trio.current_time(), item))
    assert seen == [
        (0, ToolProgress("toolu_1", 0)),
        (0.5, ToolProgress("toolu_2", "fast")),
        (0.5, ToolFinished("toolu_2", False, None)),
        (1, ToolProgress("toolu_1", 1)),
        (2, ToolProgress("toolu_1", 2)),
        (3, ToolFinished("toolu_1", False, None)),
    ]


# -- errors from tools ---------------------------------------------------------------


async def test_unknown_tool_is_answered_at_once(autojump_clock: trio.testing.MockClock) -> None:
    log = Log()
    async with open_tool_executor([make_tool("Read", log), make_tool("Bash", log)]) as executor:
        executor.add_tool(call(1, "Rread"))
        assert executor.statistics().finished == 1
        executor.finish()
        (result,) = [r async for r in executor.results]
    assert result == ToolResult(
        "toolu_1",
        "<tool_use_error>Error: No such tool available: Rread. Available tools: Bash, Read"
        "</tool_use_error>",
        is_error=True,
    )
    assert result.to_block() == ToolResultBlock("toolu_1", result.content, is_error=True)


@pytest.mark.parametrize(
    ("outcome", "content"),
    [
        ("error", "x failed"),
        ("raise", "Error: T raised RuntimeError: x blew up"),
        (
            "garbage",
            "Error: T returned int, expected a str, a list of text / image / document / search_result blocks, or a ToolOutput",
        ),
    ],
)
async def test_failing_tools_give_error_results(
    autojump_clock: trio.testing.MockClock, outcome: str, content: str, run_calls: Any
) -> None:
    (result,) = await run_calls([make_tool("T", Log(), outcome=outcome)], [call(1, "T", "x")])
    assert result == ToolResult("toolu_1", content, is_error=True, started=True)


async def test_raise_without_message_and_list_of_blocks(run_calls: Any) -> None:
    async def bare(input: Mapping[str, Any], ctx: ToolContext) -> str:
        raise KeyError

    async def blocks(input: Mapping[str, Any], ctx: ToolContext) -> Any:
        return [TextBlock("a"), TextBlock("b")]

    async def bad_list(input: Mapping[str, Any], ctx: ToolContext) -> Any:
        return ["not a block"]

    tools = [
        Tool("Bare", "d", SCHEMA, bare),
        Tool("Blocks", "d", SCHEMA, blocks),
        Tool("BadList", "d", SCHEMA, bad_list),
    ]
    got = await run_calls(
        tools, [call(i, name) for i, name in enumerate(["Bare", "Blocks", "BadList"])]
    )
    assert got[0].content == "Error: Bare raised KeyError"
    assert got[1] == ToolResult(
        "toolu_1", (TextBlock("a"), TextBlock("b")), is_error=False, started=True
    )
    assert got[2].is_error
    assert "BadList returned a list holding str" in str(got[2].content)


# -- sibling_error ------------------------------------------------------------------------


@pytest.mark.parametrize("outcome", ["error", "raise", "garbage"])
async def test_sibling_error_cancels_the_batch_but_not_the_turn(
    autojump_clock: trio.testing.MockClock, outcome: str
) -> None:
    log = Log()
    tools = [
        make_tool("Read", log, duration=10),
        make_tool("Bash", log, safe=True, duration=1, outcome=outcome, cascade=True),
        make_tool("Write", log, safe=False),
    ]
    with trio.CancelScope() as turn:
        async with open_tool_executor(tools, turn_scope=turn) as executor:
            executor.add_tool(call(1, "Read", "long read"))
            executor.add_tool(call(2, "Bash", "mkdir x"))
            executor.add_tool(call(3, "Write", "w"))  # queued behind the two
            await trio.sleep(2)
            executor.add_tool(call(4, "Read", "late"))  # added after the error
            executor.finish()
            got = await timed_results(executor)
    assert not turn.cancelled_caught
    assert log.starts() == {"long read": 0, "mkdir x": 0}
    assert "long read" in {n for _, w, n in log.events if w == "cancelled"}
    results = [r for _, r in got]
    assert results[1].is_error
    assert results[1].abort_reason is None
    culprit = "Cancelled: parallel tool call Bash(mkdir x) errored."
    assert results[0] == ToolResult(
        "toolu_1",
        f"{culprit} It was stopped while running and may have partly completed.",
        is_error=True,
        abort_reason=AbortReason.SIBLING_ERROR,
        started=True,
    )
    for r in results[2:]:
        assert r == ToolResult(
            r.tool_use_id,
            f"{culprit} It was not run.",
            is_error=True,
            abort_reason=AbortReason.SIBLING_ERROR,
        )
    assert [t for t, _ in got] == [2, 2, 2, 2]  # read after the sleep
    assert executor.statistics().finished == 4


async def test_errors_of_non_cascading_tools_do_not_cancel(
    autojump_clock: trio.testing.MockClock, run_calls: Any
) -> None:
    log = Log()
    tools = [make_tool("Read", log, duration=3), make_tool("Grep", log, outcome="raise")]
    got = await run_calls(tools, [call(1, "Read"), call(2, "Grep")])
    assert got[0].content == "Read ok"
    assert got[1].is_error


async def test_denied_cascading_tool_does_not_cancel_siblings(
    autojump_clock: trio.testing.MockClock, run_calls: Any
) -> None:
    async def deny(tool: Tool, input: Mapping[str, Any], ctx: ToolContext) -> Any:
        return Deny("no bash") if tool.name == "Bash" else Allow()

    log = Log()
    tools = [make_tool("Read", log, duration=3), make_tool("Bash", log, cascade=True)]
    got = await run_calls(
        tools, [call(1, "Read"), call(2, "Bash")], options=TurnOptions(can_use_tool=deny)
    )
    assert got == [
        ToolResult("toolu_1", "Read ok", is_error=False, started=True),
        ToolResult("toolu_2", "no bash", is_error=True),
    ]


# -- user_interrupted ---------------------------------------------------------------------


async def test_cancelling_the_turn_gives_user_interrupted(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log = Log()
    tools = [make_tool("Read", log, duration=10), make_tool("Write", log, safe=False)]
    received: list[ToolResult] = []
    with trio.CancelScope() as turn:
        async with open_tool_executor(tools, turn_scope=turn) as executor:
            executor.add_tool(call(1, "Read", "r"))
            executor.add_tool(call(2, "Write", "w"))
            async with trio.open_nursery() as nursery:

                async def canceller() -> None:
                    await trio.sleep(4)
                    turn.cancel()

                nursery.start_soon(canceller)
                async for r in executor.results:
                    received.append(r)  # pragma: no cover - nothing finishes before
    assert turn.cancelled_caught
    assert trio.current_time() == 4
    assert received == []
    first, second = executor.drain()
    assert first.abort_reason is AbortReason.USER_INTERRUPTED
    assert first.started
    assert second.abort_reason is AbortReason.USER_INTERRUPTED
    assert not second.started
    assert str(second.content).startswith("Interrupted by the user")
    assert "It was not run." in str(second.content)
    assert executor.drain() == []


async def test_outer_cancel_without_turn_scope(autojump_clock: trio.testing.MockClock) -> None:
    log = Log()
    with trio.move_on_after(2):
        async with open_tool_executor([make_tool("Read", log, duration=10)]) as executor:
            executor.add_tool(call(1, "Read"))
            executor.finish()
            await trio.sleep_forever()
    (result,) = executor.drain()
    assert result.abort_reason is AbortReason.USER_INTERRUPTED
    assert result.started


async def test_tools_added_into_a_cancelled_turn_never_start(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log = Log()
    with trio.CancelScope() as turn:
        async with open_tool_executor([make_tool("Read", log)], turn_scope=turn) as executor:
            turn.cancel()
            executor.add_tool(call(1, "Read"))  # sync: the body has not checkpointed
            assert executor.statistics().finished == 1
    assert log.events == []
    (result,) = executor.drain()
    assert result.abort_reason is AbortReason.USER_INTERRUPTED
    assert not result.started


async def test_a_failing_body_cancels_the_tools_and_raises_its_own_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log = Log()
    executor: trio_agent.ToolExecutor | None = None

    async def body() -> None:
        nonlocal executor
        async with open_tool_executor([make_tool("Read", log, duration=10)]) as executor:
            executor.add_tool(call(1, "Read"))
            await trio.sleep(1)
            1 / 0  # noqa: B018

    with pytest.raises(ZeroDivisionError):
        await body()
    assert executor is not None
    (result,) = executor.drain()
    assert result.abort_reason is AbortReason.USER_INTERRUPTED
    assert log.events == [(0, "start", "Read"), (1, "cancelled", "Read")]


# -- interrupt ------------------------------------------------------------------------------


async def test_interrupt_cancels_only_cancel_tools(autojump_clock: trio.testing.MockClock) -> None:
    log = Log()
    tools = [
        make_tool("Bash", log, duration=10, interrupt="cancel"),
        make_tool("Read", log, duration=10),
        make_tool("Sleep", log, safe=False, interrupt="cancel"),
    ]
    async with open_tool_executor(tools) as executor:
        executor.add_tool(call(1, "Bash", "b"))
        executor.add_tool(call(2, "Read", "r"))
        executor.add_tool(call(3, "Sleep", "queued"))
        await trio.sleep(1)
        executor.interrupt()
        executor.add_tool(call(4, "Bash", "later"))
        executor.add_tool(call(5, "Read", "later read"))
        executor.finish()
        got = await timed_results(executor)
    by_id = {r.tool_use_id: (t, r) for t, r in got}
    assert by_id["toolu_1"][1].abort_reason is AbortReason.INTERRUPT
    assert by_id["toolu_1"][1].started
    assert by_id["toolu_2"] == (10, ToolResult("toolu_2", "r ok", is_error=False, started=True))
    for i in (3, 4):
        r = by_id[f"toolu_{i}"][1]
        assert r.abort_reason is AbortReason.INTERRUPT
        assert not r.started
        assert r.content == "Interrupted: the user sent a new message. It was not run."
    assert log.starts() == {"b": 0, "r": 0, "later read": 1}


# -- permissions ----------------------------------------------------------------------------


async def test_permission_allow_with_updated_input_and_deny(
    autojump_clock: trio.testing.MockClock,
) -> None:
    asked: list[tuple[str, dict[str, Any]]] = []

    async def can_use_tool(tool: Tool, input: Mapping[str, Any], ctx: ToolContext) -> Any:
        asked.append((ctx.tool_use_id, dict(input)))
        await trio.sleep(1)  # the user thinks
        if input["cmd"] == "rm":
            return Deny("not that")
        if input["cmd"] == "bad":
            return Allow({"n": "oops"})
        return Allow({"cmd": input["cmd"].upper()})

    log = Log()
    async with open_tool_executor(
        [make_tool("Bash", log, safe=False)], options=TurnOptions(can_use_tool=can_use_tool)
    ) as ex:
        ex.add_tool(call(1, "Bash", "ls"))
        ex.add_tool(call(2, "Bash", "rm"))
        ex.add_tool(call(3, "Bash", "bad"))
        ex.finish()
        got = await timed_results(ex)
    assert asked == [
        ("toolu_1", {"cmd": "ls"}),
        ("toolu_2", {"cmd": "rm"}),
        ("toolu_3", {"cmd": "bad"}),
    ]
    assert log.starts() == {"LS": 1}
    assert got[0] == (2, ToolResult("toolu_1", "LS ok", is_error=False, started=True))
    assert got[1] == (3, ToolResult("toolu_2", "not that", is_error=True))
    assert got[2][1].content == (
        "<tool_use_error>InputValidationError: Bash: n: 'oops' is not of type 'integer'"
        "</tool_use_error>"
    )


@pytest.mark.parametrize("returned", ["raise", "nonsense"])
async def test_broken_permission_check_gives_an_error_result(returned: str) -> None:
    async def can_use_tool(tool: Tool, input: Mapping[str, Any], ctx: ToolContext) -> Any:
        if returned == "raise":
            raise OSError("tty gone")
        return True

    async with open_tool_executor(
        [make_tool("Bash", Log())], options=TurnOptions(can_use_tool=can_use_tool)
    ) as ex:
        ex.add_tool(call(1, "Bash"))
    (result,) = ex.drain()
    assert result.is_error
    assert not result.started
    assert str(result.content).startswith("Error: the permission check for Bash failed:")


async def test_reject_escalates_to_the_turn(autojump_clock: trio.testing.MockClock) -> None:
    async def can_use_tool(tool: Tool, input: Mapping[str, Any], ctx: ToolContext) -> Any:
        if tool.name == "Bash":
            await trio.sleep(1)
            return Reject("The user said no.")
        return Allow()

    log = Log()
    tools = [make_tool("Read", log, duration=10), make_tool("Bash", log)]
    with trio.CancelScope() as turn:
        async with open_tool_executor(
            tools, turn_scope=turn, options=TurnOptions(can_use_tool=can_use_tool)
        ) as ex:
            ex.add_tool(call(1, "Read", "r"))
            ex.add_tool(call(2, "Bash", "rm -rf /"))
            ex.add_tool(call(3, "Read", "r3"))  # runs at once (safe)
            await trio.sleep(5)  # pragma: no cover - cancelled at 1
    assert turn.cancelled_caught
    assert trio.current_time() == 1
    r1, r2, r3 = ex.drain()
    assert r2 == ToolResult(
        "toolu_2", "The user said no.", is_error=True, abort_reason=AbortReason.PERMISSION_REJECTED
    )
    for r in (r1, r3):
        assert r.abort_reason is AbortReason.PERMISSION_REJECTED
        assert r.started
        assert str(r.content).startswith(
            "Cancelled: the user rejected tool call Bash(rm -rf /), ending the turn."
        )


async def test_reject_without_turn_scope_cancels_the_batch(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def can_use_tool(tool: Tool, input: Mapping[str, Any], ctx: ToolContext) -> Any:
        return Reject() if tool.name == "Bash" else Allow()

    log = Log()
    tools = [make_tool("Read", log, duration=10), make_tool("Bash", log, safe=False)]
    async with open_tool_executor(tools, options=TurnOptions(can_use_tool=can_use_tool)) as ex:
        ex.add_tool(call(1, "Read", "r"))
        ex.add_tool(call(2, "Bash", "b"))
        await trio.sleep(10)
        ex.add_tool(call(3, "Read", "late"))
        ex.finish()
        got = await timed_results(ex)
    assert [r.abort_reason for _, r in got] == [
        None,
        AbortReason.PERMISSION_REJECTED,
        AbortReason.PERMISSION_REJECTED,
    ]
    assert got[1][1].content == "The user rejected this tool use."
    assert log.starts() == {"r": 0}


# -- discard --------------------------------------------------------------------------------


async def test_discard_cancels_running_and_never_starts_queued(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log = Log()
    tools = [make_tool("Read", log, duration=1), make_tool("Write", log, safe=False, duration=5)]
    received: list[ToolResult] = []
    async with open_tool_executor(tools) as executor:
        executor.add_tool(call(1, "Read", "r1"))
        executor.add_tool(call(2, "Write", "w"))
        executor.add_tool(call(3, "Read", "r3"))
        received.append(await executor.results.receive())  # r1 at t=1
        await trio.sleep(1)
        executor.discard()
        executor.discard()  # idempotent
        with pytest.raises(trio.EndOfChannel):
            await executor.results.receive()
        with pytest.raises(ExecutorClosedError, match="after discard"):
            executor.add_tool(call(4, "Read"))
        assert executor.statistics().executing == 0
    assert [r.tool_use_id for r in received] == ["toolu_1"]
    w, r3 = executor.drain()
    assert w.abort_reason is AbortReason.STREAMING_FALLBACK
    assert w.started
    assert "may have partly completed" in str(w.content)
    assert r3.abort_reason is AbortReason.STREAMING_FALLBACK
    assert not r3.started
    assert log.starts() == {"r1": 0, "w": 1}
    assert "cancelled" in {what for _, what, _ in log.events}


async def test_discard_keeps_finished_results_for_drain(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_tool_executor([make_tool("Read", Log())]) as executor:
        executor.add_tool(call(1, "Read"))
        await trio.sleep(5)
        executor.discard()
    assert executor.drain() == [ToolResult("toolu_1", "Read ok", is_error=False, started=True)]


# -- skip_unstarted (a refusal) ----------------------------------------------------------------


async def test_skip_unstarted_answers_queued_calls_and_leaves_running_ones(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log = Log()
    tools = [make_tool("Read", log, duration=1), make_tool("Write", log, safe=False, duration=2)]
    async with open_tool_executor(tools) as executor:
        executor.add_tool(call(1, "Write", "w1"))
        executor.add_tool(call(2, "Read", "r2"))
        executor.add_tool(call(3, "Write", "w3"))
        await trio.sleep(1)
        assert executor.skip_unstarted("Not run: refused.") == 2
        assert executor.statistics() == trio_agent.ExecutorStatistics(0, 1, 2, 1)
        executor.add_tool(call(4, "Read", "r4"))  # not sticky: queued behind w1 as usual
        executor.finish()
        got = await timed_results(executor)
    assert log.starts() == {"w1": 0, "r4": 2}
    assert log.ends() == {"w1": 2, "r4": 3}
    skipped = ToolResult("toolu_2", "Not run: refused.", is_error=True)
    assert [r for _, r in got] == [
        ToolResult("toolu_1", "w1 ok", is_error=False, started=True),
        skipped,
        attrs.evolve(skipped, tool_use_id="toolu_3"),
        ToolResult("toolu_4", "r4 ok", is_error=False, started=True),
    ]
    assert [t for t, _ in got] == [2, 2, 2, 3]  # in add order: w1 first


async def test_skip_unstarted_stops_a_call_waiting_for_permission(
    autojump_clock: trio.testing.MockClock,
) -> None:
    asked: list[str] = []

    async def can_use_tool(tool: Tool, input: Mapping[str, Any], ctx: ToolContext) -> Any:
        asked.append(ctx.tool_use_id)
        try:
            await trio.sleep(10)  # the user thinks
        except trio.Cancelled:
            asked.append(f"{ctx.tool_use_id} cancelled")
            raise
        return Allow()

    log = Log()
    async with open_tool_executor(
        [make_tool("Bash", log, safe=False)], options=TurnOptions(can_use_tool=can_use_tool)
    ) as executor:
        executor.add_tool(call(1, "Bash", "rm"))
        await trio.sleep(1)
        assert executor.skip_unstarted("Not run.") == 1
        assert executor.skip_unstarted("Not run.") == 0  # nothing left
        with trio.testing.assert_checkpoints():
            got = await executor.results.receive()
        assert trio.current_time() == 1
    assert got == ToolResult("toolu_1", "Not run.", is_error=True)
    assert asked == ["toolu_1", "toolu_1 cancelled"]
    assert log.events == []
    assert executor.drain() == []
    assert executor.skip_unstarted("after the block") == 0


# -- context modifiers -----------------------------------------------------------------------


async def test_context_modifiers_of_non_safe_tools_apply_in_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    seen: list[tuple[str, Any]] = []

    def appender(tag: str, safe: bool) -> Tool:
        async def run(input: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
            seen.append((ctx.tool_use_id, ctx.context))
            await trio.sleep(1)
            return ToolOutput("ok", context_modifier=lambda c: (*c, tag))

        return Tool(tag, "d", SCHEMA, run, concurrency_safe=safe)

    def broken(c: Any) -> Any:
        raise LookupError("nope")

    async def breaks(input: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        return ToolOutput("ok", context_modifier=broken)

    tools = [
        appender("A", False),
        appender("B", False),
        appender("S", True),
        Tool("Broken", "d", SCHEMA, breaks),
    ]
    async with open_tool_executor(tools, context=()) as ex:
        for i, name in enumerate(["A", "S", "B", "Broken"]):
            ex.add_tool(call(i, name))
        ex.finish()
        got = [r async for r in ex.results]
    assert ex.context == ("A", "B")  # the safe tool's modifier is not applied
    assert seen == [("toolu_0", ()), ("toolu_1", ("A",)), ("toolu_2", ("A",))]
    assert got[3].content == "Error: the context modifier of Broken raised LookupError: nope"


# -- API details -----------------------------------------------------------------------------


async def test_add_tool_after_finish_and_bad_arguments() -> None:
    async with open_tool_executor([make_tool("Read", Log(), duration=0)]) as ex:
        ex.add_tool(call(1, "Read"))
        with pytest.raises(ValueError, match="already added"):
            ex.add_tool(call(1, "Read"))
        with pytest.raises(TypeError):
            ex.add_tool({"id": "x"})  # type: ignore[arg-type]
        ex.finish()
        ex.finish()
        with pytest.raises(ExecutorClosedError, match="after finish"):
            ex.add_tool(call(2, "Read"))
        with pytest.raises(RuntimeError, match="after the executor"):
            ex.drain()
    with pytest.raises(ExecutorClosedError):
        ex.add_tool(call(3, "Read"))
    ex.interrupt()  # harmless after the block
    ex.discard()
    assert len(ex.drain()) == 1


def test_open_tool_executor_checks_its_arguments() -> None:
    read = make_tool("Read", Log())

    async def main() -> None:
        with pytest.raises(ValueError, match="at least 1"):
            async with open_tool_executor([read], options=TurnOptions(max_tool_concurrency=0)):
                pass  # pragma: no cover
        with pytest.raises(TypeError):
            async with open_tool_executor([read], options=TurnOptions(max_tool_concurrency=2.5)):  # type: ignore[arg-type]
                pass  # pragma: no cover
        with pytest.raises(trio_agent.ToolDefinitionError, match="two tools"):
            async with open_tool_executor([read, read]):
                pass  # pragma: no cover
        with pytest.raises(TypeError):
            async with open_tool_executor(["Read"]):  # type: ignore[list-item]
                pass  # pragma: no cover

    trio.run(main)


async def test_add_tool_is_sync_and_receive_checkpoints() -> None:
    async with open_tool_executor([make_tool("Read", Log(), duration=0)]) as ex:
        with trio.testing.assert_no_checkpoints():
            ex.add_tool(call(1, "Read"))
            ex.finish()
            ex.statistics()
        await trio.testing.wait_all_tasks_blocked()
        with trio.testing.assert_checkpoints():
            await ex.results.receive()  # ready: still a checkpoint
        with trio.testing.assert_checkpoints(), pytest.raises(trio.EndOfChannel):
            await ex.results.receive()


async def test_a_consumer_that_stops_reading_does_not_block(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_tool_executor(
        [make_tool("Read", Log())], options=TurnOptions(max_tool_concurrency=100)
    ) as ex:
        for i in range(50):
            ex.add_tool(call(i, "Read"))
        ex.finish()
    assert trio.current_time() == 1
    assert [r.tool_use_id for r in ex.drain()] == [f"toolu_{i}" for i in range(50)]


async def test_closed_results_channel_leaves_results_for_drain() -> None:
    async with open_tool_executor([make_tool("Read", Log(), duration=0)]) as ex:
        await ex.results.aclose()
        with pytest.raises(trio.ClosedResourceError):
            await ex.results.receive()
        ex.add_tool(call(1, "Read"))
        await ex.progress.aclose()  # progress is then dropped, never blocking
    assert [r.tool_use_id for r in ex.drain()] == ["toolu_1"]


async def test_receiver_parked_when_channel_closed() -> None:
    async with open_tool_executor([make_tool("Read", Log(), outcome="hang")]) as ex:
        ex.add_tool(call(1, "Read"))
        async with trio.open_nursery() as nursery:

            async def waiter() -> None:
                with pytest.raises(trio.ClosedResourceError):
                    await ex.results.receive()

            nursery.start_soon(waiter)
            await trio.testing.wait_all_tasks_blocked()
            await ex.results.aclose()
        ex.discard()


async def test_exact_interleaving_with_sequencer() -> None:
    """A cascade happening between two steps of a sibling, forced with a Sequencer."""
    seq = trio.testing.Sequencer()

    async def sibling(input: Mapping[str, Any], ctx: ToolContext) -> str:
        async with seq(0):
            ctx.progress("step 1")
        async with seq(2):  # pragma: no cover - cancelled while waiting
            ctx.progress("step 2")
        return "never"

    async def bash(input: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        async with seq(1):
            return ToolOutput("exit 1", is_error=True)

    tools = [
        Tool("Sib", "d", SCHEMA, sibling, concurrency_safe=True),
        Tool("Bash", "d", SCHEMA, bash, concurrency_safe=True, cancels_siblings_on_error=True),
    ]
    async with open_tool_executor(tools) as ex:
        ex.add_tool(call(1, "Sib"))
        ex.add_tool(call(2, "Bash", "false"))
        ex.finish()
        progress = [p async for p in ex.progress]
        got = [r async for r in ex.results]
    assert progress == [
        ToolProgress("toolu_1", "step 1"),
        ToolFinished("toolu_1", True, AbortReason.SIBLING_ERROR),
        ToolFinished("toolu_2", True, None),
    ]
    assert got[0].content == (
        "Cancelled: parallel tool call Bash(false) errored. "
        "It was stopped while running and may have partly completed."
    )


async def test_progress_after_the_result_is_dropped(autojump_clock: trio.testing.MockClock) -> None:
    async def stubborn(input: Mapping[str, Any], ctx: ToolContext) -> str:
        try:
            await trio.sleep(10)
        finally:
            ctx.progress("cleaning up")  # after its synthetic result: dropped
        return "x"  # pragma: no cover

    async with open_tool_executor(
        [Tool("S", "d", SCHEMA, stubborn, interrupt_behavior="cancel")]
    ) as ex:
        ex.add_tool(call(1, "S"))
        await trio.sleep(1)
        ex.interrupt()
        ex.finish()
        items = [p async for p in ex.progress]
    assert items == [ToolFinished("toolu_1", True, AbortReason.INTERRUPT)]


def test_summaries_are_short() -> None:
    from trio_agent._executor import summarize_call

    assert summarize_call("Bash", {"command": "mkdir x"}) == "Bash(mkdir x)"
    assert summarize_call("T", {"n": 3, "m": "s"}) == "T(s)"
    assert summarize_call("T", {"n": [1, 2]}) == "T([1, 2])"
    assert summarize_call("T", {}) == "T()"
    assert summarize_call("T", {"c": "x" * 100}) == "T(" + "x" * 39 + "…)"
    loop: list[Any] = []
    loop.append(loop)
    assert summarize_call("T", {"l": loop}) == "T([[...]])"


async def test_a_turn_cancelled_for_a_rejection_elsewhere(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The loop (or another executor) escalating: the reason is read off Cancelled."""
    log = Log()
    with trio.CancelScope() as turn:
        async with open_tool_executor([make_tool("Read", log, duration=5)], turn_scope=turn) as ex:
            ex.add_tool(call(1, "Read"))
            await trio.sleep(1)
            turn.cancel(reason="permission_rejected")
            await trio.sleep(1)  # pragma: no cover
    (result,) = ex.drain()
    assert result.abort_reason is AbortReason.PERMISSION_REJECTED
    assert result.content == (
        "Cancelled: the user rejected another tool call, ending the turn. "
        "It was stopped while running and may have partly completed."
    )


async def test_a_tool_turning_its_cancellation_into_an_error_does_not_cascade(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def stubborn(input: Mapping[str, Any], ctx: ToolContext) -> str:
        try:
            await trio.sleep(10)
        except trio.Cancelled:
            raise RuntimeError("killed") from None  # a badly behaved tool
        return "x"  # pragma: no cover

    log = Log()
    tools = [
        Tool(
            "Stubborn",
            "d",
            SCHEMA,
            stubborn,
            interrupt_behavior="cancel",
            cancels_siblings_on_error=True,
            concurrency_safe=True,
        ),
        make_tool("Read", log, duration=3),
    ]
    async with open_tool_executor(tools) as ex:
        ex.add_tool(call(1, "Stubborn"))
        ex.add_tool(call(2, "Read"))
        await trio.sleep(1)
        ex.interrupt()
        ex.finish()
        got = [r async for r in ex.results]
    assert got[0].abort_reason is AbortReason.INTERRUPT
    assert got[1] == ToolResult("toolu_2", "Read ok", is_error=False, started=True)


async def test_two_cascading_failures_at_once_blame_the_first(
    autojump_clock: trio.testing.MockClock, run_calls: Any
) -> None:
    seq = trio.testing.Sequencer()

    def failing(name: str, step: int) -> Tool:
        async def run(input: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
            async with seq(step):
                pass
            return ToolOutput(f"{name} failed", is_error=True)

        return Tool(name, "d", SCHEMA, run, concurrency_safe=True, cancels_siblings_on_error=True)

    class Bad(Exception):
        pass

    async def late_failure(input: Mapping[str, Any], ctx: ToolContext) -> str:
        try:
            async with seq(1):
                pass
        finally:
            raise Bad  # fails even though it was cancelled
        return "x"  # pragma: no cover

    tools = [
        failing("A", 0),
        Tool("B", "d", SCHEMA, late_failure, concurrency_safe=True, cancels_siblings_on_error=True),
    ]
    got = await run_calls(tools, [call(1, "A"), call(2, "B")])
    assert got[0].content == "A failed"
    assert got[1].abort_reason is AbortReason.SIBLING_ERROR
    assert "A()" in str(got[1].content)


class Escape(BaseException):
    pass


async def test_a_base_exception_from_a_tool_propagates(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def escapes(input: Mapping[str, Any], ctx: ToolContext) -> str:
        await trio.sleep(1)
        raise Escape

    log = Log()
    tools = [
        Tool("E", "d", SCHEMA, escapes, concurrency_safe=True),
        make_tool("Read", log, duration=5),
    ]
    executor: trio_agent.ToolExecutor | None = None

    async def body() -> None:
        nonlocal executor
        async with open_tool_executor(tools) as executor:
            executor.add_tool(call(1, "E"))
            executor.add_tool(call(2, "Read"))
            executor.finish()

    with pytest.RaisesGroup(Escape):
        await body()
    assert executor is not None
    first, second = executor.drain()
    assert first.abort_reason is AbortReason.USER_INTERRUPTED
    assert second.abort_reason is AbortReason.USER_INTERRUPTED
