"""Grep and Glob never freeze the loop and stop when cancelled: Grep's regex runs in a
real ripgrep process (killed on cancellation), Glob checks for cancellation in every
directory it visits."""

from __future__ import annotations

import os
import pathlib
from typing import Any

import pytest
import trio

from trio_agent import ToolContext, ToolOutput
from trio_agent.testing import no_leaks
from trio_agent.tools import Glob, Grep, Workspace
from trio_agent.tools._grep import ripgrep


def _children_named(name: str) -> list[int]:
    me = os.getpid()
    found: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = pathlib.Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat.rsplit(")", 1)[1].split()
        if comm == name and int(fields[1]) == me and fields[0] not in "ZX":
            found.append(int(entry))
    return found


async def _call(tool: Any, input: dict[str, Any]) -> ToolOutput:
    assert tool.validate(input) is None
    out = await tool.run(input, ToolContext("t", tool.name))
    assert isinstance(out, ToolOutput)
    return out


def test_ripgrep_is_there() -> None:
    rg = ripgrep()
    assert rg is not None
    assert os.access(rg, os.X_OK)


async def test_a_catastrophic_pattern_for_backtracking_is_linear(tmp_path: pathlib.Path) -> None:
    # (a*)*b on a line of a's takes Python's re exponential time, with the GIL held.
    (tmp_path / "a.txt").write_text("a" * 64 + "\n")
    out = await _call(Grep(Workspace(tmp_path)), {"pattern": "(a*)*b", "output_mode": "content"})
    assert out.content == "No matches found"
    out = await _call(Grep(Workspace(tmp_path)), {"pattern": "(a*)*$", "output_mode": "content"})
    assert out.content == "a.txt:1:" + "a" * 64


@pytest.mark.skipif(not pathlib.Path("/proc").is_dir(), reason="needs /proc")
async def test_cancellation_kills_ripgrep_at_once(tmp_path: pathlib.Path) -> None:
    # 16 KiB of text (the binary sniff reads 8 KiB), then a 64 GiB hole of NUL
    # bytes that ripgrep reads for a long time.
    big = tmp_path / "big.txt"
    with big.open("wb") as file:
        file.write(b"text\n" * 3300)
        file.truncate(64 << 30)
    ws = Workspace(tmp_path)
    seen: list[int] = []
    finished: list[ToolOutput] = []

    async def grep() -> None:
        finished.append(await _call(Grep(ws), {"pattern": "needle"}))

    with no_leaks(fds=True):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(grep)
            while not (seen := _children_named("rg")):
                assert finished == []  # rg must still be searching
                await trio.sleep(0.01)  # the loop is not frozen while rg works
            nursery.cancel_scope.cancel()
    assert finished == []
    assert len(seen) == 1
    assert _children_named("rg") == []
    with pytest.raises(ProcessLookupError):
        os.kill(seen[0], 0)  # killed and reaped before the tool's cancellation ended


def _deep_tree(root: pathlib.Path, width: int, depth: int) -> int:
    count = 0
    level = [root]
    for _ in range(depth):
        nxt: list[pathlib.Path] = []
        for parent in level:
            for i in range(width):
                child = parent / f"d{i}"
                child.mkdir()
                nxt.append(child)
                count += 1
        level = nxt
    return count


async def test_glob_checks_for_cancellation_in_every_directory(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dirs = _deep_tree(tmp_path, width=3, depth=5)
    assert dirs == 3 + 9 + 27 + 81 + 243
    ws = Workspace(tmp_path)
    visits: list[int] = []
    real_scandir = os.scandir
    token = trio.lowlevel.current_trio_token()

    async def main() -> None:
        with trio.CancelScope() as scope:

            def scandir(path: Any) -> Any:
                visits.append(1)
                if len(visits) == 3:
                    # Cancel from the worker thread, in the middle of the walk.
                    trio.from_thread.run_sync(scope.cancel, trio_token=token)
                return real_scandir(path)

            monkeypatch.setattr(os, "scandir", scandir)
            await _call(Glob(ws), {"pattern": "**/**/**/**/**/x"})
            raise AssertionError("Glob was not cancelled")
        assert scope.cancelled_caught

    await main()
    # It stopped at the next directory: the 4th listing never happened.
    assert len(visits) == 3


async def test_glob_with_many_double_stars_is_not_exponential(tmp_path: pathlib.Path) -> None:
    _deep_tree(tmp_path, width=2, depth=8)
    (tmp_path / "d0" / "d1" / "x").write_text("")
    out = await _call(Glob(Workspace(tmp_path), sort="name"), {"pattern": "**/**/**/**/**/**/x"})
    assert out.content == "d0/d1/x"
