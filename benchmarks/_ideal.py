"""The ideal schedule of a turn's tools, from the actual block-finish times.

``trio_agent.testing.reference_schedule`` (the library's pure reference model) is used
when it is there; until it lands, :func:`own_schedule` simulates the same documented
rules: a call starts once its block has finished streaming and nothing runs, or it and
everything running are concurrency-safe, with fewer than ``max_concurrency`` running;
calls are considered in order and a non-safe call that cannot start holds back every
later one; a failing call that cascades ends its running siblings at once, and no
later call of the batch starts.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs


@attrs.frozen
class IdealCall:
    id: str
    arrive: float  # its block finished streaming
    duration: float
    safe: bool
    cascades: bool = False  # fails, and its failure cancels the siblings


def own_schedule(
    calls: Sequence[IdealCall], max_concurrency: int = 10
) -> dict[str, tuple[float, float]]:
    """Each call's (start, end) under the executor's rules, with zero overhead."""
    pending = list(calls)
    running: dict[str, tuple[IdealCall, float]] = {}  # id -> (call, end)
    out: dict[str, tuple[float, float]] = {}
    now = 0.0
    cascaded = False
    while pending or running:
        if cascaded:
            # After a cascade the batch takes no more work: later calls never start.
            for call in pending:
                out[call.id] = (max(now, call.arrive), max(now, call.arrive))
            pending.clear()
        # Start what may start now, in order.
        progressed = True
        while progressed:
            progressed = False
            for call in list(pending):
                if call.arrive > now:
                    break
                all_safe = all(c.safe for c, _ in running.values())
                may = not running or (call.safe and all_safe)
                if may and len(running) < max_concurrency:
                    pending.remove(call)
                    running[call.id] = (call, now + call.duration)
                    out[call.id] = (now, now + call.duration)
                    progressed = True
                    break
                if not call.safe:
                    break  # a blocked non-safe call holds back every later one
        # Next event: a call ends, or a block arrives.
        times = [end for _, end in running.values()] + [c.arrive for c in pending if c.arrive > now]
        if not times:
            break
        now = max(now, min(times))
        for cid, (call, end) in list(running.items()):
            if end <= now:
                del running[cid]
                if call.cascades:
                    cascaded = True
                    for sid, (_, _) in list(running.items()):
                        out[sid] = (out[sid][0], now)
                        del running[sid]
    return out


def ideal_schedule(calls: Sequence[IdealCall]) -> tuple[dict[str, tuple[float, float]], str]:
    """The schedule and which model computed it."""
    try:
        from trio_agent.testing import reference_schedule  # type: ignore[attr-defined]
    except ImportError:
        return own_schedule(calls), "benchmarks' own schedule (reference_schedule not available)"
    return _with_reference(reference_schedule, calls)


def _with_reference(
    reference_schedule: object, calls: Sequence[IdealCall]
) -> tuple[dict[str, tuple[float, float]], str]:
    # Adapted when the reference model lands; until its signature is known, fall back.
    del reference_schedule
    return own_schedule(calls), "benchmarks' own schedule (reference_schedule adapter pending)"
