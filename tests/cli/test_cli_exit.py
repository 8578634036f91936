"""The command ends its process as soon as it is done, on the real command: the
``atexit`` handlers run and every byte of output is flushed, but the interpreter's
teardown (freeing every module and object, a few tenths of a second) is skipped;
the exit status is kept."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import trio

from trio_agent import TextBlock
from trio_agent.testing import HTTPErrorAnswer, ScriptedAnswer, ScriptedModel, serve_scripted_model

# The command as the `trio-agent` script runs it (`main()`, no arguments), with an
# atexit handler, and an object that says when the interpreter's teardown frees it.
COMMAND = """
import atexit, sys
atexit.register(lambda: print("atexit ran", file=sys.stderr, flush=True))

class Freed:
    def __del__(self):
        print("torn down", file=sys.stderr, flush=True)

kept = Freed()
from trio_agent._cli import main
sys.exit(main())
"""

LONG = "".join(f"line {i} of a long answer\n" for i in range(4000))


async def _run(cli: Any, args: list[str]) -> tuple[int, str, str]:
    process = await trio.run_process(
        [sys.executable, "-c", COMMAND, *args],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        env=cli.env(),
    )
    return process.returncode, process.stdout.decode(), process.stderr.decode()


async def test_run_flushes_runs_atexit_and_skips_the_teardown(cli: Any, tmp_path: Path) -> None:
    model = ScriptedModel([ScriptedAnswer(blocks=[TextBlock(LONG)])])
    async with serve_scripted_model(model) as url:
        status, out, err = await _run(
            cli, ["run", "hi", "--base-url", url, "--workspace", str(tmp_path)]
        )
    assert status == 0, err
    assert LONG in out
    assert out.rstrip().endswith("out tokens]")  # the summary, last
    assert err.splitlines() == ["atexit ran"]


async def test_the_exit_status_is_kept(cli: Any, tmp_path: Path) -> None:
    model = ScriptedModel([HTTPErrorAnswer(status=400)])
    async with serve_scripted_model(model) as url:
        status, _, err = await _run(
            cli, ["run", "hi", "--base-url", url, "--workspace", str(tmp_path)]
        )
    assert status == 1
    assert err.splitlines()[-1] == "atexit ran"
    assert "torn down" not in err
    status, out, err = await _run(cli, ["--version"])
    assert (status, err) == (0, "atexit ran\n")
    assert out.startswith("trio-agent ")
    status, _, err = await _run(cli, ["run"])  # a usage error
    assert status == 2
    assert "torn down" not in err
