"""``trio-agent --version`` imports none of the commands (a real interpreter)."""

from __future__ import annotations

import subprocess
import sys

import trio_agent

CODE = """
import sys
from trio_agent._cli import main
main(["--version"])
print(sorted(m for m in sys.modules if m.startswith("trio_agent._cli.")))
"""


def test_version_imports_no_command() -> None:
    run = subprocess.run(
        [sys.executable, "-c", CODE], capture_output=True, text=True, timeout=60, check=False
    )
    assert run.returncode == 0, run.stderr
    version, loaded = run.stdout.splitlines()
    assert version == f"trio-agent {trio_agent.__version__}"
    assert loaded == "['trio_agent._cli._errors', 'trio_agent._cli._main']"
