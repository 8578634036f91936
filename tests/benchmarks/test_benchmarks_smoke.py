"""Smoke test of the benchmark CLI: ``python -m benchmarks run --quick`` runs every
benchmark and writes sane output. It checks structure, never numbers."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


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
        "durable",
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


def _run_in_own_group(argv: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    """Run *argv* in a new session; past *timeout*, kill its whole process group
    (the benchmark server is in it and holds the pipes too) and fail with its stderr,
    so a hang can never block the suite."""
    proc = subprocess.Popen(
        argv,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        try:
            stdout, stderr = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:  # a grandchild left the group with our pipes
            for pipe in (proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()
            stderr = "(no output: the pipes stayed open after the kill)"
        pytest.fail(f"{' '.join(argv[1:])} still running after {timeout} s:\n{stderr[-6000:]}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)


# A representative subset keeps the suite fast: one micro-benchmark and one end-to-end
# scenario with every contestant (trio_agent via query(), the ideal from
# reference_schedule, the after-stream loops and the peers), the durable row (a
# worker in a child process against plain Sessions), and the two Session-vs-loop
# benchmarks (each runs children of both contestants and builds its rows from what
# they measured). `run --quick` itself runs everything (a few minutes on 2 cores).
SUBSET = ("dispatch", "e2e.seed1", "durable", "scale", "session")


@pytest.mark.slow
def test_quick_run_is_sane(tmp_path: Path) -> None:
    json_path, svg_path = tmp_path / "bench.json", tmp_path / "bench.svg"
    md_path = tmp_path / "RESULTS.md"
    out = _run_in_own_group(
        [
            sys.executable,
            "-m",
            "benchmarks",
            "run",
            "--quick",
            *SUBSET,
            "--json",
            str(json_path),
            "--svg",
            str(svg_path),
            "--markdown",
            str(md_path),
        ],
        timeout=240,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    assert "Traceback" not in out.stderr
    data = json.loads(json_path.read_text())
    assert data["meta"]["failures"] == 0
    assert data["meta"]["quick"] is True
    benchmarks = {s["benchmark"] for s in data["series"]}
    assert benchmarks == set(SUBSET)
    contestants = {s["contestant"] for s in data["series"] if s["benchmark"] == "e2e.seed1"}
    assert {
        "trio_agent",
        "ideal",
        "after-stream sequential",
        "after-stream parallel",
        "sdk tool_runner",
        "sdk tool_runner eager",
        "pydantic-ai",
    } <= contestants
    ran = [s for s in data["series"] if not s["skipped"]]
    assert {s["contestant"] for s in ran} >= {"trio_agent", "ideal"}  # the subject really ran
    durable = {s["contestant"] for s in ran if s["benchmark"] == "durable"}
    assert {
        "trio_agent.durable (DBOS, SQLite)",
        "trio_agent Session (plain)",
        "durable (SQLite) - plain",
    } <= durable
    for series in data["series"]:
        assert series["errors"] == [], series
        if series["skipped"]:
            assert series["samples"] == []
            continue
        assert series["samples"], series
        assert all(math.isfinite(v) for v in series["samples"]), series
        if not series["contestant"].endswith("- plain"):  # a difference may be negative
            assert all(v >= 0 for v in series["samples"]), series
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
    markdown = md_path.read_text()
    assert "| e2e.seed1 | turn wall time | ideal |" in markdown
    assert "## Versus the targets (issues 5 and 13)" in markdown
