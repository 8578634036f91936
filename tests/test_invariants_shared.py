"""check_record over a scenario trace agrees with check_trace: one set of invariants
for synthetic scenarios and users' real tools."""

from __future__ import annotations

from collections.abc import Callable

import attrs
import pytest
from hypothesis import given, settings

from trio_agent.testing import (
    InvariantViolation,
    ScenarioCall,
    ToolScenario,
    Trace,
    check_trace,
    run_scenario,
    scenarios,
)
from trio_agent.testing._invariants import check_record, record_of_trace


@settings(max_examples=100, deadline=None)
@given(scenarios(max_calls=6))
def test_real_traces_pass_both(scenario: ToolScenario) -> None:
    trace = run_scenario(scenario)
    check_trace(trace)
    check_record(record_of_trace(trace))


GOOD = ToolScenario(
    [
        ScenarioCall(duration=2, progress=(0.5,), safe=True),
        ScenarioCall(duration=1, safe=True),
        ScenarioCall(duration=1, safe=False),
    ]
)


def _pos(trace: Trace, kind: str, index: int) -> int:
    return next(p for p, e in enumerate(trace.events) if e.kind == kind and e.index == index)


def _drop(kind: str, index: int) -> Callable[[Trace], Trace]:
    def edit(trace: Trace) -> Trace:
        events = list(trace.events)
        del events[_pos(trace, kind, index)]
        return attrs.evolve(trace, events=tuple(events))

    return edit


def _leak(trace: Trace) -> Trace:
    return attrs.evolve(trace, leaked_tasks=("x",))


def _no_tasks(trace: Trace) -> Trace:
    return attrs.evolve(trace, turn_cancelled=True, tool_tasks=0)


def _overlap(trace: Trace) -> Trace:
    events = list(trace.events)
    started = events.pop(_pos(trace, "started", 2))
    events.insert(_pos(trace, "started", 0), started)
    return attrs.evolve(trace, events=tuple(events))


@pytest.mark.parametrize(
    "corrupt",
    [
        _drop("delivered", 1),
        _drop("finished", 2),
        _overlap,
        _leak,
        _no_tasks,
    ],
)
def test_broken_traces_fail_both_alike(corrupt: Callable[[Trace], Trace]) -> None:
    broken = corrupt(run_scenario(GOOD))
    with pytest.raises(InvariantViolation) as by_trace:
        check_trace(broken)
    with pytest.raises(InvariantViolation) as by_record:
        check_record(record_of_trace(broken))
    assert str(by_record.value) == str(by_trace.value)
