"""Smoke test of the benchmark CLI: ``python -m benchmarks run --quick`` runs every
benchmark and writes sane output. It checks structure, never numbers."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _names() -> list[str]:
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks", "list"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return [line.split()[0] for line in out.stdout.splitlines() if line.strip()]


def test_list_names_every_benchmark() -> None:
    names = _names()
    for expected in (
        "accumulator",
        "dispatch",
        "pipeline",
        "cancellation",
        "progress",
        "scale",
        "e2e.seed1",
        "e2e.bash_cascade",
        "e2e.fifty_safe",
    ):
        assert expected in names


def test_unknown_benchmark_is_a_usage_error() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks", "run", "no-such-bench"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 2
    assert "unknown benchmark" in out.stderr


@pytest.mark.slow
def test_quick_run_is_sane(tmp_path: Path) -> None:
    json_path, svg_path = tmp_path / "bench.json", tmp_path / "bench.svg"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks",
            "run",
            "--quick",
            "--json",
            str(json_path),
            "--svg",
            str(svg_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    assert "Traceback" not in out.stderr
    data = json.loads(json_path.read_text())
    assert data["meta"]["failures"] == 0
    benchmarks = {s["benchmark"] for s in data["series"]}
    assert benchmarks == set(_names())
    for series in data["series"]:
        if series["skipped"]:
            assert series["samples"] == []
            continue
        assert series["samples"], series
        assert all(math.isfinite(v) and v >= 0 for v in series["samples"]), series
        if series["subject"] is not None and 0 not in series["samples"]:
            assert series["ratio"] is not None, series
            assert series["ratio"] > 0, series
    # Every benchmark's progress line went to stderr, the table to stdout.
    for name in benchmarks:
        assert f"] {name}: done" in out.stderr
    assert "median" in out.stdout
    svg = svg_path.read_text()
    assert svg.startswith("<svg")
    assert svg.rstrip().endswith("</svg>")
    assert "model stream" in svg
