"""Run a scenario through the real executor in virtual time, and check the trace.

:func:`run_scenario` builds real :class:`~trio_agent.Tool` values from a
:class:`ToolScenario`, runs :func:`~trio_agent.open_tool_executor` under a fresh
``MockClock(autojump_threshold=0)`` and records every observable event with its
virtual time. :func:`check_trace` checks the invariants that hold for any run;
``trace.schedule() == reference_schedule(scenario)`` checks the timing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, Literal, TypeAlias

import attrs
import trio
import trio.testing

from .._exceptions import ExecutorClosedError
from .._executor import TOOL_TASK_PREFIX, ToolExecutor, open_tool_executor
from .._messages import ToolUseBlock
from .._permissions import Allow, Deny, PermissionDecision, Reject
from .._results import AbortReason, ExecutorStatistics, ToolFinished, ToolProgress, ToolResult
from .._tools import Tool, ToolContext, ToolOutput
from ._reference import CallOutcome, Schedule
from ._scenario import ScenarioError, ToolScenario

__all__ = ["InvariantViolation", "Trace", "TraceEvent", "check_trace", "run_scenario"]

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
    """A trace breaks one of the executor's invariants."""


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


@attrs.frozen
class Trace:
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

    def of(self, index: int, *kinds: EventKind) -> list[TraceEvent]:
        """The events of call *index*, optionally of the given kinds only."""
        return [e for e in self.events if e.index == index and (not kinds or e.kind in kinds)]

    def result(self, index: int) -> ToolResult | None:
        """The result call *index* got (delivered or drained), if any."""
        found = self.of(index, "delivered", "drained")
        return found[0].detail if found else None

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


class _TaskWatch(trio.abc.Instrument):
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


async def _script(
    scenario: ToolScenario, ex: ToolExecutor, turn: trio.CancelScope, rec: _Recorder
) -> None:
    for time, what, i in scenario.script():
        if time > trio.current_time():
            await trio.sleep_until(time)
        if what == "add":
            try:
                ex.add_tool(_block(scenario, i))
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


async def _consume_results(ex: ToolExecutor, rec: _Recorder) -> None:
    async for result in ex.results:
        rec.add("delivered", rec.index[result.tool_use_id], result)


async def _consume_progress(ex: ToolExecutor, rec: _Recorder) -> None:
    async for item in ex.progress:
        kind: EventKind = "progress" if isinstance(item, ToolProgress) else "finished"
        rec.add(kind, rec.index[item.tool_use_id], item)


async def _run(scenario: ToolScenario, rec: _Recorder, watch: _TaskWatch) -> None:
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
                    outer.start_soon(_consume_progress, ex, rec)
                    async with trio.open_nursery() as body:
                        if scenario.consume_results:
                            body.start_soon(_consume_results, ex, rec)
                        await _script(scenario, ex, turn, rec)
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
    watch = _TaskWatch()

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


# -- checking ---------------------------------------------------------------------------


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise InvariantViolation(message)


def _positions(trace: Trace, kinds: Iterable[EventKind]) -> dict[int, int]:
    wanted = set(kinds)
    found: dict[int, int] = {}
    for pos, e in enumerate(trace.events):
        if e.kind in wanted and e.index not in found:
            found[e.index] = pos
    return found


def check_trace(trace: Trace) -> None:
    """Check the invariants every run must keep, whatever the timing.

    Pairing, order, exclusivity, the concurrency cap, cascade scope,
    escalation, interrupt and discard scope, progress before its result,
    statistics, and no tool task left after the block.

    Raises:
        InvariantViolation: with a message saying which invariant and call.
    """
    sc = trace.scenario
    n = len(sc.calls)
    events = trace.events
    added = [i for i in range(n) if trace.of(i, "added")]
    added_set = set(added)
    add_order = [e.index for e in events if e.kind == "added"]

    # Pairing: exactly one result and one ToolFinished per added call, none for others.
    for i in range(n):
        results = trace.of(i, "delivered", "drained")
        finished = trace.of(i, "finished")
        if i in added_set:
            _check(len(results) == 1, f"call {i}: {len(results)} results, want exactly 1")
            _check(len(finished) == 1, f"call {i}: {len(finished)} ToolFinished, want 1")
            result: ToolResult = results[0].detail
            notice: ToolFinished = finished[0].detail
            _check(result.tool_use_id == sc.tool_use_id(i), f"call {i}: result for the wrong id")
            _check(
                (notice.is_error, notice.abort_reason) == (result.is_error, result.abort_reason),
                f"call {i}: ToolFinished {notice} disagrees with its result {result}",
            )
            _check(
                result.started == bool(trace.of(i, "started")),
                f"call {i}: started={result.started} but run called: {bool(trace.of(i, 'started'))}",
            )
        else:
            _check(not results and not finished, f"call {i} was never added but has a result")

    # Order: delivered results are a prefix of the add order, drained ones the rest.
    got = [e.index for e in events if e.kind in ("delivered", "drained")]
    _check(got == add_order, f"results came in order {got}, calls were added {add_order}")
    kinds = [e.kind for e in events if e.kind in ("delivered", "drained")]
    _check(kinds == sorted(kinds, key=lambda k: k == "drained"), "a result delivered after drain")

    # Progress strictly before the call's ToolFinished.
    finished_at = _positions(trace, ["finished"])
    for pos, e in enumerate(events):
        if e.kind == "progress":
            _check(pos < finished_at.get(e.index, -1), f"call {e.index}: progress after its result")

    # Exclusivity and the cap, over the runs' real intervals (event positions).
    starts = _positions(trace, ["started"])
    stops = _positions(trace, ["stopped"])
    runs = {i: (starts[i], stops.get(i, len(events))) for i in starts}
    for i, (a0, a1) in runs.items():
        if not sc.calls[i].effectively_safe:
            for j, (b0, b1) in runs.items():
                _check(j == i or b1 < a0 or a1 < b0, f"non-safe call {i} overlapped call {j}")
    open_runs = peak = 0
    for e in events:
        if e.kind == "started":
            open_runs += 1
            peak = max(peak, open_runs)
        elif e.kind == "stopped":
            open_runs -= 1
    _check(peak <= sc.max_concurrency, f"{peak} tools ran at once, cap {sc.max_concurrency}")

    # Statistics and tasks.
    stats = trace.statistics
    _check(
        (stats.queued, stats.executing, stats.finished) == (0, 0, len(added)),
        f"final statistics {stats} for {len(added)} calls",
    )
    _check(peak <= stats.peak_concurrency <= sc.max_concurrency, f"peak {stats} vs observed {peak}")
    _check(not trace.leaked_tasks, f"tool tasks outlived the executor: {trace.leaked_tasks}")
    _check(trace.tool_tasks >= len(runs), "fewer tool tasks than tools run")

    _check_aborts(trace, finished_at)


