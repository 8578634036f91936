"""Where a run stands against the targets of issues 5 and 13, computed from its series.

Every figure here is derived from the run's own rows (the same paired ratios as the
table), so a re-run refreshes the verdicts too. A target whose rows are missing
(the benchmark was not run) says so.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

from ._report import Series

PEERS = (
    "after-stream sequential",
    "after-stream parallel",
    "sdk tool_runner",
    "sdk tool_runner eager",
    "pydantic-ai",
)


def paired(a: Series, b: Series) -> float | None:
    """``a / b``: the median of per-repeat ratios when paired, else of the medians."""
    if a.skipped or b.skipped or not a.samples or not b.samples:
        return None
    if len(a.samples) == len(b.samples):
        pairs = [x / y for x, y in zip(a.samples, b.samples, strict=True) if y > 0]
        return statistics.median(pairs) if pairs else None
    return a.median / b.median if b.median > 0 else None


def _find(
    series: Sequence[Series], benchmark: str, contestant: str, metric: str = ""
) -> Series | None:
    for s in series:
        if (
            s.benchmark == benchmark
            and s.contestant.startswith(contestant)
            and s.metric.startswith(metric)
            and not s.skipped
            and s.samples
        ):
            return s
    return None


def _verdict(ok: bool | None) -> str:
    return {True: "**met**", False: "**missed**", None: "not measured"}[ok]


Row = tuple[str, str, str]  # target, verdict, where we stand


def _e2e_rows(series: Sequence[Series]) -> list[Row]:
    scenarios = sorted(
        {s.benchmark for s in series if s.benchmark.startswith("e2e.")},
        key=[s.benchmark for s in series].index,
    )
    if not scenarios:
        return [
            ("trio_agent / ideal <= 1.02 on every e2e scenario", _verdict(None), ""),
            ("faster than every peer on every scenario with tools", _verdict(None), ""),
        ]
    ideal_parts: list[str] = []
    ideal_ok = True
    peer_parts: list[str] = []
    peer_ok = True
    for name in scenarios:
        short = name.removeprefix("e2e.")
        ours = _find(series, name, "trio_agent", "turn wall time")
        ideal = _find(series, name, "ideal", "turn wall time")
        if ours is None or ideal is None:
            ideal_parts.append(f"{short} not measured")
            ideal_ok = False
            continue
        r = paired(ours, ideal)
        wide = next(
            (s for s in series if s.benchmark == name and s.contestant.startswith("trio_agent (")),
            None,
        )
        text = f"{short} {r:.3f}" if r is not None else f"{short} -"
        ideal_ok = ideal_ok and r is not None and r <= 1.02
        if wide is not None:
            wide_ideal = _find(series, name, "ideal (")
            rw = paired(wide, wide_ideal) if wide_ideal is not None else None
            if rw is not None:
                cap = wide.contestant.removeprefix("trio_agent (").rstrip(")")
                text += f" ({cap}: {rw:.3f})"
                ideal_ok = ideal_ok and rw <= 1.02
        ideal_parts.append(text)
        for who in (ours, wide):
            if who is None:
                continue
            slower = []
            for peer_name in PEERS:
                peer = next(
                    (s for s in series if s.benchmark == name and s.contestant == peer_name), None
                )
                if peer is None:
                    continue
                rp = paired(who, peer)
                if rp is not None and rp >= 1.0:
                    slower.append(f"{peer_name} ({rp:.3f})")
            label = (
                short
                if who is ours
                else f"{short} with {who.contestant.removeprefix('trio_agent (').rstrip(')')}"
            )
            if slower:
                if who is ours:
                    peer_ok = False
                peer_parts.append(f"{label}: slower than " + ", ".join(slower))
            elif who is not ours or wide is not None:
                peer_parts.append(f"{label}: faster than every peer")
    peer_text = "; ".join(peer_parts) if peer_parts else "faster than every peer everywhere"
    return [
        (
            "trio_agent / ideal <= 1.02 on every e2e scenario",
            _verdict(ideal_ok),
            ", ".join(ideal_parts),
        ),
        ("faster than every peer on every scenario with tools", _verdict(peer_ok), peer_text),
    ]


def _ratio_row(
    series: Sequence[Series],
    target: str,
    benchmark: str,
    ours: str,
    other: str,
    metric: str,
    show: Callable[[float], str],
    ok: Callable[[float], bool],
) -> Row:
    a = _find(series, benchmark, ours, metric)
    b = _find(series, benchmark, other, metric)
    r = paired(a, b) if a is not None and b is not None else None
    if r is None:
        return (target, _verdict(None), "")
    return (target, _verdict(ok(r)), show(r))


def _value_row(
    series: Sequence[Series],
    target: str,
    benchmark: str,
    contestant: str,
    metric: str,
    show: Callable[[Series], str],
    ok: Callable[[float], bool],
) -> Row:
    s = _find(series, benchmark, contestant, metric)
    if s is None:
        return (target, _verdict(None), "")
    return (target, _verdict(ok(s.median)), show(s))


def targets(series: Sequence[Series]) -> list[Row]:
    """(target, verdict, where we stand) for each target of issues 5 and 13."""
    rows = _e2e_rows(series)
    rows.append(
        _ratio_row(
            series,
            "dispatch overhead <= 2x bare Trio",
            "dispatch",
            "trio_agent executor (max_concurrency=N)",
            "bare trio",
            "us per no-op tool",
            lambda r: f"{r:.2f}x bare Trio's time per tool (executor with max_concurrency=N)",
            lambda r: r <= 2.0,
        )
    )
    for label, metric, goal in (
        ("text (20k deltas), CPU", "CPU text 20k deltas", 10.0),
        ("tool input in 8k deltas, CPU", "CPU tool input 8k deltas", 50.0),
    ):
        # Through feed(), one call per event: what a user's own stream loop calls
        # (issue 32). feed_deltas (a batch API) is shown beside it, not the goal.
        batch = _find(series, "accumulator", "trio_agent feed_deltas", metric)
        sdk = _find(series, "accumulator", "sdk accumulate_event", metric)
        by_batch = paired(batch, sdk) if batch is not None and sdk is not None else None
        rows.append(
            _ratio_row(
                series,
                f"accumulator feed() per event >= {goal:g}x the SDK on {label}",
                "accumulator",
                "trio_agent",
                "sdk accumulate_event",
                metric,
                lambda r, by_batch=by_batch: (
                    f"{1 / r:.1f}x the SDK's speed with one feed() call per event"
                    + (f" ({1 / by_batch:.1f}x through the batch feed_deltas)" if by_batch else "")
                ),
                lambda r, goal=goal: 1 / r >= goal,
            )
        )
    for label, metric, goal in (
        ("one event per read", "CPU ms per stream, one event per read", 1.0),
        ("64 KiB reads", "CPU ms per stream, 64 KiB reads", 1.1),
        ("loopback TCP, events paced", "CPU ms per stream, loopback TCP paced", 1.3),
    ):
        rows.append(
            _ratio_row(
                series,
                f"stream pipeline, {label}: CPU <= {goal:g}x bare httpx-sse + json.loads",
                "pipeline",
                "trio_agent client",
                "bare httpx-sse + json.loads",
                metric,
                lambda r: f"{r:.2f}x bare httpx-sse's CPU time",
                lambda r, goal=goal: r <= goal,
            )
        )
    bare_cancel = _find(series, "cancellation", "bare trio", "ms until")
    rows.append(
        _value_row(
            series,
            "cancellation of 1,000 siblings < 5 ms",
            "cancellation",
            "trio_agent",
            "ms until",
            lambda s: (
                f"{s.median:.1f} ms"
                + (f" (bare Trio {bare_cancel.median:.1f} ms)" if bare_cancel else "")
            ),
            lambda v: v < 5.0,
        )
    )
    rows.append(
        _ratio_row(
            series,
            "cancelling 1,000 siblings <= 1.3x bare Trio with a cancel scope per task",
            "cancellation",
            "trio_agent",
            "bare trio, a cancel scope per task",
            "ms until",
            lambda r: f"{r:.2f}x bare Trio (a cancel scope per task)",
            lambda r: r <= 1.3,
        )
    )
    for tools in (100, 10):
        bare = _find(
            series, "progress", "bare trio", f"p99 latency ctx.progress -> consumer ({tools} "
        )
        rows.append(
            _value_row(
                series,
                f"progress p99 < 1 ms ({tools} tools reporting every ms)",
                "progress",
                "trio_agent",
                f"p99 latency ctx.progress -> consumer ({tools} ",
                lambda s, bare=bare: (
                    f"{s.median / 1000:.3f} ms"
                    + (f" (bare Trio {bare.median / 1000:.3f} ms)" if bare else "")
                ),
                lambda v: v < 1000.0,
            )
        )
    rows.append(
        _ratio_row(
            series,
            "Session CPU per turn <= 1.25x the after-stream loop, GC on, N = 1,000",
            "scale",
            "trio_agent Session",
            "after-stream parallel (same client)",
            "CPU per turn",
            lambda r: f"{r:.2f}x the after-stream loop's CPU per turn",
            lambda r: r <= 1.25,
        )
    )
    loopback = _find(series, "session", "trio_agent Session", "CPU per turn, loopback")
    loopback_after = _find(
        series, "session", "after-stream parallel (same client)", "CPU per turn, loopback"
    )
    by_loopback = (
        paired(loopback, loopback_after)
        if loopback is not None and loopback_after is not None
        else None
    )
    warm = _find(series, "session", "trio_agent Session", "CPU per turn, model in process, after")
    warm_after = _find(
        series,
        "session",
        "after-stream parallel (same client)",
        "CPU per turn, model in process, after",
    )
    by_warm = paired(warm, warm_after) if warm is not None and warm_after is not None else None
    rows.append(
        _ratio_row(
            series,
            "Session CPU per turn <= 1.25x the after-stream loop on the same client, N = 300,"
            " model in process, GC on, no gc.freeze() (issue 32)",
            "session",
            "trio_agent Session",
            "after-stream parallel (same client)",
            "CPU per turn, model in process",
            lambda r, by_loopback=by_loopback, by_warm=by_warm: (
                f"{r:.2f}x the after-stream loop's CPU per turn"
                + (f" ({by_warm:.2f}x after a warm-up turn" if by_warm else " (")
                + (f"; {by_loopback:.2f}x on the loopback server)" if by_loopback else ")")
            ),
            lambda r: r <= 1.25,
        )
    )
    big = _find(series, "scale_10k", "trio_agent", "peak RSS")
    served = _find(series, "scale_10k", "trio_agent", "turns completed")
    open_at_once = _find(series, "scale_10k", "trio_agent", "turns open at once")
    rows.append(
        _value_row(
            series,
            "10,000 concurrent sessions in < 1 GB peak RSS",
            "scale_10k",
            "trio_agent",
            "peak RSS",
            lambda s: (
                f"{s.median:.0f} MB peak RSS ({s.metric.split(', ')[-1]}); "
                + (f"{served.median:.0f} {served.metric}" if served is not None else "")
            ),
            lambda v: (
                v < 1024.0
                and big is not None
                and "10000" in big.metric
                and served is not None
                and served.median == 10_000
                and open_at_once is not None
                and open_at_once.median == 10_000
            ),
        )
    )
    peak = _find(series, "scale", "trio_agent", "peak RSS")
    agents = peak.metric.rsplit(",", 1)[-1].strip() if peak is not None else ""
    rows.append(
        _value_row(
            series,
            "1,000 agent sessions in < 300 MB",
            "scale",
            "trio_agent",
            "peak RSS",
            lambda s: f"{s.median:.0f} MB peak RSS with {agents}",
            lambda v: v < 300.0 and agents == "1000 agents",
        )
    )
    return rows


def targets_markdown(series: Sequence[Series]) -> str:
    lines = ["| target | verdict | where we stand |", "|---|---|---|"]
    for target, verdict, text in targets(series):
        lines.append(f"| {target} | {verdict} | {text.replace('|', '/')} |")
    return "\n".join(lines)
