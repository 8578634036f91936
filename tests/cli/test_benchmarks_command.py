"""The command benchmarks (benchmarks/_command.py) measure the real command: a run of
``trio-agent run`` against the timed loopback server prints the answer and reports
its own CPU, peak RSS and exit delay; without npm, ``peers-cli`` says why it skips."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import _command
from benchmarks._config import Config


def test_a_measured_run_is_the_real_command() -> None:
    sample = _command.measure(50)
    assert sample.printed >= len("word" * 50)  # the answer was printed
    assert sample.cpu > 0
    assert sample.rss_mb > 10  # a Python process's, not this one's children's sum
    assert 0 <= sample.exit < sample.wall


def test_peers_cli_without_npm_skips_only_itself_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # nothing installed there
    monkeypatch.setenv("PATH", str(tmp_path))  # no npm
    rows = _command.bench_peers_cli(Config(quick=True, repeat=1))
    assert rows
    assert all(
        row.skipped == "npm is not installed: cannot install the Claude Code CLI" for row in rows
    )
    assert all(row.samples == [] for row in rows)