def _check_aborts(trace: Trace, finished_at: dict[int, int]) -> None:
    sc = trace.scenario
    events = trace.events
    action_at = {
        e.detail: pos for pos, e in reversed(list(enumerate(events))) if e.kind == "action"
    }
    by_reason: dict[str | None, list[int]] = {}
    for i in finished_at:
        result = trace.result(i)
        assert result is not None
        by_reason.setdefault(result.abort_reason, []).append(i)

    def after(pos: int) -> list[int]:
        return [i for i, p in finished_at.items() if p > pos]

    # sibling_error: caused by a real failure of a cascading call; every call
    # finishing after that failure (added later too) is cancelled by it.
    siblings = by_reason.get(AbortReason.SIBLING_ERROR, [])
    culprits = sorted(
        (finished_at[i], i)
        for i in finished_at
        if sc.calls[i].cascade
        and trace.of(i, "started")
        and result_kind(trace.result(i)) == "error"  # type: ignore[arg-type]
    )
    _check(bool(culprits) or not siblings, "sibling_error without a failing cascading call")
    if culprits:
        pos, culprit = culprits[0]
        for i in after(pos):
            if sc.calls[i].input != "unknown_tool":
                _check(i in siblings, f"call {i} escaped the cascade of call {culprit}")
        for i in siblings:
            _check(
                events[finished_at[i]].time >= events[pos].time,
                f"call {i} got sibling_error before call {culprit} failed",
            )

    # permission_rejected: the rejecting call first, then everything unfinished;
    # the turn is cancelled and nothing is added afterwards.
    rejected = by_reason.get(AbortReason.PERMISSION_REJECTED, [])
    if rejected:
        first = min(finished_at[i] for i in rejected)
        culprit = events[first].index
        _check(sc.calls[culprit].permission == "reject", f"call {culprit} rejected without Reject")
        _check(trace.turn_cancelled, "a rejection did not cancel the turn")
        for i in after(first):
            _check(i in rejected, f"call {i} escaped the escalation of call {culprit}")
        added_later = [e.index for e in events[first:] if e.kind == "added"]
        _check(not added_later, f"calls {added_later} added after the turn was rejected")

    # interrupt: only "cancel" tools, only after interrupt().
    for i in by_reason.get(AbortReason.INTERRUPT, []):
        _check(sc.calls[i].interrupt_behavior == "cancel", f"interrupt cancelled block call {i}")
        _check("interrupt" in action_at and action_at["interrupt"] < finished_at[i], f"call {i}")

    # streaming_fallback: only after discard(); nothing added or delivered afterwards.
    fallback = by_reason.get(AbortReason.STREAMING_FALLBACK, [])
    if "discard" in action_at:
        pos = action_at["discard"]
        late = [e.kind for e in events[pos:] if e.kind in ("added", "delivered")]
        _check(not late, f"{late} after discard()")
    for i in fallback:
        _check("discard" in action_at and action_at["discard"] < finished_at[i], f"call {i}")

    # user_interrupted: only after the turn was cancelled from outside.
    for i in by_reason.get(AbortReason.USER_INTERRUPTED, []):
        _check(
            "cancel_turn" in action_at and action_at["cancel_turn"] < finished_at[i],
            f"call {i} user_interrupted without a turn cancellation",
        )
