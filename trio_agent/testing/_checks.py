"""The invariants every run of the executor keeps, checked on a :class:`Trace`.

Whatever the timing: pairing, order, exclusivity, the concurrency cap, cascade
scope, escalation, interrupt and discard scope, progress before its result,
statistics, and no tool task left after the block.
"""

from __future__ import annotations

from collections.abc import Iterable

from .._results import AbortReason, ToolFinished, ToolResult
from ._trace import EventKind, InvariantViolation, Trace, result_kind

__all__ = ["check_trace"]


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
