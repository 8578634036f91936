"""Run a scenario through the real executor in virtual time, and check the trace.

:func:`run_scenario` builds real :class:`~trio_agent.Tool` values from a
:class:`ToolScenario` and runs them through the harness's executor driver
(:func:`._driver.drive_executor`, shared with :func:`~trio_agent.testing.run_tool_calls`)
under a fresh ``MockClock(autojump_threshold=0)``, which records every observable
event with its virtual time. :func:`~trio_agent.testing.check_trace` (in :mod:`._checks`)
checks the invariants that hold for any run;
``trace.schedule() == reference_schedule(scenario)`` checks the timing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import partial
from typing import Any

import attrs
import trio

from .._executor import ExecutorStatistics, ToolResult
from .._messages import ToolUseBlock
from .._options import TurnOptions
from .._permissions import Allow, Deny, PermissionDecision, Reject
from .._tools import Tool, ToolContext, ToolOutput
from ._driver import EventLog, Recorder, TraceEvent, drive_executor
from ._reference import CallOutcome, Schedule
from ._scenario import ToolScenario

__all__ = ["InvariantViolation", "Trace", "result_kind", "run_scenario"]

_HORIZON = 1e6  # virtual seconds: a scenario still running then never ends
_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {"n": {"type": "integer"}},
    "required": ["n"],
}


class InvariantViolation(AssertionError):
    """A trace, run record or history breaks one of its invariants."""


@attrs.frozen
class Trace(EventLog):
    """Everything a scenario run did, in the order it happened.

    Attributes:
        scenario: what was run.
        events: the events in order.
        statistics: ``executor.statistics()`` after the block.
        turn_cancelled: whether the turn scope was cancelled.
        leaked_tasks: tool tasks still alive when the block ended (must be empty).
        tool_tasks: how many tool tasks were spawned.
    """

    scenario: ToolScenario
    events: tuple[TraceEvent, ...]
    statistics: ExecutorStatistics
    turn_cancelled: bool
    leaked_tasks: tuple[str, ...]
    tool_tasks: int

    def outcomes(self) -> tuple[CallOutcome, ...]:
        """What happened to each call, in the reference model's terms."""
        outcomes: list[CallOutcome] = []
        for i in range(len(self.scenario.calls)):
            result = self.result(i)
            if not self.of(i, "added") or result is None:
                outcomes.append(CallOutcome(added=False))
                continue
            started = self.of(i, "started")
            finished = self.of(i, "finished")
            via = self.of(i, "delivered", "drained")[0].kind
            outcomes.append(
                CallOutcome(
                    added=True,
                    start=started[0].time if started else None,
                    end=finished[0].time if finished else None,
                    kind=result_kind(result),
                    started=result.started,
                    via="results" if via == "delivered" else "drain",
                    progress=tuple(e.time for e in self.of(i, "progress")),
                )
            )
        return tuple(outcomes)

    def schedule(self) -> Schedule:
        """The run as a :class:`Schedule`, comparable with the reference's."""
        return Schedule(self.outcomes(), self.statistics.peak_concurrency, self.turn_cancelled)


def result_kind(result: ToolResult) -> str:
    """``"ok"``, ``"error"`` or the abort reason's value."""
    if result.abort_reason is not None:
        return result.abort_reason.value
    return "error" if result.is_error else "ok"


# -- running ----------------------------------------------------------------------------


def _block(scenario: ToolScenario, i: int) -> ToolUseBlock:
    call, name, tool_use_id = scenario.calls[i], scenario.tool_name(i), scenario.tool_use_id(i)
    if call.input == "unknown_tool":
        return ToolUseBlock(tool_use_id, f"{name}__unknown", {"n": i})
    if call.input == "schema_error":
        return ToolUseBlock(tool_use_id, name, {"n": "not a number"})
    if call.input == "invalid_json":
        return ToolUseBlock(tool_use_id, name, {}, invalid_input='{"n": ')
    return ToolUseBlock(tool_use_id, name, {"n": i})


def _tool(scenario: ToolScenario, i: int, rec: Recorder) -> Tool:
    call = scenario.calls[i]

    async def run(input: Mapping[str, Any], ctx: ToolContext) -> Any:
        rec.add("started", i)
        t0 = trio.current_time()
        reach = math.inf if call.outcome == "hang" else call.duration
        try:
            for offset in sorted(call.progress):
                if offset > reach:
                    break
                await trio.sleep_until(t0 + offset)
                ctx.progress(offset)
            if call.outcome == "hang":
                await trio.sleep_forever()
            await trio.sleep_until(t0 + call.duration)
        finally:
            rec.add("stopped", i)
        if call.outcome == "error":
            return ToolOutput(f"error {i}", is_error=True)
        if call.outcome == "raise":
            raise RuntimeError(f"tool {i} failed")
        if call.outcome == "garbage":
            return 42
        return f"ok {i}"

    def safety(input: Mapping[str, Any]) -> bool:
        if call.safe == "raises":
            raise ValueError("cannot tell")
        return call.safe

    return Tool(
        scenario.tool_name(i),
        f"scenario tool {i}",
        _SCHEMA,
        run,
        concurrency_safe=safety,
        interrupt_behavior=call.interrupt_behavior,
        cancels_siblings_on_error=call.cascade,
    )


def run_scenario(scenario: ToolScenario) -> Trace:
    """Run *scenario* through the real executor in Trio virtual time.

    Starts its own ``trio.run`` with a fresh ``MockClock(autojump_threshold=0)``,
    so it is called from synchronous code (e.g. inside a hypothesis ``@given``).

    Raises:
        ScenarioError: the run had not ended after a million virtual seconds
            (a hanging tool nothing cancels).
    """
    rec = Recorder({scenario.tool_use_id(i): i for i in range(len(scenario.calls))})

    async def can_use_tool(
        tool: Tool, input: Mapping[str, Any], ctx: ToolContext
    ) -> PermissionDecision:
        call = scenario.calls[rec.index[ctx.tool_use_id]]
        if call.permission_delay > 0:
            await trio.sleep(call.permission_delay)
        if call.permission == "deny":
            return Deny(f"denied {ctx.tool_use_id}")
        if call.permission == "reject":
            return Reject(f"rejected {ctx.tool_use_id}")
        return Allow()

    run = drive_executor(
        rec,
        [_tool(scenario, i, rec) for i in range(len(scenario.calls))],
        scenario.script(),
        partial(_block, scenario),
        options=TurnOptions(
            can_use_tool=can_use_tool, max_tool_concurrency=scenario.max_concurrency
        ),
        consume_results=scenario.consume_results,
        limit=_HORIZON,
        hang_message="the scenario never ends: a tool hangs and nothing cancels it",
    )
    return Trace(
        scenario=scenario,
        events=run.events,
        statistics=run.statistics,
        turn_cancelled=run.turn_cancelled,
        leaked_tasks=run.leaked_tasks,
        tool_tasks=run.tool_tasks,
    )
