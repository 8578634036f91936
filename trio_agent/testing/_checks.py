"""The invariants every run of the executor keeps, over a common event model.

A scenario :class:`~trio_agent.testing.Trace` (synthetic tools) and a
:class:`~trio_agent.testing.ToolRun` (a user's real tools) are both a
:class:`RunRecord`: the events of one executor's life, plus a
:class:`CallFacts` per call saying what the executor was told about it (its
safety for that input, cascade flag, interrupt behaviour, whether the tool
exists and the input is valid, whether the permission check rejected it).
They differ only in where those facts come from, so both are checked by
:func:`check_record` (:func:`check_trace` and
:func:`~trio_agent.testing.check_tool_run` are thin wrappers).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

import attrs

from .._executor import AbortReason, ExecutorStatistics, ToolFinished, ToolResult
from ._driver import EventKind, EventLog, TraceEvent
from ._trace import InvariantViolation, Trace, result_kind

__all__ = ["CallFacts", "RunRecord", "check_record", "check_trace", "record_of_trace"]


@attrs.frozen
class CallFacts:
    """What the executor knew about one call.

    Attributes:
        tool_use_id: the call's id.
        safe: concurrency-safe as the executor must see it (a known tool, a
            valid input and a safety check answering yes).
        cascade: the tool's ``cancels_siblings_on_error``.
        interrupt_behavior: the tool's ``interrupt_behavior``.
        known: whether a tool of that name exists.
        valid: whether the input is valid JSON matching the schema.
        rejects: whether the permission check answered ``Reject``.
    """

    tool_use_id: str
    safe: bool
    cascade: bool = False
    interrupt_behavior: Literal["block", "cancel"] = "block"
    known: bool = True
    valid: bool = True
    rejects: bool = False


@attrs.frozen
class RunRecord(EventLog):
    """One executor's life as the invariants see it.

    Attributes:
        facts: one per call, indexed like the events' ``index``.
        events: what happened, in order.
        statistics: ``executor.statistics()`` after the block.
        max_concurrency: the executor's cap.
        turn_cancelled: whether the turn scope was cancelled.
        leaked_tasks: tool tasks alive after the block.
        tool_tasks: how many tool tasks were spawned.
    """

    facts: tuple[CallFacts, ...]
    events: tuple[TraceEvent, ...]
    statistics: ExecutorStatistics
    max_concurrency: int
    turn_cancelled: bool
    leaked_tasks: tuple[str, ...]
    tool_tasks: int


def check(condition: bool, message: str) -> None:
    """Raise :class:`InvariantViolation` with *message* unless *condition*."""
    if not condition:
        raise InvariantViolation(message)


def _positions(events: tuple[TraceEvent, ...], kinds: Iterable[EventKind]) -> dict[int, int]:
    wanted = set(kinds)
    found: dict[int, int] = {}
    for pos, e in enumerate(events):
        if e.kind in wanted and e.index not in found:
            found[e.index] = pos
    return found


def check_record(run: RunRecord) -> None:
    """Check the invariants every run must keep, whatever the timing.

    Pairing, order, exclusivity, the concurrency cap, cascade scope,
    escalation, interrupt and discard scope, progress before its result,
    statistics, and no tool task left after the block.

    Raises:
        InvariantViolation: with a message saying which invariant and call.
    """
    added = check_pairing(run)
    check_order(run)
    finished_at = check_progress(run)
    check_exclusivity(run, added)
    check_aborts(run, finished_at)


def check_pairing(run: RunRecord) -> list[int]:
    """Exactly one result and one ToolFinished per added call, none for others;
    ``started`` tells the truth. Returns the added calls."""
    added = [i for i in range(len(run.facts)) if run.of(i, "added")]
    added_set = set(added)
    for i, facts in enumerate(run.facts):
        results = run.of(i, "delivered", "drained")
        finished = run.of(i, "finished")
        if i not in added_set:
            check(not results and not finished, f"call {i} was never added but has a result")
            continue
        check(len(results) == 1, f"call {i}: {len(results)} results, want exactly 1")
        check(len(finished) == 1, f"call {i}: {len(finished)} ToolFinished, want 1")
        result: ToolResult = results[0].detail
        notice: ToolFinished = finished[0].detail
        check(result.tool_use_id == facts.tool_use_id, f"call {i}: result for the wrong id")
        check(
            (notice.is_error, notice.abort_reason) == (result.is_error, result.abort_reason),
            f"call {i}: ToolFinished {notice} disagrees with its result {result}",
        )
        ran = bool(run.of(i, "started"))
        check(result.started == ran, f"call {i}: started={result.started} but run called: {ran}")
    return added


def check_order(run: RunRecord) -> None:
    """Delivered results come in add order, drained ones are the rest."""
    events = run.events
    add_order = [e.index for e in events if e.kind == "added"]
    got = [e.index for e in events if e.kind in ("delivered", "drained")]
    check(got == add_order, f"results came in order {got}, calls were added {add_order}")
    kinds = [e.kind for e in events if e.kind in ("delivered", "drained")]
    check(kinds == sorted(kinds, key=lambda k: k == "drained"), "a result delivered after drain")


def check_progress(run: RunRecord) -> dict[int, int]:
    """Progress strictly before the call's ToolFinished. Returns where each
    call's ToolFinished is."""
    finished_at = _positions(run.events, ["finished"])
    for pos, e in enumerate(run.events):
        if e.kind == "progress":
            check(pos < finished_at.get(e.index, -1), f"call {e.index}: progress after its result")
    return finished_at


