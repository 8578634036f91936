"""run_scenario traces, and check_trace catching broken ones."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from hypothesis import given, settings

from trio_agent import AbortReason, ToolFinished, ToolResult
from trio_agent._executor import ToolExecutor
from trio_agent.testing import (
    InvariantViolation,
    ScenarioCall,
    ToolScenario,
    Trace,
    TraceEvent,
    check_trace,
    reference_schedule,
    run_scenario,
    scenarios,
)

MIXED = ToolScenario(
    [
        ScenarioCall(duration=2, progress=(0.5,), safe=True),
        ScenarioCall(duration=1, safe=True),
        ScenarioCall(duration=1, safe=False),
        ScenarioCall(arrival=1.5, duration=1, safe=True, outcome="raise"),
    ]
)


def test_a_trace_records_what_happened() -> None:
    trace = run_scenario(MIXED)
    check_trace(trace)
    # Trio runs the tasks of one instant in any order: compare per instant.
    kinds = sorted((e.time, e.kind, e.index) for e in trace.events if e.kind != "action")
    assert kinds == sorted(
        [
            (0, "added", 0),
            (0, "added", 1),
            (0, "added", 2),
            (0, "started", 0),
            (0, "started", 1),
            (0.5, "progress", 0),
            (1, "stopped", 1),
            (1, "finished", 1),
            (1.5, "added", 3),
            (2, "stopped", 0),
            (2, "finished", 0),
            (2, "delivered", 0),
            (2, "delivered", 1),
            (2, "started", 2),
            (3, "stopped", 2),
            (3, "finished", 2),
            (3, "delivered", 2),
            (3, "started", 3),
            (4, "stopped", 3),
            (4, "finished", 3),
            (4, "delivered", 3),
        ]
    )
    for i in range(4):  # each call's own events are in causal order
        kinds_of_call = [e.kind for e in trace.of(i) if e.kind != "progress"]
        assert kinds_of_call[:3] == ["added", "started", "stopped"]
        # The two consumers wake together: either may record first.
        assert sorted(kinds_of_call[3:]) == ["delivered", "finished"]
    assert trace.result(3) == ToolResult(
        "toolu_003", "Error: tool_3 raised RuntimeError: tool 3 failed", is_error=True, started=True
    )
    assert trace.tool_tasks == 4
    assert trace.leaked_tasks == ()
    assert trace.statistics.peak_concurrency == 2
    assert not trace.turn_cancelled


def test_runs_are_deterministic_in_virtual_time() -> None:
    scenario = attrs.evolve(MIXED, interrupt_at=(1.5,), cancel_turn_at=2.5)
    first, second = run_scenario(scenario), run_scenario(scenario)
    assert first.schedule() == second.schedule() == reference_schedule(scenario)


# -- check_trace catches broken traces (the mutations common to check_tool_run are in
# test_checker_mutations.py) ---------------------------------------------------------


def edit(trace: Trace, events: list[TraceEvent], **changes: Any) -> Trace:
    return attrs.evolve(trace, events=tuple(events), **changes)


def find(trace: Trace, kind: str, index: int) -> int:
    return next(p for p, e in enumerate(trace.events) if e.kind == kind and e.index == index)


@pytest.fixture(scope="module")
def good() -> Trace:
    trace = run_scenario(MIXED)
    check_trace(trace)
    return trace


def relabel(trace: Trace, index: int, reason: AbortReason | None) -> list[TraceEvent]:
    """The trace with call *index*'s result changed to *reason* (None: ok)."""
    events = list(trace.events)
    is_error = reason is not None
    for pos, e in enumerate(trace.events):
        if e.index != index or e.kind not in ("delivered", "drained", "finished"):
            continue
        detail = e.detail
        new = (
            attrs.evolve(detail, abort_reason=reason, is_error=is_error)
            if isinstance(detail, ToolResult)
            else ToolFinished(detail.tool_use_id, is_error, reason)
        )
        events[pos] = attrs.evolve(events[pos], detail=new)
    return events


