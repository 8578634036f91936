"""``python -m benchmarks verify`` re-runs a stored run's benchmarks and says which
ratios hold. It checks the verdict logic and the command's plumbing, never numbers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from benchmarks._report import Series
from benchmarks._verify import compare, reference_ratios

ROOT = Path(__file__).resolve().parents[2]


def _pair(subject_samples: list[float], other_samples: list[float]) -> list[Series]:
    subject = Series("b", "us", "m", "ms", samples=subject_samples)
    other = Series("b", "bare", "m", "ms", samples=other_samples, subject="us")
    return [subject, other]


@given(
    old=st.floats(0.05, 20),
    now=st.floats(0.05, 20),
    tolerance=st.floats(0.01, 0.5),
)
def test_a_ratio_holds_within_the_tolerance(old: float, now: float, tolerance: float) -> None:
    measured = _pair([now], [1.0])
    [(key, stored, new, verdict)] = compare({("b", "m", "bare"): old}, measured, tolerance)
    assert key == ("b", "m", "bare")
    assert stored == old
    assert new is not None
    assert abs(new - now) < 1e-9
    assert verdict == ("holds" if abs(now / old - 1) <= tolerance else "moved")


def test_a_row_the_new_run_lacks_is_missing() -> None:
    [(_, _, new, verdict)] = compare({("b", "m", "gone"): 1.0}, _pair([1.0], [1.0]), 0.1)
    assert new is None
    assert verdict == "missing"


def test_only_rows_with_a_ratio_are_compared() -> None:
    data = {
        "series": [
            {"benchmark": "b", "metric": "m", "contestant": "us", "ratio": None},
            {"benchmark": "b", "metric": "m", "contestant": "bare", "ratio": 1.5},
            {"benchmark": "b", "metric": "m", "contestant": "x", "ratio": 2.0, "skipped": "no"},
        ]
    }
    assert reference_ratios(data) == {("b", "m", "bare"): 1.5}


def test_the_command_reruns_and_judges(tmp_path: Path) -> None:
    reference = tmp_path / "ref.json"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks",
            "run",
            "dispatch",
            "--quick",
            "--json",
            str(reference),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    stored = reference_ratios(json.loads(reference.read_text()))
    assert stored, out.stdout
    # A tolerance nothing can miss: every row holds, and the command says so.
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks",
            "verify",
            "--against",
            str(reference),
            "--tolerance",
            "1000",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("holds") == len(stored)
    assert f"{len(stored)} of {len(stored)} ratios hold" in out.stderr
    # A stored ratio nothing can match: the command fails and says which moved.
    data = json.loads(reference.read_text())
    for row in data["series"]:
        if row.get("ratio") is not None:
            row["ratio"] *= 1000
    reference.write_text(json.dumps(data))
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks", "verify", "dispatch", "--against", str(reference)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 1
    assert out.stdout.count("moved") == len(stored)
