"""The README's MCP example runs, against the demo server shipped in the package."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_mcp_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    text = README.read_text(encoding="utf-8")
    (example,) = [
        b for b in re.findall(r"^```python\n(.*?)^```", text, re.M | re.S) if "open_mcp_tools" in b
    ]
    exec(compile(example, "README.md", "exec"), {"__name__": "readme"})
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == str(
        ["mcp__demo__add", "mcp__demo__word_count", "mcp__demo__countdown", "mcp__demo__note"]
    )
    assert lines[1:] == ["0/2 2...", "1/2 1...", "liftoff"]
