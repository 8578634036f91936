"""trio_agent.mcp's face: ``__all__`` sorted and complete; importing trio_agent alone
does not import the SDK (the ``mcp`` extra stays optional)."""

from __future__ import annotations

import subprocess
import sys

import trio_agent.mcp


def test_all_is_sorted_and_complete() -> None:
    names = trio_agent.mcp.__all__
    assert names == sorted(names)
    # "@py_builtins": pytest rewrites trio_agent's modules (its pytest11 plugin).
    public = {n for n in vars(trio_agent.mcp) if not n.startswith(("_", "@"))}
    modules = {"demo_server"} & public
    assert set(names) == public - modules - {"annotations"}


def test_importing_trio_agent_does_not_import_the_sdk() -> None:
    code = "import sys, trio_agent, trio_agent.tools; print('mcp' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
