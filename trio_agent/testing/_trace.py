"""Run a scenario through the real executor in virtual time, and check the trace.

:func:`run_scenario` builds real :class:`~trio_agent.Tool` values from a
:class:`ToolScenario`, runs :func:`~trio_agent.open_tool_executor` under a fresh
``MockClock(autojump_threshold=0)`` and records every observable event with its
virtual time. :func:`~trio_agent.testing.check_trace` (in :mod:`._checks`)
checks the invariants that hold for any run;
``trace.schedule() == reference_schedule(scenario)`` checks the timing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Any, Literal, Protocol, TypeAlias

import attrs
import trio
import trio.testing

from .._exceptions import ExecutorClosedError
from .._executor import (
    TOOL_TASK_PREFIX,
    ExecutorStatistics,
    ToolExecutor,
    ToolProgress,
    ToolResult,
    open_tool_executor,
)
from .._messages import ToolUseBlock
from .._permissions import Allow, Deny, PermissionDecision, Reject
from .._tools import Tool, ToolContext, ToolOutput
from ._reference import CallOutcome, Schedule
from ._scenario import ScenarioError, ToolScenario

__all__ = ["EventKind", "InvariantViolation", "Trace", "TraceEvent", "result_kind", "run_scenario"]

EventKind: TypeAlias = Literal[
    "added",  # add_tool accepted call `index`
    "refused",  # add_tool raised ExecutorClosedError
    "action",  # interrupt / discard / finish / cancel_turn (detail)
    "started",  # the tool's run was called
    "stopped",  # the tool's run returned, raised or was cancelled
    "progress",  # a ToolProgress was received
    "finished",  # a ToolFinished was received
    "delivered",  # a ToolResult was received from `results`
    "drained",  # a ToolResult was returned by drain()
]

_HORIZON = 1e6  # virtual seconds: a scenario still running then never ends
_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {"n": {"type": "integer"}},
    "required": ["n"],
}


class InvariantViolation(AssertionError):
    """A trace, run record or history breaks one of its invariants."""


@attrs.frozen
class TraceEvent:
    """One thing that happened, at a virtual time.

    Attributes:
        time: virtual seconds since the run began.
        kind: what happened (see ``EventKind``).
        index: the scenario call it is about, or -1.
        detail: the ToolResult / ToolProgress / ToolFinished, or the action's name.
    """

    time: float
    kind: EventKind
    index: int = -1
    detail: Any = None


class EventLog:
    """Lookups shared by every run record that holds ``events`` (Trace, RunRecord, ToolRun)."""

    events: tuple[TraceEvent, ...]

    def of(self, index: int, *kinds: EventKind) -> list[TraceEvent]:
        """The events of call *index*, optionally of the given kinds only."""
        return [e for e in self.events if e.index == index and (not kinds or e.kind in kinds)]

    def result(self, index: int) -> ToolResult | None:
        """The result call *index* got (delivered or drained), if any."""
        found = self.of(index, "delivered", "drained")
        return found[0].detail if found else None


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


class TaskWatch(trio.abc.Instrument):
    """Counts tool tasks as Trio spawns and reaps them."""

    def __init__(self) -> None:
        self.live: set[trio.lowlevel.Task] = set()
        self.spawned = 0

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        if task.name.startswith(TOOL_TASK_PREFIX):
            self.live.add(task)
            self.spawned += 1

    def task_exited(self, task: trio.lowlevel.Task) -> None:
        self.live.discard(task)


@attrs.define
class _Recorder:
    scenario: ToolScenario
    events: list[TraceEvent] = attrs.field(factory=lambda: list[TraceEvent]())
    index: dict[str, int] = attrs.field(factory=lambda: dict[str, int]())
    executor: ToolExecutor | None = None
    leaked: tuple[str, ...] = ()
    turn_cancelled: bool = False

    def __attrs_post_init__(self) -> None:
        self.index = {self.scenario.tool_use_id(i): i for i in range(len(self.scenario.calls))}

    def add(self, kind: EventKind, index: int = -1, detail: Any = None) -> None:
        self.events.append(TraceEvent(trio.current_time(), kind, index, detail))


def _block(scenario: ToolScenario, i: int) -> ToolUseBlock:
    call, name, tool_use_id = scenario.calls[i], scenario.tool_name(i), scenario.tool_use_id(i)
    if call.input == "unknown_tool":
        return ToolUseBlock(tool_use_id, f"{name}__unknown", {"n": i})
    if call.input == "schema_error":
        return ToolUseBlock(tool_use_id, name, {"n": "not a number"})
    if call.input == "invalid_json":
        return ToolUseBlock(tool_use_id, name, {}, invalid_input='{"n": ')
    return ToolUseBlock(tool_use_id, name, {"n": i})


def _tool(scenario: ToolScenario, i: int, rec: _Recorder) -> Tool:
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


class Recording(Protocol):
    """What the drivers below write to: a map of tool_use ids to call indexes and an
    event log (the scenario recorder here, the user-tool recorder in _tool_runs)."""

    index: dict[str, int]

    def add(self, kind: EventKind, index: int = ..., detail: Any = ...) -> None: ...


async def drive_script(
    script: Iterable[tuple[float, str, int]],
    block_of: Callable[[int], ToolUseBlock],
    ex: ToolExecutor,
    turn: trio.CancelScope,
    rec: Recording,
    t0: float = 0.0,
) -> None:
    """Add each call and perform each outside action at its time (from *t0*)."""
    for time, what, i in script:
        if t0 + time > trio.current_time():
            await trio.sleep_until(t0 + time)
        if what == "add":
            try:
                ex.add_tool(block_of(i))
            except ExecutorClosedError:
                rec.add("refused", i)
            else:
                rec.add("added", i)
            continue
        rec.add("action", -1, what)
        if what == "interrupt":
            ex.interrupt()
        elif what == "discard":
            ex.discard()
        elif what == "finish":
            ex.finish()
        else:
            turn.cancel()


async def consume_results(ex: ToolExecutor, rec: Recording) -> None:
    """Record every result delivered on ``ex.results``."""
    async for result in ex.results:
        rec.add("delivered", rec.index[result.tool_use_id], result)


async def consume_progress(ex: ToolExecutor, rec: Recording) -> None:
    """Record every progress item and ``ToolFinished`` notice."""
    async for item in ex.progress:
        kind: EventKind = "progress" if isinstance(item, ToolProgress) else "finished"
        rec.add(kind, rec.index[item.tool_use_id], item)


async def _run(scenario: ToolScenario, rec: _Recorder, watch: TaskWatch) -> None:
    tools = [_tool(scenario, i, rec) for i in range(len(scenario.calls))]

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

    async with trio.open_nursery() as outer:
        with trio.CancelScope() as turn:
            try:
                async with open_tool_executor(
                    tools,
                    turn_scope=turn,
                    can_use_tool=can_use_tool,
                    max_concurrency=scenario.max_concurrency,
                ) as ex:
                    rec.executor = ex
                    outer.start_soon(consume_progress, ex, rec)
                    async with trio.open_nursery() as body:
                        if scenario.consume_results:
                            body.start_soon(consume_results, ex, rec)
                        await drive_script(
                            scenario.script(), partial(_block, scenario), ex, turn, rec
                        )
            finally:
                rec.leaked = tuple(sorted(t.name for t in watch.live))
        rec.turn_cancelled = turn.cancel_called
        assert rec.executor is not None
        for result in rec.executor.drain():
            rec.add("drained", rec.index[result.tool_use_id], result)


def run_scenario(scenario: ToolScenario) -> Trace:
    """Run *scenario* through the real executor in Trio virtual time.

    Starts its own ``trio.run`` with a fresh ``MockClock(autojump_threshold=0)``,
    so it is called from synchronous code (e.g. inside a hypothesis ``@given``).

    Raises:
        ScenarioError: the run had not ended after a million virtual seconds
            (a hanging tool nothing cancels).
    """
    rec = _Recorder(scenario)
    watch = TaskWatch()

    async def main() -> bool:
        with trio.move_on_after(_HORIZON) as guard:
            await _run(scenario, rec, watch)
        return guard.cancelled_caught

    hung = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0), instruments=[watch])
    if hung:
        raise ScenarioError("the scenario never ends: a tool hangs and nothing cancels it")
    assert rec.executor is not None
    return Trace(
        scenario=scenario,
        events=tuple(rec.events),
        statistics=rec.executor.statistics(),
        turn_cancelled=rec.turn_cancelled,
        leaked_tasks=rec.leaked,
        tool_tasks=watch.spawned,
    )
