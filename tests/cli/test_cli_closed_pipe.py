"""``trio-agent demo | head -2``: a closed stdout ends the command quietly (status
141, nothing on stderr), with the rich live view and with ``--json``; ``run`` too."""

from __future__ import annotations

import sys
from subprocess import PIPE
from typing import Any

import pytest
import trio

from trio_agent import TextBlock
from trio_agent.testing import ScriptedAnswer, ScriptedModel, serve_scripted_model

CLI_TIMEOUT = 60


async def head_2(argv: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run the command, read two lines of its stdout, close it as ``head -2`` does;
    its exit status and stderr."""
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "trio_agent._cli", *argv],
        stdin=PIPE,
        stdout=PIPE,
        stderr=PIPE,
        env=env,
    )
    assert process.stdout is not None
    assert process.stderr is not None
    err = bytearray()

    async def pump() -> None:
        assert process.stderr is not None
        async for chunk in process.stderr:
            err.extend(chunk)

    with trio.fail_after(CLI_TIMEOUT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(pump)
            seen = bytearray()
            while seen.count(b"\n") < 2:
                chunk = await process.stdout.receive_some()
                assert chunk, f"stdout ended early; stderr: {err.decode()}"
                seen += chunk
            await process.stdout.aclose()
            status = await process.wait()
    return status, err.decode()


@pytest.mark.parametrize("json", [False, True])
async def test_demo_into_a_closed_pipe_exits_quietly(json: bool, cli: Any) -> None:
    argv = ["demo", "--speed", "20", *(["--json"] if json else [])]
    status, err = await head_2(argv, cli.env(COLUMNS="100"))
    assert status == 141, err
    assert err == ""


async def test_run_into_a_closed_pipe_exits_quietly(cli: Any) -> None:
    text = "".join(f"line {i}\n" for i in range(2000))
    scripted = ScriptedModel([ScriptedAnswer(blocks=[TextBlock(text)])])
    async with serve_scripted_model(scripted) as url:
        status, err = await head_2(["run", "hi", "--base-url", url], cli.env())
    assert status == 141, err
    assert "Traceback" not in err
    assert "internal error" not in err
