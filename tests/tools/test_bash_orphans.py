"""Nothing the Bash tool starts outlives it: real processes that escape the process
group (``setsid``, ``set -m``, double fork, a daemonizing Python, SIGTERM ignored),
checked by pid after the tool returns, times out, or is cancelled.

Linux only: elsewhere only the process group is killed (see trio_agent.tools._bash).
"""

from __future__ import annotations

import os
import pathlib
import shlex
import signal
import subprocess
import sys
import time
from typing import Any

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import ToolContext, ToolOutput
from trio_agent.testing import no_leaks, process_exited
from trio_agent.tools import Bash, Workspace

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the subreaper is Linux-only")

_DAEMON = (
    "import os, signal, sys\n"
    "if os.fork(): os._exit(0)\n"
    "os.setsid()\n"
    "if os.fork(): os._exit(0)\n"
    "print('pid', os.getpid(), flush=True)\n"
    "open(sys.argv[1], 'w').write(str(os.getpid()))\n"
    "while True: signal.pause()\n"
)

#: The escaper's own body: report its pid (kept by ``exec``), mark itself ready in
#: the file {ready}, then sleep for long.
_BODY = "echo pid $$; echo $$ > {ready}; exec sleep 300"

#: Ways out of the process group; each runs one escaper.
ESCAPES = {
    "setsid": f"setsid sh -c '{_BODY}' &",
    "setsid-quiet": f"setsid sh -c '{_BODY} >/dev/null 2>&1' &",
    "job-control": f"set -m; sh -c '{_BODY}' & set +m",
    "double-fork": f"( sh -c '{_BODY}' & )",
    "double-fork-setsid": f"( setsid sh -c '{_BODY} </dev/null' & )",
    "ignores-term": f"setsid sh -c 'trap \"\" TERM; {_BODY}' &",
    "nohup-disown": f"nohup sh -c '{_BODY}' 2>/dev/null & disown",
    "python-daemon": f"{shlex.quote(sys.executable)} -c {shlex.quote(_DAEMON)} {{ready}} &",
}


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _exited(pid: int, *, deadline: float) -> bool:
    """Whether *pid* has exited by *deadline* (a pidfd wait, no polling)."""
    return process_exited(pid, timeout=deadline - time.monotonic())


def _pids(lines: list[str]) -> list[int]:
    return [int(line.split()[1]) for line in lines if line.startswith("pid ")]


def _script(names: list[str], tail: str) -> str:
    # The command goes on only once every escaper has marked itself ready.
    parts: list[str] = []
    for i, name in enumerate(names):
        ready = f".ready{i}"
        parts.append(ESCAPES[name].replace("{ready}", ready))
        # (at most ~20 s: a broken escaper fails the pid count instead of hanging)
        parts.append(f"for _ in $(seq 2000); do [ -s {ready} ] && break; sleep 0.01; done")
    return "\n".join([*parts, tail])


@settings(max_examples=12, deadline=None)
@given(
    names=st.lists(st.sampled_from(sorted(ESCAPES)), min_size=1, max_size=4),
    end=st.sampled_from(["exit 0", "exit 3", "kill -9 $$"]),
)
def test_no_escaper_survives_the_tools_return(
    tmp_path_factory: pytest.TempPathFactory, names: list[str], end: str
) -> None:
    ws = Workspace(tmp_path_factory.mktemp("ws"))
    lines: list[str] = []

    async def main() -> ToolOutput:
        out = await Bash(ws, timeout=60).run(
            {"command": _script(names, end)}, ToolContext("t", "Bash", report=lines.append)
        )
        assert isinstance(out, ToolOutput)
        return out

    with no_leaks(adopt_orphans=True):
        out = trio.run(main)
    pids = _pids(lines)
    assert len(pids) == len(names), (lines, out)  # every escaper ran
    survivors = [pid for pid in pids if _exists(pid)]
    assert survivors == [], (names, out)
    assert out.is_error == (end != "exit 0")


