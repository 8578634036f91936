"""Run a batch of calls through the real executor with a user's real tools.

:func:`run_tool_calls` wraps each tool's ``run`` to see when it really starts and
stops (and what it returned or raised), runs :func:`~trio_agent.open_tool_executor`
on the batch's script, in Trio's virtual time or on the real clock, and records
every observable event with its time in a :class:`ToolRun`.
:func:`~trio_agent.testing.check_tool_run` then checks the executor's
invariants on it, with each call's safety, cascade flag and interrupt behaviour
taken from the user's tool declarations.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

import attrs
import trio
import trio.testing

from .._executor import ExecutorStatistics, ToolExecutor, ToolResult, open_tool_executor
from .._permissions import Allow, CanUseTool, Deny, PermissionDecision, Reject
from .._tools import Tool, ToolContext, plain_json
from ._checks import CallFacts, RunRecord
from ._scenario import ScenarioError
from ._tool_calls import ToolCallBatch
from ._trace import (
    EventKind,
    EventLog,
    TaskWatch,
    TraceEvent,
    consume_progress,
    consume_results,
    drive_script,
)

__all__ = ["ToolRun", "run_tool_calls"]

_VIRTUAL_TIMEOUT = 1e6  # virtual seconds
_REAL_TIMEOUT = 60.0  # seconds


@attrs.frozen
class ToolRun(EventLog):
    """Everything one batch run did, in the order it happened.

    Attributes:
        batch: what was run.
        tools: the user's tools, by name (unwrapped).
        events: the events in order (``TraceEvent``: time since the run began,
            kind, call index, detail), as in a scenario trace; the detail of
            ``"stopped"`` is what the tool's ``run`` returned or the exception
            it raised.
        decisions: the permission answer each call got (None: never asked).
        statistics: ``executor.statistics()`` after the block.
        max_concurrency: the executor's cap.
        turn_cancelled: whether the turn scope was cancelled.
        leaked_tasks: tool tasks still alive when the block ended (must be empty).
        tool_tasks: how many tool tasks were spawned.
    """

    batch: ToolCallBatch
    tools: Mapping[str, Tool]
    events: tuple[TraceEvent, ...]
    decisions: tuple[PermissionDecision | None, ...]
    statistics: ExecutorStatistics
    max_concurrency: int
    turn_cancelled: bool
    leaked_tasks: tuple[str, ...]
    tool_tasks: int

    def results(self) -> list[ToolResult]:
        """Every result, delivered then drained, in the order they came."""
        return [e.detail for e in self.events if e.kind in ("delivered", "drained")]

    def record(self) -> RunRecord:
        """The run in the common event model the invariants are checked on."""
        return RunRecord(
            facts=self.facts(),
            events=self.events,
            statistics=self.statistics,
            max_concurrency=self.max_concurrency,
            turn_cancelled=self.turn_cancelled,
            leaked_tasks=self.leaked_tasks,
            tool_tasks=self.tool_tasks,
        )

    def facts(self) -> tuple[CallFacts, ...]:
        """What the checks need to know about each call, from the tools' declarations."""
        return tuple(self._facts(i) for i in range(len(self.batch.calls)))

    def _facts(self, index: int) -> CallFacts:
        block = self.batch.calls[index].block
        tool = self.tools.get(block.name)
        rejected = isinstance(self.decisions[index], Reject)
        if tool is None:
            return CallFacts(block.id, safe=False, known=False, rejects=rejected)
        valid = block.invalid_input is None and tool.validate(block.input) is None
        return CallFacts(
            block.id,
            safe=valid and tool.is_concurrency_safe(plain_json(block.input)),
            cascade=tool.cancels_siblings_on_error,
            interrupt_behavior=tool.interrupt_behavior,
            known=True,
            valid=valid,
            rejects=rejected,
        )


@attrs.define
class _Recorder:
    index: dict[str, int]
    t0: float = 0.0
    events: list[TraceEvent] = attrs.field(factory=lambda: list[TraceEvent]())
    decisions: dict[int, PermissionDecision] = attrs.field(
        factory=lambda: dict[int, PermissionDecision]()
    )
    executor: ToolExecutor | None = None
    leaked: tuple[str, ...] = ()
    turn_cancelled: bool = False

    def add(self, kind: EventKind, index: int = -1, detail: Any = None) -> None:
        self.events.append(TraceEvent(trio.current_time() - self.t0, kind, index, detail))


def _watched(tool: Tool, rec: _Recorder) -> Tool:
    """*tool* with a ``run`` that records when it starts and how it ends."""
    inner = tool.run

    async def run(input: Mapping[str, Any], ctx: ToolContext) -> Any:
        i = rec.index[ctx.tool_use_id]
        rec.add("started", i)
        outcome: Any = None
        try:
            outcome = await inner(input, ctx)
        except BaseException as exc:
            outcome = exc
            raise
        finally:
            rec.add("stopped", i, outcome)
        return outcome

    return attrs.evolve(tool, run=run)


