"""``python -m benchmarks --help`` lists the commands a person runs, never
``==SUPPRESS==`` for the internal ones (which still parse)."""

from __future__ import annotations

import subprocess
import sys


def test_benchmarks_help_hides_the_internal_commands() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "==SUPPRESS==" not in done.stdout
    assert "scale-child" not in done.stdout
    for command in ("list", "run", "verify", "report"):
        assert f"    {command} " in done.stdout


def test_the_readme_links_jiter_to_its_repository() -> None:
    from pathlib import Path

    readme = (Path(__file__).parents[2] / "README.md").read_text()
    assert "[jiter](https://github.com/pydantic/jiter)" in readme
    assert "pypi.org/project/jiter" not in readme
