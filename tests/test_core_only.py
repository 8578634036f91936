"""A core-only install (no extras): what needs an extra says which, in a real interpreter.

The missing packages are hidden by ``sys.modules[name] = None`` in a fresh
subprocess (the way Python itself reports a module that cannot be imported). A
real fresh venv with ``pip install -e .`` is checked by hand (see the CHANGELOG).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

HIDE = "import sys\nfor name in {names!r}: sys.modules[name] = None\n"


def python(code: str, *hidden: str) -> subprocess.CompletedProcess[str]:
    script = HIDE.format(names=list(hidden)) + code
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize(
    ("module", "missing", "extra"),
    [
        ("trio_agent.durable", "dbos", "durable"),
        ("trio_agent.mcp", "mcp", "mcp"),
        ("trio_agent.mcp", "httpx2", "mcp"),
        ("trio_agent.mcp", "re2", "mcp"),
        ("trio_agent.testing.strategies", "hypothesis", "testing"),
    ],
)
def test_an_optional_module_names_its_extra(module: str, missing: str, extra: str) -> None:
    run = python(f"import {module}", missing)
    assert run.returncode == 1
    last = run.stderr.strip().splitlines()[-1]
    assert last == (
        f"ModuleNotFoundError: No module named {missing!r}: {module} needs "
        f"pip install 'trio-agent[{extra}]'"
    )


def test_the_core_imports_without_any_extra() -> None:
    extras = ["rich", "hypothesis", "hypothesis_jsonschema", "dbos", "opentelemetry"]
    run = python(
        "import trio_agent, trio_agent.tools, trio_agent.testing, trio_agent.otel\n"
        "from trio_agent._cli._main import main\n"
        "print('ok')",
        *extras,
    )
    assert (run.returncode, run.stdout, run.stderr) == (0, "ok\n", "")
