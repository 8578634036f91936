"""``python -m benchmarks verify``: re-measure the ratios of a stored run and say
which hold.

The reference is a ``--json`` file of ``python -m benchmarks run`` (by default
``benchmarks/results.json``, the run RESULTS.md was made from). Its benchmarks are
run again with the same ``--quick`` setting, and each row that has a ratio (subject
/ this contestant) is compared with the stored one: it *holds* when the new ratio
is within the tolerance (10% by default) of the stored one. Ratios, not times: a
machine faster or slower than the reference one moves both contestants alike.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ._report import Series, index, ratio

DEFAULT_REFERENCE = Path(__file__).resolve().parent / "results.json"

Key = tuple[str, str, str]


def reference_ratios(data: dict[str, Any]) -> dict[Key, float]:
    """(benchmark, metric, contestant) -> the stored ratio, for rows that have one."""
    ratios: dict[Key, float] = {}
    for row in data["series"]:
        if row.get("ratio") is not None and not row.get("skipped"):
            ratios[(row["benchmark"], row["metric"], row["contestant"])] = float(row["ratio"])
    return ratios


def compare(
    reference: dict[Key, float], measured: Sequence[Series], tolerance: float
) -> list[tuple[Key, float, float | None, str]]:
    """Each reference row with the new ratio and a verdict: ``holds``, ``moved``
    (outside the tolerance) or ``missing`` (the new run has no such row)."""
    by_name = index(measured)
    out: list[tuple[Key, float, float | None, str]] = []
    for key, old in sorted(reference.items()):
        series = by_name.get(key)
        new = ratio(series, by_name) if series is not None else None
        if new is None:
            verdict = "missing"
        elif abs(new / old - 1) <= tolerance:
            verdict = "holds"
        else:
            verdict = "moved"
        out.append((key, old, new, verdict))
    return out


def verify(
    run: Callable[[Sequence[str], bool, int], list[Series]],
    *,
    reference_path: Path,
    names: Sequence[str],
    tolerance: float,
    repeat: int | None,
) -> int:
    """Run the reference's benchmarks (or *names*) and print the verdicts; 0 when
    every compared ratio holds."""
    data = json.loads(reference_path.read_text(encoding="utf-8"))
    reference = reference_ratios(data)
    wanted = list(names) or sorted({key[0] for key in reference})
    reference = {k: v for k, v in reference.items() if k[0] in wanted}
    if not reference:
        print(f"no ratio rows of {', '.join(wanted)} in {reference_path}", file=sys.stderr)
        return 2
    quick = bool(data["meta"].get("quick"))
    measured = run(wanted, quick, repeat if repeat is not None else (1 if quick else 3))
    verdicts = compare(reference, measured, tolerance)
    width = max(len(f"{k[0]} | {k[1]} | {k[2]}") for k, *_ in verdicts)
    print(f"{'row':{width}}  stored   now      verdict (within {tolerance:.0%})")
    for key, old, new, verdict in verdicts:
        name = f"{key[0]} | {key[1]} | {key[2]}"
        now = "-" if new is None else f"{new:.3f}"
        print(f"{name:{width}}  {old:<7.3f}  {now:<7}  {verdict}")
    held = sum(v == "holds" for *_, v in verdicts)
    print(f"{held} of {len(verdicts)} ratios hold", file=sys.stderr)
    return 0 if held == len(verdicts) else 1
