"""The MCP conformance suite's harness: installed from the npm registry, pinned.

The suite (``@modelcontextprotocol/conformance``) needs node 22; the machine's node
may be older, so node itself comes from the registry's ``node`` package (a
registry package that ships the binary). Both go in a cache directory outside the
checkout, installed once (a lock keeps two runs from installing at the same time).

``python tests/mcp/conformance/harness.py`` installs them and prints the harness's
path (.ci/run does it before the tests); the tests call :func:`ensure_harness`.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

NODE_VERSION = "22.23.3"
CONFORMANCE_VERSION = "0.1.16"


class HarnessUnavailable(RuntimeError):
    """The harness cannot be installed here (no npm, or the registry refused)."""


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return (
        Path(base)
        / "trio-agent-tests"
        / f"mcp-conformance-{CONFORMANCE_VERSION}-node-{NODE_VERSION}"
    )


def node_bin(root: Path) -> Path:
    return root / "node" / "node_modules" / ".bin"


def harness_bin(root: Path) -> Path:
    return root / "conformance" / "node_modules" / ".bin" / "conformance"


def _npm(args: list[str], env: dict[str, str]) -> None:
    npm = shutil.which("npm", path=env["PATH"])
    if npm is None:
        raise HarnessUnavailable("npm is not installed (apt-get install npm), so node 22 cannot be")
    done = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--loglevel=error", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        raise HarnessUnavailable(f"npm install {' '.join(args)} failed:\n{done.stderr[-2000:]}")


def ensure_harness(root: Path | None = None) -> tuple[Path, dict[str, str]]:
    """The harness's executable and the environment to run it in (node 22 first on
    PATH), installing both if they are not there yet.

    Raises:
        HarnessUnavailable: they cannot be installed; the message says why.
    """
    root = cache_dir() if root is None else root
    root.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env["PATH"] = f"{node_bin(root)}{os.pathsep}{env.get('PATH', '')}"
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        node = node_bin(root) / "node"
        if not node.exists():
            _npm(["--prefix", str(root / "node"), f"node@{NODE_VERSION}"], env)
        version = subprocess.run(
            [str(node), "--version"], capture_output=True, text=True, env=env, check=False
        ).stdout.strip()
        if version != f"v{NODE_VERSION}":
            raise HarnessUnavailable(
                f"the node package gave {version or 'no node'}, not v{NODE_VERSION}"
            )
        if not harness_bin(root).exists():
            _npm(
                [
                    "--prefix",
                    str(root / "conformance"),
                    f"@modelcontextprotocol/conformance@{CONFORMANCE_VERSION}",
                ],
                env,
            )
    return harness_bin(root), env


if __name__ == "__main__":
    try:
        print(ensure_harness()[0])
    except HarnessUnavailable as exc:
        sys.exit(f"the MCP conformance harness cannot be installed: {exc}")
