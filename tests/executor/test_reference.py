"""The reference model, and the seeds' timelines through both it and the real executor."""

from __future__ import annotations

import pytest

from trio_agent.testing import (
    CallOutcome,
    ScenarioCall,
    ScenarioError,
    Schedule,
    ToolScenario,
    check_trace,
    reference_schedule,
    run_scenario,
)

READ = {"safe": True}
WRITE = {"safe": False}


def both(scenario: ToolScenario) -> Schedule:
    """The reference's schedule, after checking the real executor agrees."""
    expected = reference_schedule(scenario)
    trace = run_scenario(scenario)
    check_trace(trace)
    assert trace.schedule() == expected
    return expected


def spans(schedule: Schedule) -> list[tuple[float | None, float | None, str | None]]:
    return [(c.start, c.end, c.kind) for c in schedule.calls]


def test_seed_read_read_bash_read_read_streaming() -> None:
    """[Read_1, Read_2, Bash_1, Read_3, Read_4], one block per second."""
    calls = [
        ScenarioCall(arrival=0, duration=3, name="Read_1", **READ),
        ScenarioCall(arrival=1, duration=3, name="Read_2", **READ),
        ScenarioCall(arrival=2, duration=2, name="Bash_1", **WRITE),
        ScenarioCall(arrival=3, duration=3, name="Read_3", **READ),
        ScenarioCall(arrival=4, duration=3, name="Read_4", **READ),
    ]
    schedule = both(ToolScenario(calls))
    assert spans(schedule) == [
        (0, 3, "ok"),
        (1, 4, "ok"),
        (4, 6, "ok"),  # waits for both reads
        (6, 9, "ok"),  # wait for Bash, then run together
        (6, 9, "ok"),
    ]
    assert schedule.peak_concurrency == 2
    assert all(c.via == "results" for c in schedule.calls)


def test_seed_bash_failure_cancels_the_reads_queued_behind_it() -> None:
    calls = [
        ScenarioCall(arrival=0, duration=3, name="Read_1", **READ),
        ScenarioCall(arrival=1, duration=3, name="Read_2", **READ),
        ScenarioCall(arrival=2, duration=2, name="Bash_1", outcome="error", cascade=True, **WRITE),
        ScenarioCall(arrival=3, duration=3, name="Read_3", **READ),
        ScenarioCall(arrival=7, duration=3, name="Read_4", **READ),
    ]
    schedule = both(ToolScenario(calls))
    assert spans(schedule) == [
        (0, 3, "ok"),
        (1, 4, "ok"),
        (4, 6, "error"),
        (None, 6, "sibling_error"),
        (None, 7, "sibling_error"),  # added after the failure: cancelled at once
    ]


def test_seed_read_read_write_read() -> None:
    calls = [
        ScenarioCall(duration=1, name="Read_a", **READ),
        ScenarioCall(duration=1, name="Read_b", **READ),
        ScenarioCall(duration=2, name="Write", **WRITE),
        ScenarioCall(duration=1, name="Read_c", **READ),
    ]
    assert spans(both(ToolScenario(calls))) == [
        (0, 1, "ok"),
        (0, 1, "ok"),
        (1, 3, "ok"),
        (3, 4, "ok"),
    ]


def test_seed_read_read_grep_write() -> None:
    """[Read(a), Read(b), Grep, Write(c)]: three safe tools together, then Write."""
    calls = [
        ScenarioCall(duration=2, name="Read_a", **READ),
        ScenarioCall(duration=1, name="Read_b", **READ),
        ScenarioCall(duration=3, name="Grep", **READ),
        ScenarioCall(duration=1, name="Write_c", **WRITE),
    ]
    schedule = both(ToolScenario(calls))
    assert spans(schedule) == [(0, 2, "ok"), (0, 1, "ok"), (0, 3, "ok"), (3, 4, "ok")]
    assert schedule.peak_concurrency == 3


def test_cap_and_safe_calls_overtaking_nothing() -> None:
    calls = [ScenarioCall(duration=d, **READ) for d in (1, 2, 3, 1, 1)]
    schedule = both(ToolScenario(calls, max_concurrency=2))
    assert spans(schedule) == [
        (0, 1, "ok"),
        (0, 2, "ok"),
        (1, 4, "ok"),
        (2, 3, "ok"),
        (3, 4, "ok"),
    ]


def test_defects_and_permissions() -> None:
    calls = [
        ScenarioCall(input="unknown_tool", duration=5),
        ScenarioCall(input="schema_error", duration=5, **READ),  # unsafe: waits
        ScenarioCall(permission="deny", permission_delay=0.5, **READ),
        ScenarioCall(safe="raises", duration=1),
        ScenarioCall(input="invalid_json", duration=5, **READ),
    ]
    assert spans(both(ToolScenario(calls))) == [
        (None, 0, "error"),
        (None, 0, "error"),
        (None, 0.5, "error"),
        (0.5, 1.5, "ok"),
        (None, 1.5, "error"),
    ]


