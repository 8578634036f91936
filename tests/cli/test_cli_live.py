"""The live view on a real terminal (a pty), and what ``--json`` and the timeline say
(issue 26, item 8).

- ``run`` and ``chat`` on a terminal show their tool calls live (state, time) under
  the text, and leave the plain lines on the screen when the turn ends;
- ``run --json`` has a ``ToolStarted`` line when a tool starts, and a time on every
  line, as ``demo --json`` does;
- in the demo the Write call has its row while its input still streams; at 160
  columns the timeline is as wide and its calls are not cut at 28 characters;
- after Ctrl+C, a cancelled tool is credited with no time saved.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import AbortReason, TextBlock, ToolFinished, ToolUseBlock
from trio_agent._cli._timeline import TurnRecorder
from trio_agent.testing import ScriptedAnswer, ScriptedModel, serve_scripted_model

DEADLINE = 90
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")


def plain(screen: str) -> str:
    return _ANSI.sub("", screen)


def gated_model() -> ScriptedModel:
    """A Bash call that waits on a FIFO the test opens (no sleeps), then an answer."""
    return ScriptedModel(
        [
            ScriptedAnswer(
                blocks=[
                    TextBlock("Waiting for the gate."),
                    ToolUseBlock("toolu_gate", "Bash", {"command": "cat gate"}),
                ]
            ),
            ScriptedAnswer(blocks=[TextBlock("The gate said go.")]),
        ]
    )


async def test_run_on_a_terminal_shows_its_tool_calls_live(cli: Any, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    model = gated_model()
    env = cli.env(TERM="xterm", COLUMNS="100")
    with trio.fail_after(DEADLINE):
        async with serve_scripted_model(model) as url:
            argv = ["run", "wait for the gate", "--base-url", url, "--allow", "Bash"]
            async with cli.terminal([*argv, "--workspace", str(tmp_path)], env=env) as term:
                at = await term.until("latest output")  # the live table's header
                at = await term.until("executing", after=at)
                row = plain(term.text[term.text.rfind("\n", 0, at) :].split("\n")[1])
                assert "Bash(cat gate)" in row
                await trio.to_thread.run_sync(gate.write_text, "go\n")
                await term.until("[completed;", after=at)
                assert await term.process.wait() == 0
    screen = plain(term.text)
    # what stays: the plain lines, the answer, the summary
    assert "Waiting for the gate." in screen
    assert '  → Bash({"command": "cat gate"})' in screen
    assert "  ✓ go" in screen
    assert "The gate said go." in screen
    assert len(model.requests) == 2


async def test_chat_on_a_terminal_shows_its_tool_calls_live(cli: Any, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    model = gated_model()
    env = cli.env(TERM="xterm", COLUMNS="100", XDG_STATE_HOME=str(tmp_path / "state"))
    with trio.fail_after(DEADLINE):
        async with serve_scripted_model(model) as url:
            argv = ["chat", "--base-url", url, "--allow", "Bash", "--workspace", str(tmp_path)]
            async with cli.terminal(argv, env=env) as term:
                at = await term.until("> ")
                await term.type("wait for the gate\r")
                at = await term.until("latest output", after=at)
                at = await term.until("executing", after=at)
                await trio.to_thread.run_sync(gate.write_text, "go\n")
                at = await term.until("The gate said go.", after=at)
                at = await term.until("> ", after=at)
                await term.type("/exit\r")
                assert await term.process.wait() == 0
    assert "  ✓ go" in plain(term.text)
    assert len(model.requests) == 2


async def test_run_json_has_tool_started_and_times(cli: Any, tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            ScriptedAnswer(blocks=[ToolUseBlock("toolu_r", "Bash", {"command": "echo hello"})]),
            ScriptedAnswer(blocks=[TextBlock("It says hello.")]),
        ]
    )
    async with serve_scripted_model(model) as url:
        argv = ["run", "say hello", "--json", "--base-url", url, "--allow", "Bash"]
        argv += ["--workspace", str(tmp_path)]
        async with cli.open(argv) as run:
            status = await run.wait()
    assert status == 0, run.stderr
    records = [json.loads(line) for line in run.stdout.splitlines()]
    assert all(isinstance(r["t"], float | int) and r["t"] >= 0 for r in records)
    times = [r["t"] for r in records]
    assert times == sorted(times)
    kinds = [r["type"] for r in records]
    started = kinds.index("ToolStarted")
    assert records[started]["tool_use_id"] == "toolu_r"
    assert records[started]["name"] == "Bash"
    # after its block streamed, before its result
    finished = next(
        i for i, r in enumerate(records) if r["type"] == "BlockFinished" and r["index"] == 0
    )
    result = kinds.index("ToolResult")
    assert finished < started < result


async def test_demo_write_row_streams_and_the_timeline_is_as_wide_as_the_terminal(
    cli: Any,
) -> None:
    env = cli.env(TERM="xterm", COLUMNS="160")
    with trio.fail_after(DEADLINE):
        async with cli.terminal(["demo", "--speed", "2"], env=env) as term:
            at = await term.until("Write(")
            await term.until("turn ended: completed", after=at)
            assert await term.process.wait() == 0
    screen = plain(term.text)
    # a frame of the live view with the Write call's row while its input streams
    rows = [line for line in screen.splitlines() if "Write(" in line and "streaming" in line]
    assert rows, screen[-3000:]
    timeline = screen[screen.rindex("model call 1 (") :]
    bash = next(line for line in timeline.splitlines() if line.startswith("  Bash("))
    assert "Bash(python3 -m unittest discover -v -s tests" in bash  # not cut at 28
    stream = next(line for line in timeline.splitlines() if "the model streaming" in line)
    assert 120 < len(stream.rstrip()) <= 160
    assert all(len(line) <= 160 for line in timeline.splitlines())


async def test_demo_ctrl_c_credits_a_cancelled_tool_with_nothing(cli: Any) -> None:
    async with cli.open(["demo", "--json"]) as run:
        await run.until('"name": "Bash"}')  # the test run has started
        run.ctrl_c()
        status = await run.wait()
    assert status == 130
    records = [json.loads(line) for line in run.stdout.splitlines()]
    timeline = records[-1]
    assert timeline["type"] == "Timeline"
    (call,) = [c for c in timeline["calls"] if any(t["state"] == "cancelled" for t in c["tools"])]
    bash = next(t for t in call["tools"] if t["call"].startswith("Bash("))
    assert bash["state"] == "cancelled"
    assert bash["started_at"] is not None  # it ran, until Ctrl+C
    assert [t for t in call["tools"] if t["state"] == "done"] == []
    assert call["saved"] == 0
    assert timeline["saved"] == sum(c["saved"] for c in timeline["calls"])


# -- the recorder: what a cancelled tool saves, the streaming row ----------------------

RUNS = st.lists(
    st.tuples(
        st.floats(0, 10),
        st.floats(0, 10),
        st.sampled_from(["done", "error", "cancelled"]),
    ),
    min_size=1,
    max_size=6,
)


def recorded(runs: list[tuple[float, float, str]], stream_end: float) -> TurnRecorder:
    now = [0.0]
    recorder = TurnRecorder(lambda: now[0])
    for i, (start, length, state) in enumerate(runs):
        now[0] = start
        recorder.tool_started(f"t{i}", "Bash", {"command": f"job {i}"})
        now[0] = start + length
        recorder.feed(
            ToolFinished(
                f"t{i}",
                is_error=state == "error",
                abort_reason=None if state != "cancelled" else _abort(),
            )
        )
    recorder.current.stream_ended_at = stream_end
    return recorder


def _abort() -> AbortReason:
    return AbortReason.USER_INTERRUPTED


@settings(max_examples=60, deadline=None)
@given(RUNS, st.floats(0, 10))
def test_a_cancelled_tool_saves_nothing(runs: list[tuple[float, float, str]], end: float) -> None:
    every = recorded(runs, end)
    assert {r.state for r in every.tools.values()} == {s for _, _, s in runs}
    kept = recorded([r for r in runs if r[2] != "cancelled"], end)
    assert every.saved(every.current) == kept.saved(kept.current)
    assert every.saved(every.current) >= 0
    if all(state == "cancelled" for _, _, state in runs):
        assert every.total_saved() == 0


def test_a_tool_call_has_a_row_while_its_input_streams() -> None:
    from trio_agent import BlockFinished, ToolInputDelta

    recorder = TurnRecorder(lambda: 1.0)
    recorder.feed(ToolInputDelta(1, "toolu_w", "Write", {"file_path": "STA"}, 16))
    assert recorder.tools["toolu_w"].state == "streaming"
    assert recorder.tools["toolu_w"].summary == "Write(STA)"
    recorder.feed(ToolInputDelta(1, "toolu_w", "Write", {"file_path": "STATUS.md"}, 24))
    assert recorder.tools["toolu_w"].summary == "Write(STATUS.md)"
    block = ToolUseBlock("toolu_w", "Write", {"file_path": "STATUS.md", "content": "x"})
    recorder.feed(BlockFinished(1, block))
    assert recorder.tools["toolu_w"].state == "queued"
    assert recorder.current.tool_ids == ["toolu_w"]  # one row