@pytest.mark.parametrize(
    ("reason", "match"),
    [
        (AbortReason.SIBLING_ERROR, "without a failing cascading call"),
        (AbortReason.PERMISSION_REJECTED, "rejected without Reject"),
        (AbortReason.INTERRUPT, "interrupt cancelled block call 1"),
        (AbortReason.STREAMING_FALLBACK, "call 1"),
        (AbortReason.USER_INTERRUPTED, "without a turn cancellation"),
    ],
)
def test_an_abort_without_its_cause_is_caught(good: Trace, reason: AbortReason, match: str) -> None:
    with pytest.raises(InvariantViolation, match=match):
        check_trace(edit(good, relabel(good, 1, reason)))


def test_a_call_escaping_a_cascade_is_caught() -> None:
    scenario = ToolScenario(
        [
            ScenarioCall(duration=1, outcome="error", cascade=True, safe=True),
            ScenarioCall(duration=5, safe=True),
            ScenarioCall(arrival=2),
        ]
    )
    trace = run_scenario(scenario)
    check_trace(trace)
    with pytest.raises(InvariantViolation, match="call 2 escaped the cascade of call 0"):
        check_trace(edit(trace, relabel(trace, 2, None)))


def test_a_call_escaping_an_escalation_is_caught() -> None:
    scenario = ToolScenario(
        [
            ScenarioCall(permission="reject", permission_delay=1, safe=True),
            ScenarioCall(duration=5, safe=True),
        ]
    )
    trace = run_scenario(scenario)
    check_trace(trace)
    with pytest.raises(InvariantViolation, match="call 1 escaped the escalation"):
        check_trace(edit(trace, relabel(trace, 1, None)))
    with pytest.raises(InvariantViolation, match="did not cancel the turn"):
        check_trace(attrs.evolve(trace, turn_cancelled=False))


# -- the harness catches a broken executor ---------------------------------------------


def test_a_scheduler_that_lets_calls_pass_a_non_safe_one_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def greedy_pump(self: Any) -> None:
        for call in list(self._queue):
            if call.result is None and (
                self._slots < self._max_concurrency
                and (self._slots == 0 or (call.safe and self._unsafe_slots == 0))
            ):
                self._queue.remove(call)
                self._start(call)  # skips over a blocked non-safe call

    scenario = ToolScenario(
        [
            ScenarioCall(duration=3, safe=True),
            ScenarioCall(duration=1, safe=False),
            ScenarioCall(duration=1, safe=True),
        ]
    )
    assert run_scenario(scenario).schedule() == reference_schedule(scenario)
    monkeypatch.setattr(ToolExecutor, "_pump", greedy_pump)
    assert run_scenario(scenario).schedule() != reference_schedule(scenario)


def test_the_strategy_checks_its_arguments() -> None:
    with pytest.raises(ValueError, match="max_calls"):
        scenarios(max_calls=17)
    with pytest.raises(ValueError, match="outcomes"):
        scenarios(outcomes=())


@settings(max_examples=50, deadline=None)
@given(scenarios(max_calls=6))
def test_generated_scenarios_always_end(scenario: ToolScenario) -> None:
    schedule = reference_schedule(scenario)
    for call, outcome in zip(scenario.calls, schedule.calls, strict=True):
        assert outcome.added == (outcome.end is not None)
        if outcome.start is not None and call.outcome != "hang" and outcome.kind == "ok":
            assert outcome.end == outcome.start + call.duration


def test_unknown_tools_added_after_a_cascade_are_still_errors() -> None:
    scenario = ToolScenario(
        [
            ScenarioCall(duration=1, outcome="raise", cascade=True),
            ScenarioCall(arrival=2, input="unknown_tool"),
            ScenarioCall(arrival=2),
        ]
    )
    trace = run_scenario(scenario)
    check_trace(trace)
    assert [c.kind for c in trace.outcomes()] == ["error", "error", "sibling_error"]