def check_exclusivity(run: RunRecord, added: list[int]) -> None:
    """No non-safe call overlaps another; the cap holds; statistics add up;
    no tool task is left."""
    events = run.events
    starts = _positions(events, ["started"])
    stops = _positions(events, ["stopped"])
    runs = {i: (starts[i], stops.get(i, len(events))) for i in starts}
    for i, (a0, a1) in runs.items():
        if not run.facts[i].safe:
            for j, (b0, b1) in runs.items():
                check(j == i or b1 < a0 or a1 < b0, f"non-safe call {i} overlapped call {j}")
    open_runs = peak = 0
    for e in events:
        if e.kind == "started":
            open_runs += 1
            peak = max(peak, open_runs)
        elif e.kind == "stopped":
            open_runs -= 1
    cap = run.max_concurrency
    check(peak <= cap, f"{peak} tools ran at once, cap {cap}")
    stats = run.statistics
    check(
        (stats.queued, stats.executing, stats.finished) == (0, 0, len(added)),
        f"final statistics {stats} for {len(added)} calls",
    )
    check(peak <= stats.peak_concurrency <= cap, f"peak {stats} vs observed {peak}")
    check(not run.leaked_tasks, f"tool tasks outlived the executor: {run.leaked_tasks}")
    check(run.tool_tasks >= len(runs), "fewer tool tasks than tools run")


def check_aborts(run: RunRecord, finished_at: dict[int, int]) -> None:
    """Every abort reason has its cause and reaches exactly its scope."""
    facts, events = run.facts, run.events
    action_at = {
        e.detail: pos for pos, e in reversed(list(enumerate(events))) if e.kind == "action"
    }
    by_reason: dict[str | None, list[int]] = {}
    for i in finished_at:
        result = run.result(i)
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
        if facts[i].cascade and run.of(i, "started") and result_kind(run.result(i)) == "error"  # type: ignore[arg-type]
    )
    check(bool(culprits) or not siblings, "sibling_error without a failing cascading call")
    if culprits:
        pos, culprit = culprits[0]
        for i in after(pos):
            if facts[i].known:
                check(i in siblings, f"call {i} escaped the cascade of call {culprit}")
        for i in siblings:
            check(
                events[finished_at[i]].time >= events[pos].time,
                f"call {i} got sibling_error before call {culprit} failed",
            )

    # permission_rejected: the rejecting call first, then everything unfinished;
    # the turn is cancelled and nothing is added afterwards.
    rejected = by_reason.get(AbortReason.PERMISSION_REJECTED, [])
    if rejected:
        first = min(finished_at[i] for i in rejected)
        culprit = events[first].index
        check(facts[culprit].rejects, f"call {culprit} rejected without Reject")
        check(run.turn_cancelled, "a rejection did not cancel the turn")
        for i in after(first):
            check(i in rejected, f"call {i} escaped the escalation of call {culprit}")
        added_later = [e.index for e in events[first:] if e.kind == "added"]
        check(not added_later, f"calls {added_later} added after the turn was rejected")

    # interrupt: only "cancel" tools, only after interrupt().
    for i in by_reason.get(AbortReason.INTERRUPT, []):
        check(facts[i].interrupt_behavior == "cancel", f"interrupt cancelled block call {i}")
        check(
            "interrupt" in action_at and action_at["interrupt"] < finished_at[i],
            f"call {i} interrupted before interrupt()",
        )

    # streaming_fallback: only after discard(); nothing added or delivered afterwards.
    if "discard" in action_at:
        pos = action_at["discard"]
        late = [e.kind for e in events[pos:] if e.kind in ("added", "delivered")]
        check(not late, f"{late} after discard()")
    for i in by_reason.get(AbortReason.STREAMING_FALLBACK, []):
        check(
            "discard" in action_at and action_at["discard"] < finished_at[i],
            f"call {i} got streaming_fallback before discard()",
        )

    # user_interrupted: only after the turn was cancelled from outside.
    for i in by_reason.get(AbortReason.USER_INTERRUPTED, []):
        check(
            "cancel_turn" in action_at and action_at["cancel_turn"] < finished_at[i],
            f"call {i} user_interrupted without a turn cancellation",
        )


def record_of_trace(trace: Trace) -> RunRecord:
    """A scenario trace in the common model: the facts come from the scenario."""
    sc = trace.scenario
    facts = tuple(
        CallFacts(
            sc.tool_use_id(i),
            safe=call.effectively_safe,
            cascade=call.cascade,
            interrupt_behavior=call.interrupt_behavior,
            known=call.input != "unknown_tool",
            valid=call.input == "valid",
            rejects=call.permission == "reject",
        )
        for i, call in enumerate(sc.calls)
    )
    return RunRecord(
        facts=facts,
        events=trace.events,
        statistics=trace.statistics,
        max_concurrency=sc.max_concurrency,
        turn_cancelled=trace.turn_cancelled,
        leaked_tasks=trace.leaked_tasks,
        tool_tasks=trace.tool_tasks,
    )


def check_trace(trace: Trace) -> None:
    """Check the invariants every scenario run must keep, whatever the timing.

    Pairing, order, exclusivity, the concurrency cap, cascade scope,
    escalation, interrupt and discard scope, progress before its result,
    statistics, and no tool task left after the block
    (:func:`check_record` on :func:`record_of_trace`).

    Raises:
        InvariantViolation: with a message saying which invariant and call.
    """
    check_record(record_of_trace(trace))