def test_reject_ends_the_turn() -> None:
    calls = [
        ScenarioCall(duration=4, **READ),
        ScenarioCall(permission="reject", permission_delay=1, **READ),
        ScenarioCall(duration=1, **WRITE),
        ScenarioCall(arrival=2),
    ]
    schedule = both(ToolScenario(calls))
    assert schedule.turn_cancelled
    assert schedule.calls == (
        CallOutcome(True, 0, 1, "permission_rejected", True, "drain"),
        CallOutcome(True, None, 1, "permission_rejected", False, "drain"),
        CallOutcome(True, None, 1, "permission_rejected", False, "drain"),
        CallOutcome(False),
    )


def test_interrupt_discard_and_cancel() -> None:
    calls = [
        ScenarioCall(duration=10, interrupt_behavior="cancel", progress=(0.25, 3), **READ),
        ScenarioCall(duration=10, progress=(1,), **READ),
        ScenarioCall(arrival=3, interrupt_behavior="cancel"),
        ScenarioCall(arrival=4, outcome="hang", **WRITE),
        ScenarioCall(arrival=6),
    ]
    schedule = both(ToolScenario(calls, interrupt_at=(2.5,), discard_at=5.5))
    assert schedule.calls == (
        CallOutcome(True, 0, 2.5, "interrupt", True, "results", (0.25,)),
        CallOutcome(True, 0, 5.5, "streaming_fallback", True, "drain", (1,)),
        CallOutcome(True, None, 3, "interrupt", False, "drain"),
        CallOutcome(True, None, 5.5, "streaming_fallback", False, "drain"),
        CallOutcome(False),  # refused: after discard()
    )
    cancelled = both(ToolScenario(calls[:4], cancel_turn_at=4.5, consume_results=False))
    assert [(c.kind, c.started) for c in cancelled.calls] == [
        ("user_interrupted", True),
        ("user_interrupted", True),
        ("ok", True),
        ("user_interrupted", False),  # queued behind the reads
    ]


def test_calls_after_finish_are_refused() -> None:
    calls = [ScenarioCall(), ScenarioCall(arrival=2)]
    schedule = both(ToolScenario(calls, finish_at=1.5))
    assert [c.added for c in schedule.calls] == [True, False]


def test_a_hang_nothing_cancels_is_reported() -> None:
    scenario = ToolScenario([ScenarioCall(outcome="hang")])
    with pytest.raises(ScenarioError, match="never ends"):
        reference_schedule(scenario)
    with pytest.raises(ScenarioError, match="never ends"):
        run_scenario(scenario)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"calls": [ScenarioCall(arrival=2), ScenarioCall(arrival=1)]}, "arrival order"),
        ({"calls": [ScenarioCall(name="x"), ScenarioCall(name="x")]}, "distinct"),
        ({"calls": [], "max_concurrency": 0}, "at least 1"),
        ({"calls": [], "finish_at": -1.0}, "finish_at"),
        ({"calls": [], "interrupt_at": (float("nan"),)}, "interrupt_at"),
    ],
)
def test_malformed_scenarios_are_refused(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ScenarioError, match=match):
        ToolScenario(**kwargs)  # type: ignore[arg-type]


def test_bad_call_values_are_refused() -> None:
    with pytest.raises(ScenarioError, match="duration"):
        ScenarioCall(duration=float("inf"))


def test_progress_after_the_end_is_never_reported() -> None:
    schedule = both(ToolScenario([ScenarioCall(duration=1, progress=(0.5, 1, 2))]))
    assert schedule.calls[0].progress == (0.5, 1)


def test_reference_orders_same_instant_events_by_cause() -> None:
    """A tie the generated grid never makes: call 0 ends as call 1 fails at t=1.

    The reference takes call 0's end first (it was scheduled first), so call 2
    gets call 0's slot at t=1 and is cancelled by call 1's failure before it runs.
    """
    calls = [
        ScenarioCall(duration=1, **READ),
        ScenarioCall(duration=1, outcome="error", cascade=True, **READ),
        ScenarioCall(duration=1, **READ),
    ]
    schedule = reference_schedule(ToolScenario(calls, max_concurrency=2))
    assert [(c.start, c.end, c.kind) for c in schedule.calls] == [
        (0, 1, "ok"),
        (0, 1, "error"),
        (None, 1, "sibling_error"),
    ]
