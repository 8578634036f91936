"""Run a batch of calls through the real executor with a user's real tools.

:func:`run_tool_calls` wraps each tool's ``run`` to see when it really starts and
stops (and what it returned or raised) and runs the batch's script through the
harness's executor driver (:func:`._driver.drive_executor`, shared with
:func:`~trio_agent.testing.run_scenario`), in Trio's virtual time or on the real
clock; every observable event, with its time, lands in a :class:`ToolRun`.
:func:`~trio_agent.testing.check_tool_run` then checks the executor's
invariants on it, with each call's safety, cascade flag and interrupt behaviour
taken from the user's tool declarations.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

import attrs

from .._executor import ExecutorStatistics, ToolResult
from .._options import TurnOptions
from .._permissions import Allow, CanUseTool, Deny, PermissionDecision, Reject
from .._tools import Tool, ToolContext, plain_json
from ._checks import CallFacts, RunRecord
from ._driver import EventLog, Recorder, TraceEvent, drive_executor
from ._tool_calls import ToolCallBatch

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


def _watched(tool: Tool, rec: Recorder) -> Tool:
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


def _permission(
    batch: ToolCallBatch,
    rec: Recorder,
    decisions: dict[int, PermissionDecision],
    user: CanUseTool | None,
) -> CanUseTool:
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
        decisions[i] = decision
        return decision

    return can_use_tool


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
    rec = Recorder({c.block.id: i for i, c in enumerate(batch.calls)})
    decisions: dict[int, PermissionDecision] = {}
    run = drive_executor(
        rec,
        [_watched(t, rec) for t in tools],
        batch.script(),
        lambda i: batch.calls[i].block,
        options=TurnOptions(
            can_use_tool=_permission(batch, rec, decisions, can_use_tool),
            max_tool_concurrency=max_concurrency,
        ),
        context=context,
        consume_results=batch.consume_results,
        clock=clock,
        limit=limit,
        hang_message=f"the run did not end within {limit} s: a tool hangs",
    )
    return ToolRun(
        batch=batch,
        tools={t.name: t for t in tools},
        events=run.events,
        decisions=tuple(decisions.get(i) for i in range(len(batch.calls))),
        statistics=run.statistics,
        max_concurrency=max_concurrency,
        turn_cancelled=run.turn_cancelled,
        leaked_tasks=run.leaked_tasks,
        tool_tasks=run.tool_tasks,
    )
