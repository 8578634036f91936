"""The ideal turn, and the SVG timeline of a trio_agent turn.

The ideal is ``trio_agent.testing.reference_schedule`` (the library's pure reference
model of the executor's scheduling, zero overhead) on a :class:`ToolScenario` built
from a real trio_agent run: each call arrives when its ``BlockFinished`` event did,
and lasts as long as its sleep (``ms``) or, for real work, as long as it ran in that
very run. The ideal turn is then ``max(end of the first stream, end of the last
tool)`` plus the run's later model calls, as long as they took in that run.
"""

from __future__ import annotations

from typing import Any

from ._report import Timeline
from ._scenarios import is_safe
from ._turns import QueryRun


def _duration(run: QueryRun, tool_use_id: str, tool_input: Any) -> float:
    if tool_input.get("real"):
        row = run.recorder.tools[tool_use_id]
        if row.started_at is None or row.ended_at is None:
            raise RuntimeError(f"real-work tool {tool_use_id} never ran")
        return row.ended_at - row.started_at
    return float(tool_input.get("ms", 0)) / 1000


def ideal_schedule(run: QueryRun, max_concurrency: int) -> dict[str, tuple[float, float]]:
    """Each tool call's (start, end) in the reference model, by tool_use id."""
    from trio_agent.testing import ScenarioCall, ToolScenario, reference_schedule

    ids = list(run.blocks)
    calls = [
        ScenarioCall(
            arrival=arrival,
            duration=_duration(run, tid, block.input),
            outcome="error" if block.input.get("fail") else "ok",
            safe=is_safe(block.name, block.input),
            interrupt_behavior="cancel" if block.name == "Bash" else "block",
            cascade=block.name == "Bash",
            name=f"{n:03}_{block.name}",
        )
        for n, (tid, (arrival, block)) in enumerate(run.blocks.items())
    ]
    first = run.recorder.calls[0]
    schedule = reference_schedule(
        ToolScenario(calls, max_concurrency=max_concurrency, finish_at=first.stream_ended_at)
    )
    out: dict[str, tuple[float, float]] = {}
    for tid, outcome in zip(ids, schedule.calls, strict=True):
        assert outcome.end is not None
        start = outcome.start if outcome.start is not None else outcome.end
        out[tid] = (start, outcome.end)
    return out


def ideal_turn(run: QueryRun, max_concurrency: int | None = None) -> float:
    """The ideal turn time on *run*'s actual block-finish times (see the module doc)."""
    cap = run.max_tool_concurrency if max_concurrency is None else max_concurrency
    schedule = ideal_schedule(run, cap)
    calls = run.recorder.calls
    if len(calls) < 2 or any(c.stream_ended_at is None for c in calls):
        raise RuntimeError("a scenario turn is two or more complete model calls")
    first_end = calls[0].stream_ended_at
    tools_end = max((end for _, end in schedule.values()), default=0.0)
    later = sum(c.stream_ended_at - c.started_at for c in calls[1:])
    return max(first_end, tools_end) + later


def timeline(title: str, run: QueryRun) -> Timeline:
    """The SVG panel of *run*: model streams on top, one row per tool call."""
    tl = Timeline(title)
    for call in run.recorder.calls:
        if call.stream_ended_at is not None:
            tl.span("model stream", "stream", call.started_at, call.stream_ended_at)
    ideal = ideal_schedule(run, run.max_tool_concurrency)
    for n, (tid, (done, block)) in enumerate(run.blocks.items(), 1):
        row = f"{n:02} {block.name}"
        tl.mark(row, "block", done)
        tool = run.recorder.tools.get(tid)
        if tool is not None and tool.started_at is not None:
            tl.span(row, "queued", done, tool.started_at)
            end = tool.ended_at if tool.ended_at is not None else tool.started_at
            tl.span(
                row, "cancelled" if tool.state == "cancelled" else "executing", tool.started_at, end
            )
        if tid in run.delivered:
            tl.mark(row, "delivered", run.delivered[tid])
        tl.mark(row, "ideal", ideal[tid][1])
    return tl