def _permission(batch: ToolCallBatch, rec: _Recorder, user: CanUseTool | None) -> CanUseTool:
    async def can_use_tool(
        tool: Tool, input: Mapping[str, Any], ctx: ToolContext
    ) -> PermissionDecision:
        i = rec.index[ctx.tool_use_id]
        wanted = batch.calls[i].permission
        decision: PermissionDecision
        if wanted == "deny":
            decision = Deny(f"denied {ctx.tool_use_id} (test batch)")
        elif wanted == "reject":
            decision = Reject(f"rejected {ctx.tool_use_id} (test batch)")
        elif user is not None:
            decision = await user(tool, input, ctx)
        else:
            decision = Allow()
        rec.decisions[i] = decision
        return decision

    return can_use_tool


async def _run(
    batch: ToolCallBatch,
    tools: list[Tool],
    rec: _Recorder,
    watch: TaskWatch,
    *,
    can_use_tool: CanUseTool,
    max_concurrency: int,
    context: Any,
) -> None:
    async with trio.open_nursery() as outer:
        with trio.CancelScope() as turn:
            try:
                async with open_tool_executor(
                    tools,
                    turn_scope=turn,
                    can_use_tool=can_use_tool,
                    max_concurrency=max_concurrency,
                    context=context,
                ) as ex:
                    rec.executor = ex
                    outer.start_soon(consume_progress, ex, rec)
                    async with trio.open_nursery() as body:
                        if batch.consume_results:
                            body.start_soon(consume_results, ex, rec)
                        await drive_script(
                            batch.script(), lambda i: batch.calls[i].block, ex, turn, rec, rec.t0
                        )
            finally:
                rec.leaked = tuple(sorted(t.name for t in watch.live))
        rec.turn_cancelled = turn.cancel_called
        assert rec.executor is not None
        for result in rec.executor.drain():
            rec.add("drained", rec.index[result.tool_use_id], result)


def run_tool_calls(
    tools: Iterable[Tool],
    batch: ToolCallBatch,
    *,
    can_use_tool: CanUseTool | None = None,
    max_concurrency: int = 10,
    clock: Literal["virtual", "real"] = "virtual",
    timeout: float | None = None,
    context: Any = None,
) -> ToolRun:
    """Run *batch* through the real executor with the user's real *tools*.

    Starts its own ``trio.run``, so it is called from synchronous code (e.g.
    inside a hypothesis ``@given``).

    Args:
        tools: the tools, as given to ``open_tool_executor``.
        batch: the calls and outside actions (see :func:`tool_calls`).
        can_use_tool: consulted for the calls the batch allows; the batch's
            Deny and Reject answers come first.
        max_concurrency: the executor's cap.
        clock: ``"virtual"`` (``MockClock(autojump_threshold=0)``: sleeps are
            instant, for tools that only wait on Trio) or ``"real"`` (tools doing
            real I/O: files, threads, processes, sockets).
        timeout: seconds (virtual or real) after which the run counts as hung;
            default a million virtual seconds or 60 real ones.
        context: the executor's shared context value.

    Raises:
        ScenarioError: the run had not ended within *timeout* (a tool hangs and
            nothing cancels it).
    """
    tools = list(tools)
    if clock not in ("virtual", "real"):
        raise ValueError(f"clock must be 'virtual' or 'real', not {clock!r}")
    limit = (
        timeout
        if timeout is not None
        else (_VIRTUAL_TIMEOUT if clock == "virtual" else _REAL_TIMEOUT)
    )
    rec = _Recorder({c.block.id: i for i, c in enumerate(batch.calls)})
    watch = TaskWatch()
    watched = [_watched(t, rec) for t in tools]
    permission = _permission(batch, rec, can_use_tool)

    async def main() -> bool:
        rec.t0 = trio.current_time()
        with trio.move_on_after(limit) as guard:
            await _run(
                batch,
                watched,
                rec,
                watch,
                can_use_tool=permission,
                max_concurrency=max_concurrency,
                context=context,
            )
        return guard.cancelled_caught

    run_clock = trio.testing.MockClock(autojump_threshold=0) if clock == "virtual" else None
    hung: bool = trio.run(main, clock=run_clock, instruments=[watch])
    if hung:
        raise ScenarioError(f"the run did not end within {limit} s: a tool hangs")
    assert rec.executor is not None
    return ToolRun(
        batch=batch,
        tools={t.name: t for t in tools},
        events=tuple(rec.events),
        decisions=tuple(rec.decisions.get(i) for i in range(len(batch.calls))),
        statistics=rec.executor.statistics(),
        max_concurrency=max_concurrency,
        turn_cancelled=rec.turn_cancelled,
        leaked_tasks=rec.leaked,
        tool_tasks=watch.spawned,
    )
