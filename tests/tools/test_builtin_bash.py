"""The Bash tool with real subprocesses.

These tests run in real time (subprocesses cannot run in virtual time); checking that
a process is gone polls for at most 5 s, and no test asserts a duration.
"""

import contextlib
import gc
import itertools
import os
import pathlib
import signal
from typing import Any

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import Tool, ToolContext, ToolOutput
from trio_agent.tools import Bash, Workspace
from trio_agent.tools._bash import OutputBuffer


@pytest.fixture
def ws(tmp_path: pathlib.Path) -> Workspace:
    root = tmp_path / "root"
    root.mkdir()
    return Workspace(root)


async def call(tool: Tool, input: dict[str, Any], lines: list[Any] | None = None) -> ToolOutput:
    assert tool.validate(input) is None, tool.validate(input)
    report = lines.append if lines is not None else (lambda _: None)
    out = await tool.run(input, ToolContext("toolu_1", tool.name, report=report))
    assert isinstance(out, ToolOutput)
    return out


def alive(pid: int) -> bool:
    """Whether *pid* runs; a zombie (dead, not reaped by an absent init) is gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


async def gone(pid: int) -> bool:
    for _ in range(500):
        if not alive(pid):
            return True
        await trio.sleep(0.01)
    return False


async def read_pid(path: pathlib.Path) -> int:
    for _ in range(500):
        text = path.read_text() if path.exists() else ""
        if text.endswith("\n"):
            return int(text)
        await trio.sleep(0.01)
    raise AssertionError(f"{path} never written")


def kill_quietly(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


async def test_output_lines_are_progress_in_order(ws):
    lines: list[Any] = []
    out = await call(Bash(ws), {"command": "echo one; echo two >&2; printf 'three\\nfour'"}, lines)
    assert not out.is_error
    assert lines == ["one", "two", "three", "four"]
    assert out.content == "one\ntwo\nthree\nfour"


async def test_runs_in_the_workspace_root_without_stdin(ws):
    out = await call(Bash(ws), {"command": "pwd; cat; echo end"})
    assert out.content == f"{ws.root}\nend"
    out = await call(Bash(ws), {"command": "true"})
    assert out.content == "(Bash completed with no output)"
    # Only blank lines and trailing whitespace: no output either, as in Claude Code.
    out = await call(Bash(ws), {"command": "printf '\\n  \\n\\t\\n'"})
    assert (out.content, out.is_error) == ("(Bash completed with no output)", False)


async def test_leading_blank_lines_and_trailing_whitespace_are_dropped(ws):
    out = await call(Bash(ws), {"command": "printf '\\n\\n  x\\n\\ny  \\n\\n'"})
    assert out.content == "  x\n\ny"


async def test_command_is_passed_verbatim_to_bash_c(ws):
    command = """printf '%s|' "$0" 'it'"'"'s' "a;b" '$HOME'; echo"""
    out = await call(Bash(ws), {"command": command})
    assert out.content == "/bin/bash|it's|a;b|$HOME|"


async def test_nul_byte_cannot_start(ws):
    out = await call(Bash(ws), {"command": "echo a\0b"})
    assert out.is_error
    assert str(out.content).startswith("<tool_use_error>cannot start bash: ")
    assert str(out.content).endswith("</tool_use_error>")


async def test_non_zero_exit_is_an_error_with_the_tail(ws):
    out = await call(Bash(ws), {"command": "echo working; echo broken >&2; exit 3"})
    assert out.is_error
    assert out.content == "Exit code 3\nworking\nbroken"
    out = await call(Bash(ws), {"command": "exit 7"})
    assert (out.content, out.is_error) == ("Exit code 7", True)


async def test_exit_1_of_a_search_or_a_test_is_an_answer(ws):
    """As in Claude Code: grep/rg/find/diff/test exit 1 means "no", not a failure;
    exit 2 (an error) still is one, and exit 1 of anything else is."""
    (ws.root / "a").write_text("x\n")
    (ws.root / "b").write_text("y\n")
    for command in ["grep nothing a", "diff -q a a >/dev/null && diff a b >/dev/null", "test -e z"]:
        out = await call(Bash(ws), {"command": command})
        assert (out.content, out.is_error) == ("(Bash completed with no output)", False), command
    out = await call(Bash(ws), {"command": "grep x missing-file"})
    assert out.is_error
    assert str(out.content).startswith("Exit code 2\n")
    out = await call(Bash(ws), {"command": "grep nothing a; false"})
    assert (out.content, out.is_error) == ("Exit code 1", True)


async def test_killed_by_a_signal(ws):
    out = await call(Bash(ws), {"command": "echo bye; kill -KILL $$"})
    assert out.is_error
    assert out.content == f"Exit code {128 + signal.SIGKILL}\nbye"


async def test_killed_by_a_realtime_signal(ws):
    out = await call(Bash(ws), {"command": f"kill -{signal.SIGRTMIN + 2} $$"})
    assert out.is_error
    assert out.content == f"Exit code {128 + signal.SIGRTMIN + 2}"


async def test_timeout_kills_the_group(ws):
    pidfile = ws.root / "pid"
    lines: list[Any] = []
    out = await call(
        Bash(ws, timeout=0.5),
        {"command": "sleep 60 & echo $! > pid; echo started; wait"},
        lines,
    )
    assert out.is_error
    assert out.content == "Exit code 143\nCommand timed out after 0s\nstarted"
    assert lines == ["started"]
    assert await gone(await read_pid(pidfile))


async def test_timeout_from_the_input(ws):
    out = await call(Bash(ws, timeout=60), {"command": "sleep 60", "timeout": 200})
    assert out.is_error
    assert out.content == "Exit code 143\nCommand timed out after 0s"
    out = await call(Bash(ws, timeout=60), {"command": "echo x; sleep 60", "timeout": 1500})
    assert out.content == "Exit code 143\nCommand timed out after 1s\nx"


async def test_term_ignoring_child_is_killed(ws):
    pidfile = ws.root / "pid"
    command = "(trap '' TERM; echo $BASHPID > pid; exec sleep 60) & wait"
    out = await call(Bash(ws, timeout=0.5), {"command": command})
    assert out.is_error
    assert await gone(await read_pid(pidfile))


async def test_output_cap_keeps_the_tail(ws):
    lines: list[Any] = []
    out = await call(
        Bash(ws, output_limit=1000),
        {"command": "for i in $(seq 1 3000); do echo line$i; done"},
        lines,
    )
    assert not out.is_error
    assert lines == [f"line{i}" for i in range(1, 3001)]
    full = "".join(f"line{i}\n" for i in range(1, 3001))
    note, tail = str(out.content).split("\n", 1)
    assert tail == full[-1000:].rstrip()
    assert note == f"[... {len(full) - 1000} characters of earlier output dropped ...]"


async def test_cancel_kills_the_process_tree(ws):
    started = trio.Event()

    def report(line: Any) -> None:
        if line == "started":
            started.set()

    tool = Bash(ws)
    command = "echo $$ > bash.pid; sleep 100 & echo $! > child.pid; echo started; wait"
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                tool.run, {"command": command}, ToolContext("t", "Bash", report=report)
            )
            await started.wait()
            scope.cancel()
    assert scope.cancelled_caught
    bash_pid = await read_pid(ws.root / "bash.pid")
    child_pid = await read_pid(ws.root / "child.pid")
    try:
        assert await gone(child_pid)
        assert await gone(bash_pid)
    finally:
        kill_quietly(child_pid)
    gc.collect()  # an unclosed pipe or process would warn here (warnings are errors)


async def test_background_job_left_at_exit_is_stopped(ws):
    out = await call(
        Bash(ws, timeout=20), {"command": "sleep 100 & echo $! > child.pid; echo done"}
    )
    assert not out.is_error
    assert out.content == "done"
    child = await read_pid(ws.root / "child.pid")
    try:
        assert await gone(child)
    finally:
        kill_quietly(child)


async def test_process_escaping_the_group_does_not_hang_the_tool(ws):
    # setsid leaves the group (and keeps the pipe open): the tool still returns, after
    # a bounded wait for the end of output.
    command = (
        "setsid bash -c 'echo $$ > child.pid; exec sleep 30' & "
        "while [ ! -s child.pid ]; do sleep 0.01; done; echo done"
    )
    out = await call(Bash(ws, timeout=20), {"command": command})
    child = await read_pid(ws.root / "child.pid")
    kill_quietly(child)
    assert not out.is_error
    assert out.content == "done"


async def test_secrets_are_not_in_the_default_environment(ws, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-sentinel-123")
    monkeypatch.setenv("TRIO_AGENT_VISIBLE", "yes")
    out = await call(Bash(ws), {"command": "env"})
    assert "sk-ant-sentinel-123" not in str(out.content)
    assert "TRIO_AGENT_VISIBLE=yes" in str(out.content)
    out = await call(
        Bash(ws, env={"PATH": os.environ["PATH"], "ONLY": "this"}), {"command": "echo $ONLY $HOME"}
    )
    assert out.content == "this"


def test_tool_flags_and_arguments(ws):
    tool = Bash(ws)
    assert tool.name == "Bash"
    assert tool.cancels_siblings_on_error
    assert tool.interrupt_behavior == "cancel"
    # Read-only commands run beside other safe calls; anything else runs alone.
    assert tool.is_concurrency_safe({"command": "ls"})
    assert not tool.is_concurrency_safe({"command": "rm x"})
    # Claude Code's inputs: timeout in milliseconds, at most 600000.
    assert set(tool.input_schema["properties"]) == {"command", "timeout", "description"}
    assert tool.validate({"command": "ls", "timeout": 600_000, "description": "List"}) is None
    assert tool.validate({"command": "ls", "timeout": 0}) is not None
    assert tool.validate({"command": "ls", "timeout": 600_001}) is not None
    assert tool.validate({"command": "ls", "run_in_background": True}) is not None
    for bad in [0, -1, float("inf"), float("nan")]:
        with pytest.raises(ValueError, match="timeout"):
            Bash(ws, timeout=bad)
    with pytest.raises(ValueError, match="output_limit"):
        Bash(ws, output_limit=0)


# -- OutputBuffer (sync core) -----------------------------------------------------


def test_buffer_utf8_split_across_chunks_and_crlf():
    lines: list[str] = []
    buffer = OutputBuffer(100, lines.append)
    data = "héllo\r\nwörld".encode()
    for i in range(len(data)):
        buffer.feed(data[i : i + 1])
    buffer.close()
    assert lines == ["héllo", "wörld"]
    assert buffer.text() == "héllo\r\nwörld"


def test_buffer_splits_a_line_longer_than_the_limit():
    lines: list[str] = []
    buffer = OutputBuffer(4, lines.append)
    buffer.feed(b"abcdefghij\nxy")
    buffer.close()
    assert lines == ["abcd", "efgh", "ij", "xy"]
    assert buffer.text().endswith("j\nxy")


def chunked(line: str, limit: int) -> list[str]:
    return [line[i : i + limit] for i in range(0, len(line), limit)] or [""]


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(alphabet=st.sampled_from("ab\nc\u00e9\u4e2d"), max_size=300),
    cuts=st.lists(st.integers(min_value=0, max_value=1200), max_size=10),
    limit=st.integers(min_value=1, max_value=80),
)
def test_buffer_reports_every_line_and_keeps_exactly_the_tail(text, cuts, limit):
    data = text.encode()
    lines: list[str] = []
    buffer = OutputBuffer(limit, lines.append)
    edges = sorted({0, len(data), *(c for c in cuts if c < len(data))})
    for start, end in itertools.pairwise(edges):
        buffer.feed(data[start:end])
    buffer.close()
    segments = text.split("\n")
    if segments[-1] == "":
        segments.pop()  # a final newline ends the last line; it starts no new one
    assert lines == [piece for segment in segments for piece in chunked(segment, limit)]
    if len(text) > limit:
        dropped = len(text) - limit
        assert buffer.text() == (
            f"[... {dropped} characters of earlier output dropped ...]\n{text[-limit:]}"
        )
    else:
        assert buffer.text() == text
