"""RESULTS.md generation: a re-run refreshes the figures and keeps the hand-written
analysis; the targets table is computed from the run's own rows."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks._markdown import BEGIN, END, write_markdown
from benchmarks._report import Series, to_json
from benchmarks._targets import targets

ROOT = Path(__file__).resolve().parents[2]


def _meta(**changes: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "command": "python -m benchmarks run",
        "quick": False,
        "repeat": 2,
        "total_seconds": 12.0,
        "failures": 0,
        "date": "2025-01-01 00:00 UTC",
        "source": "`main` @ `abc1234`",
        "machine": {
            "nproc": 2,
            "cpu": "Test CPU",
            "python": "3.11.7",
            "platform": "Linux",
            "versions": {"trio": "0.35.0"},
        },
    }
    meta.update(changes)
    return meta


def _series(ours: list[float], ideal: list[float], peer: list[float]) -> list[Series]:
    return [
        Series("e2e.seed1", "trio_agent", "turn wall time", "s", ours),
        Series("e2e.seed1", "ideal", "turn wall time", "s", ideal, subject="trio_agent"),
        Series("e2e.seed1", "pydantic-ai", "turn wall time", "s", peer, subject="trio_agent"),
        Series(
            "e2e.seed1",
            "sdk tool_runner",
            "turn wall time",
            "s",
            skipped="anthropic not installed",
            subject="trio_agent",
        ),
    ]


def test_a_rerun_keeps_the_analysis_and_refreshes_the_figures(tmp_path: Path) -> None:
    path = tmp_path / "RESULTS.md"
    write_markdown(str(path), _series([1.5, 1.5], [1.49, 1.49], [2.0, 2.0]), _meta())
    first = path.read_text()
    assert BEGIN in first
    assert END in first
    assert "| e2e.seed1 | turn wall time | trio_agent | 1.500 |" in first
    assert "anthropic not installed" in first
    # The author writes the analysis...
    analysis = "## Analysis\n\nThe pipeline is limited by the channel hand-off.\n"
    start, end = first.index(BEGIN) + len(BEGIN), first.index(END)
    path.write_text(first[:start] + "\n" + analysis + first[end:])
    # ...and a re-run with other numbers keeps it.
    write_markdown(str(path), _series([3.25, 3.25], [3.0, 3.0], [2.0, 2.0]), _meta())
    second = path.read_text()
    assert "The pipeline is limited by the channel hand-off." in second
    assert second.count(BEGIN) == 1
    assert second.count(END) == 1
    assert "| e2e.seed1 | turn wall time | trio_agent | 3.250 |" in second
    assert "1.500" not in second


def test_targets_follow_the_numbers() -> None:
    good = {t: (v, w) for t, v, w in targets(_series([1.0, 1.0], [0.995, 0.995], [2.0, 2.0]))}
    ideal = good["trio_agent / ideal <= 1.02 on every e2e scenario"]
    assert ideal[0] == "**met**"
    assert "seed1 1.005" in ideal[1]
    assert good["faster than every peer on every scenario with tools"][0] == "**met**"
    assert good["cancellation of 1,000 siblings < 5 ms"][0] == "not measured"
    bad = {t: (v, w) for t, v, w in targets(_series([1.2, 1.2], [1.0, 1.0], [1.0, 1.0]))}
    assert bad["trio_agent / ideal <= 1.02 on every e2e scenario"][0] == "**missed**"
    peers = bad["faster than every peer on every scenario with tools"]
    assert peers[0] == "**missed**"
    assert "pydantic-ai (1.200)" in peers[1]


def _accumulator(per_event: float, batch: float, sdk: float) -> list[Series]:
    metric = "CPU text 20k deltas"
    return [
        Series("accumulator", "trio_agent", metric, "ms", [per_event] * 3),
        Series("accumulator", "sdk accumulate_event", metric, "ms", [sdk] * 3),
        Series("accumulator", "trio_agent feed_deltas", metric, "ms", [batch] * 3),
    ]


def test_the_accumulator_target_is_judged_on_feed_per_event() -> None:
    """Issue 32: the goal is feed(), one call per event, not the batch feed_deltas."""
    name = "accumulator feed() per event >= 10x the SDK on text (20k deltas), CPU"
    slow = {t: (v, w) for t, v, w in targets(_accumulator(4.5, 3.0, 40.0))}
    assert slow[name][0] == "**missed**"  # 8.9x per event, though 13.3x in a batch
    assert "8.9x the SDK's speed with one feed() call per event" in slow[name][1]
    assert "13.3x through the batch feed_deltas" in slow[name][1]
    fast = {t: (v, w) for t, v, w in targets(_accumulator(3.9, 3.0, 40.0))}
    assert fast[name][0] == "**met**"


def test_the_pipeline_target_is_bare_httpx_sse_or_better() -> None:
    metric = "CPU ms per stream, one event per read (10 reads)"
    name = "stream pipeline, one event per read: CPU <= 1x bare httpx-sse + json.loads"

    def run(ours: float) -> str:
        rows = [
            Series("pipeline", "trio_agent client (SSE + accumulate)", metric, "ms", [ours] * 3),
            Series("pipeline", "bare httpx-sse + json.loads", metric, "ms", [100.0] * 3),
        ]
        return {t: v for t, v, _ in targets(rows)}[name]

    assert run(101.0) == "**missed**"
    assert run(99.0) == "**met**"


def test_report_rewrites_the_markdown_from_a_json_run(tmp_path: Path) -> None:
    json_path, md_path = tmp_path / "run.json", tmp_path / "RESULTS.md"
    json_path.write_text(to_json(_series([1.5, 1.5], [1.49, 1.49], [2.0, 2.0]), _meta()))
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks", "report", str(json_path), "--markdown", str(md_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    text = md_path.read_text()
    assert "python -m benchmarks run   # 12 s" in text
    assert "| e2e.seed1 | pydantic-ai | turn wall time |" not in text  # columns in order
    assert "| e2e.seed1 | turn wall time | pydantic-ai | 2.000 |" in text
    assert json.loads(json_path.read_text())["meta"]["source"] in text
