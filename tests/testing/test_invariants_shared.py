"""One set of invariants for synthetic scenarios and users' real tools: a scenario
trace maps onto the common RunRecord (check_trace is check_record on it)."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given, settings

from trio_agent.testing import (
    InvariantViolation,
    ScenarioCall,
    ToolScenario,
    check_trace,
    run_scenario,
    scenarios,
)
from trio_agent.testing._checks import check_record, record_of_trace


@settings(max_examples=100, deadline=None)
@given(scenarios(max_calls=6))
def test_real_traces_pass_both(scenario: ToolScenario) -> None:
    trace = run_scenario(scenario)
    check_trace(trace)
    check_record(record_of_trace(trace))


def test_the_facts_come_from_the_scenario() -> None:
    scenario = ToolScenario(
        [
            ScenarioCall(safe=True, cascade=True, interrupt_behavior="cancel"),
            ScenarioCall(safe=True, input="schema_error"),
            ScenarioCall(input="unknown_tool"),
            ScenarioCall(safe="raises", permission="reject"),
        ],
        max_concurrency=3,
    )
    record = record_of_trace(run_scenario(scenario))
    assert [(f.safe, f.cascade, f.interrupt_behavior, f.known, f.valid, f.rejects)
            for f in record.facts] == [
        (True, True, "cancel", True, True, False),
        (False, False, "block", True, False, False),
        (False, False, "block", False, False, False),
        (False, False, "block", True, True, True),
    ]  # fmt: skip
    assert [f.tool_use_id for f in record.facts] == [f"toolu_{i:03d}" for i in range(4)]
    assert record.max_concurrency == 3
    check_record(record)
    with pytest.raises(InvariantViolation, match="outlived"):
        check_record(attrs.evolve(record, leaked_tasks=("x",)))
