"""Property tests: for generated scenarios the real executor, in virtual time,
does exactly what the reference model says and keeps every invariant.

Run longer with ``HYPOTHESIS_PROFILE=ci-long``.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings

from trio_agent.testing import (
    ToolScenario,
    check_trace,
    reference_schedule,
    result_kind,
    run_scenario,
    scenarios,
)

LONG = os.environ.get("HYPOTHESIS_PROFILE") == "ci-long"


def examples(default: int) -> int:
    return default * 20 if LONG else default


def agrees(scenario: ToolScenario) -> None:
    trace = run_scenario(scenario)
    check_trace(trace)
    assert trace.schedule() == reference_schedule(scenario)
    for i, call in enumerate(scenario.calls):
        result = trace.result(i)
        if result is not None and result_kind(result) == "ok":
            assert result.content == f"ok {i}"
            assert call.outcome == "ok"


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_the_executor_matches_the_reference(scenario: ToolScenario) -> None:
    agrees(scenario)


@settings(max_examples=examples(200), deadline=None)
@given(
    scenarios(
        actions=False, permissions=False, defects=False, cascades=False, outcomes=("ok", "error")
    )
)
def test_scheduling_alone_matches_the_reference(scenario: ToolScenario) -> None:
    agrees(scenario)
    # Without aborts, every call is added, runs and is delivered in order.
    schedule = reference_schedule(scenario)
    assert all(c.added and c.started and c.via == "results" for c in schedule.calls)


@settings(max_examples=examples(60), deadline=None)
@given(scenarios(min_calls=10, max_calls=16, max_concurrency=3))
def test_large_batches_match_the_reference(scenario: ToolScenario) -> None:
    agrees(scenario)
