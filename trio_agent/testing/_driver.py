"""The one executor driver of the harness: :func:`drive_executor`.

:func:`~trio_agent.testing.run_scenario` (synthetic tools, :mod:`._trace`) and
:func:`~trio_agent.testing.run_tool_calls` (a user's real tools, :mod:`._tool_runs`)
both run the real executor through it. It starts its own ``trio.run`` (Trio's virtual
clock or the real one) under a deadline, opens
:func:`~trio_agent.open_tool_executor` inside a turn scope, adds each call and
performs each outside action of a script at its time, and records what the executor
shows (calls added or refused, actions, progress, ``ToolFinished``, results
delivered and drained) in a :class:`Recorder`, with the time since the run began.
The tools' own ``started`` / ``stopped`` events are the caller's: its tools write to
the same recorder.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, TypeAlias

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
from .._options import TurnOptions
from .._tools import Tool
from ._scenario import ScenarioError

__all__ = ["DrivenRun", "EventKind", "EventLog", "Recorder", "TraceEvent", "drive_executor"]

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

#: ``(time, what, call index)``: ``what`` is ``"add"`` (call *index*) or an action
#: (``interrupt``, ``discard``, ``finish``, ``cancel_turn``; index -1).
Script: TypeAlias = Iterable[tuple[float, str, int]]


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


@attrs.define
class Recorder:
    """The event log of one run: the driver and the run's tools write to it.

    Attributes:
        index: each call's ``tool_use`` id to its index in the script.
        events: what happened, in order.
        t0: the clock's time when the run began (event times count from it).
    """

    index: dict[str, int]
    events: list[TraceEvent] = attrs.field(factory=lambda: list[TraceEvent]())
    t0: float = 0.0

    def add(self, kind: EventKind, index: int = -1, detail: Any = None) -> None:
        self.events.append(TraceEvent(trio.current_time() - self.t0, kind, index, detail))


@attrs.frozen
class DrivenRun:
    """How the executor's block ended.

    Attributes:
        events: the recorder's events, in order.
        statistics: ``executor.statistics()`` after the block.
        turn_cancelled: whether the turn scope was cancelled.
        leaked_tasks: tool tasks still alive when the block ended (must be empty).
        tool_tasks: how many tool tasks were spawned.
    """

    events: tuple[TraceEvent, ...]
    statistics: ExecutorStatistics
    turn_cancelled: bool
    leaked_tasks: tuple[str, ...]
    tool_tasks: int


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
class _Ending:
    """What the run leaves behind for the synchronous side."""

    executor: ToolExecutor | None = None
    leaked: tuple[str, ...] = ()
    turn_cancelled: bool = False


async def _play(
    script: Script,
    block_of: Callable[[int], ToolUseBlock],
    ex: ToolExecutor,
    turn: trio.CancelScope,
    rec: Recorder,
) -> None:
    """Add each call and perform each outside action at its time."""
    for time, what, i in script:
        if rec.t0 + time > trio.current_time():
            await trio.sleep_until(rec.t0 + time)
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


async def _consume_results(ex: ToolExecutor, rec: Recorder) -> None:
    async for result in ex.results:
        rec.add("delivered", rec.index[result.tool_use_id], result)


async def _consume_progress(ex: ToolExecutor, rec: Recorder) -> None:
    async for item in ex.progress:
        kind: EventKind = "progress" if isinstance(item, ToolProgress) else "finished"
        rec.add(kind, rec.index[item.tool_use_id], item)


async def _run(
    rec: Recorder,
    tools: Sequence[Tool],
    script: Script,
    block_of: Callable[[int], ToolUseBlock],
    *,
    options: TurnOptions,
    context: Any,
    consume_results: bool,
    watch: _TaskWatch,
    ending: _Ending,
) -> None:
    async with trio.open_nursery() as outer:
        with trio.CancelScope() as turn:
            try:
                async with open_tool_executor(
                    tools, turn_scope=turn, options=options, context=context
                ) as ex:
                    ending.executor = ex
                    outer.start_soon(_consume_progress, ex, rec)
                    async with trio.open_nursery() as body:
                        if consume_results:
                            body.start_soon(_consume_results, ex, rec)
                        await _play(script, block_of, ex, turn, rec)
            finally:
                ending.leaked = tuple(sorted(t.name for t in watch.live))
        ending.turn_cancelled = turn.cancel_called
        assert ending.executor is not None
        for result in ending.executor.drain():
            rec.add("drained", rec.index[result.tool_use_id], result)


def drive_executor(
    rec: Recorder,
    tools: Sequence[Tool],
    script: Script,
    block_of: Callable[[int], ToolUseBlock],
    *,
    options: TurnOptions,
    limit: float,
    hang_message: str,
    context: Any = None,
    consume_results: bool = True,
    clock: Literal["virtual", "real"] = "virtual",
) -> DrivenRun:
    """Run *script* through the real executor with *tools*, in its own ``trio.run``.

    Called from synchronous code (e.g. inside a hypothesis ``@given``).

    Args:
        rec: where the events go (the tools may write to it too).
        tools: the executor's tools.
        script: the calls to add and the actions to perform, at their times.
        block_of: the ``ToolUseBlock`` of call *index*.
        options: the executor's options (``can_use_tool``, ``max_tool_concurrency``...).
        limit: seconds (virtual or real) after which the run counts as hung.
        hang_message: the ``ScenarioError``'s message then.
        context: the executor's shared context value.
        consume_results: whether a task reads ``results`` as they come (else every
            result is drained after the block).
        clock: ``"virtual"`` (``MockClock(autojump_threshold=0)``) or ``"real"``.

    Raises:
        ScenarioError: the run had not ended within *limit*.
    """
    watch = _TaskWatch()
    ending = _Ending()

    async def main() -> bool:
        rec.t0 = trio.current_time()
        with trio.move_on_after(limit) as guard:
            await _run(
                rec,
                tools,
                script,
                block_of,
                options=options,
                context=context,
                consume_results=consume_results,
                watch=watch,
                ending=ending,
            )
        return guard.cancelled_caught

    run_clock = trio.testing.MockClock(autojump_threshold=0) if clock == "virtual" else None
    hung: bool = trio.run(main, clock=run_clock, instruments=[watch])
    if hung:
        raise ScenarioError(hang_message)
    assert ending.executor is not None
    return DrivenRun(
        events=tuple(rec.events),
        statistics=ending.executor.statistics(),
        turn_cancelled=ending.turn_cancelled,
        leaked_tasks=ending.leaked,
        tool_tasks=watch.spawned,
    )
