"""check_trace and check_tool_run catch the same broken records: each mutation of a good
record, applied to a scenario trace and to a run of real tools (the ``checked_run``
fixture is parametrized over both kinds)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import pytest

from trio_agent.testing import InvariantViolation


def drop_result(run: Any) -> Any:
    events = list(run.good.events)
    del events[run.find("delivered", 3)]
    return run.with_events(events)


def duplicate_result(run: Any) -> Any:
    extra = attrs.evolve(run.good.events[run.find("delivered", 1)], kind="drained")
    return run.with_events([*run.good.events, extra])


def swap_results(run: Any) -> Any:
    events = list(run.good.events)
    a, b = run.find("delivered", 0), run.find("delivered", 1)
    events[a], events[b] = events[b], events[a]
    return run.with_events(events)


def drop_added(run: Any) -> Any:
    return run.with_events(e for e in run.good.events if not (e.kind == "added" and e.index == 3))


def progress_last(run: Any) -> Any:
    events = list(run.good.events)
    events.append(events.pop(run.find("progress", 0)))
    return run.with_events(events)


def start_non_safe_first(run: Any) -> Any:
    events = list(run.good.events)
    started = events.pop(run.find("started", 2))
    events.insert(run.find("started", 0), started)
    return run.with_events(events)


def cap_one(run: Any) -> Any:
    return run.with_cap(1)


def leak_a_task(run: Any) -> Any:
    return attrs.evolve(run.good, leaked_tasks=("trio_agent tool x",))


def lie_about_statistics(run: Any) -> Any:
    return attrs.evolve(run.good, statistics=attrs.evolve(run.good.statistics, executing=1))


def lie_about_started(run: Any) -> Any:
    events = list(run.good.events)
    pos = run.find("delivered", 1)
    events[pos] = attrs.evolve(events[pos], detail=attrs.evolve(events[pos].detail, started=False))
    return run.with_events(events)


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (drop_result, "call 3: 0 results"),
        (duplicate_result, "call 1: 2 results"),
        (swap_results, "results came in order"),
        (drop_added, "never added"),
        (progress_last, "progress after its result"),
        (start_non_safe_first, "non-safe call 2 overlapped"),
        (cap_one, "2 tools ran at once, cap 1"),
        (leak_a_task, "outlived"),
        (lie_about_statistics, "final statistics"),
        (lie_about_started, "started=False"),
    ],
)
def test_a_broken_record_is_caught(
    checked_run: Any, mutate: Callable[[Any], Any], match: str
) -> None:
    broken = mutate(checked_run)
    with pytest.raises(InvariantViolation, match=match):
        checked_run.check(broken)