@settings(max_examples=4, deadline=None)
@given(names=st.lists(st.sampled_from(sorted(ESCAPES)), min_size=1, max_size=4))
def test_no_escaper_survives_a_timeout(
    tmp_path_factory: pytest.TempPathFactory, names: list[str]
) -> None:
    ws = Workspace(tmp_path_factory.mktemp("ws"))
    lines: list[str] = []
    pids_alive_when_reported: list[int] = []

    def report(line: Any) -> None:
        lines.append(line)
        pids_alive_when_reported.extend(p for p in _pids([line]) if _exists(p))

    async def main() -> ToolOutput:
        # The tool's own timeout ends it while bash is still in `sleep 300`.
        out = await Bash(ws, timeout=60).run(
            {"command": _script(names, "sleep 300"), "timeout": 1500},
            ToolContext("t", "Bash", report=report),
        )
        assert isinstance(out, ToolOutput)
        return out

    with no_leaks(adopt_orphans=True):
        out = trio.run(main)
    assert out.is_error
    assert "timed out" in str(out.content)
    pids = _pids(lines)
    assert len(pids) == len(names) == len(pids_alive_when_reported), lines
    assert [pid for pid in pids if _exists(pid)] == []


@settings(max_examples=6, deadline=None)
@given(names=st.lists(st.sampled_from(sorted(ESCAPES)), min_size=1, max_size=4))
def test_no_escaper_survives_cancellation(
    tmp_path_factory: pytest.TempPathFactory, names: list[str]
) -> None:
    ws = Workspace(tmp_path_factory.mktemp("ws"))
    lines: list[str] = []
    ran: list[bool] = []

    async def main() -> None:
        reported = trio.Event()

        def report(line: Any) -> None:
            lines.append(line)
            if len(_pids(lines)) == len(names):
                reported.set()

        async def tool() -> None:
            ran.append(True)
            await Bash(ws, timeout=60).run(
                {"command": _script(names, "sleep 300")}, ToolContext("t", "Bash", report=report)
            )
            raise AssertionError("the tool was not cancelled")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(tool)
            await reported.wait()
            # Every escaper runs now; cancel the tool in the middle of `sleep 300`.
            assert all(_exists(pid) for pid in _pids(lines))
            nursery.cancel_scope.cancel()

    with no_leaks(adopt_orphans=True):
        trio.run(main)
    assert ran == [True]
    pids = _pids(lines)
    assert len(pids) == len(names)
    assert [pid for pid in pids if _exists(pid)] == []


def test_runner_keeps_exit_codes_signals_and_sigpipe(tmp_path: pathlib.Path) -> None:
    ws = Workspace(tmp_path)

    async def run(command: str) -> ToolOutput:
        out = await Bash(ws, timeout=30).run({"command": command}, ToolContext("t", "Bash"))
        assert isinstance(out, ToolOutput)
        return out

    async def main() -> None:
        assert (await run("exit 7")).content == "Exit code 7"
        # A signal N is the shell's exit code 128 + N, as Claude Code reports it.
        assert (await run("kill -TERM $$")).content == f"Exit code {128 + signal.SIGTERM}"
        assert (await run("kill -SEGV $$")).content == f"Exit code {128 + signal.SIGSEGV}"
        # SIGPIPE is default for the command, as without the runner: `yes` dies of it.
        out = await run("yes | head -n 2; echo ${PIPESTATUS[0]}")
        assert str(out.content) == "y\ny\n141"

    trio.run(main)


_AGENT = """
import sys, trio
from trio_agent import ToolContext
from trio_agent.tools import Bash, Workspace

async def main():
    bash = Bash(Workspace(sys.argv[1]), timeout=120)
    report = lambda line: print(line, flush=True)
    await bash.run({"command": sys.argv[2]}, ToolContext("t", "Bash", report=report))

trio.run(main)
"""


@settings(max_examples=3, deadline=None)
@given(names=st.lists(st.sampled_from(sorted(ESCAPES)), min_size=1, max_size=3))
def test_no_escaper_survives_the_agent_being_killed(
    tmp_path_factory: pytest.TempPathFactory, names: list[str]
) -> None:
    # The agent's own process gets SIGKILL mid-command: the runner notices
    # (PR_SET_PDEATHSIG) and still kills and reaps every descendant.
    ws = tmp_path_factory.mktemp("ws")
    agent = subprocess.Popen(
        [sys.executable, "-c", _AGENT, str(ws), _script(names, "echo ready; sleep 300")],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert agent.stdout is not None
    lines: list[str] = []
    with no_leaks(adopt_orphans=True, grace=10.0):
        while (line := agent.stdout.readline().rstrip("\n")) != "ready":
            assert line, lines  # the agent must not end before the command is ready
            lines.append(line)
        pids = _pids(lines)
        assert len(pids) == len(names)
        assert all(_exists(pid) for pid in pids)
        agent.kill()
        agent.wait()
        agent.stdout.close()
        # The runner sweeps asynchronously: wait (at most 10 s) for each to exit.
        running = [pid for pid in pids if not _exited(pid, deadline=time.monotonic() + 10.0)]
    assert running == []
