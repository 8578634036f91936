"""No race out of the workspace: a directory swapped for a symlink to outside between
check and use (forced with a hook) or all the time (a thread hammering swaps) never
lets Read, Write, Edit, Glob or Grep read or write anything outside."""

from __future__ import annotations

import contextlib
import os
import pathlib
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import trio

from trio_agent import ToolContext, ToolOutput
from trio_agent.tools import Edit, Glob, Grep, Read, Workspace, Write

SECRET = "SECRET-outside"
#: Calls of each tool while the swapper runs, then of Read and Edit alone.
ROUNDS = 100
READS = 500


@pytest.fixture
def tree(tmp_path: pathlib.Path) -> tuple[Workspace, pathlib.Path]:
    root = tmp_path / "root"
    (root / "d").mkdir(parents=True)
    (root / "d" / "f.txt").write_text("inside\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.txt").write_text(f"{SECRET}\n")
    (outside / "only_outside.txt").write_text(f"{SECRET}\n")
    return Workspace(root), outside


def _outside_state(outside: pathlib.Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(outside.iterdir())}


async def _call(tool: Any, input: dict[str, Any]) -> ToolOutput:
    assert tool.validate(input) is None
    out = await tool.run(input, ToolContext("t", tool.name))
    assert isinstance(out, ToolOutput)
    return out


def _swap(root: pathlib.Path, outside: pathlib.Path) -> None:
    """Replace root/d by a symlink to *outside* (keeping the real one as d_real)."""
    os.rename(root / "d", root / "d_real")
    os.symlink(outside, root / "d")


@contextlib.contextmanager
def _hook_open(when: Callable[[str, int], bool], act: Callable[[], None]) -> Iterator[list[str]]:
    """Run *act* just before the first ``os.open(name, flags, dir_fd=...)`` for which
    *when(name, flags)* holds: between the check and the use."""
    real_open = os.open
    fired: list[str] = []

    def open_(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if not fired and kwargs.get("dir_fd") is not None and when(str(path), flags):
            fired.append(str(path))
            act()
        return real_open(path, flags, *args, **kwargs)

    os.open = open_  # type: ignore[assignment]
    try:
        yield fired
    finally:
        os.open = real_open


TOOLS: dict[str, tuple[Callable[[Workspace], Any], dict[str, Any]]] = {
    "Read": (Read, {"file_path": "d/f.txt"}),
    "Write": (Write, {"file_path": "d/new.txt", "content": "planted"}),
    "Edit": (Edit, {"file_path": "d/f.txt", "old_string": SECRET, "new_string": "PWNED"}),
    "Glob": (Glob, {"pattern": "*", "path": "d"}),
    "Grep": (Grep, {"pattern": "SECRET", "path": "d"}),
}


@pytest.mark.parametrize("name", sorted(TOOLS))
async def test_directory_swapped_between_check_and_use(
    tree: tuple[Workspace, pathlib.Path], name: str
) -> None:
    ws, outside = tree
    before = _outside_state(outside)
    make, input = TOOLS[name]
    # The tool has checked `d` (an lstat: a directory) and is about to open it.
    with _hook_open(
        lambda path, flags: path == "d" and bool(flags & os.O_DIRECTORY),
        lambda: _swap(ws.root, outside),
    ) as fired:
        out = await _call(make(ws), input)
    assert fired == ["d"]  # the swap happened, between check and use
    assert out.is_error, out.content
    assert "outside the workspace" in str(out.content)
    assert SECRET not in str(out.content)
    assert "only_outside" not in str(out.content)
    assert _outside_state(outside) == before


@pytest.mark.parametrize("name", ["Read", "Edit", "Grep"])
async def test_file_swapped_for_a_fifo_after_the_check_does_not_block(
    tree: tuple[Workspace, pathlib.Path], name: str
) -> None:
    ws, _ = tree
    target = ws.root / "d" / "f.txt"

    def to_fifo() -> None:
        target.unlink()
        os.mkfifo(target)

    make, input = TOOLS[name]
    with _hook_open(lambda path, flags: path == "f.txt", to_fifo) as fired:
        out = await _call(make(ws), input)
    assert fired == ["f.txt"]
    if name == "Grep":  # a file that is not regular any more is skipped
        assert (out.content, out.is_error) == ("No files found", False)
    else:
        assert out.is_error
        assert out.content == "<tool_use_error>d/f.txt is not a regular file</tool_use_error>"


_SWAPPER = """
import ctypes, os, sys
root, outside = sys.argv[1], sys.argv[2]
d, link = os.path.join(root, "d"), os.path.join(root, ".swap")
os.symlink(outside, link)
libc = ctypes.CDLL(None, use_errno=True)
RENAME_EXCHANGE, AT_FDCWD = 2, -100
print("swapping", flush=True)
while True:  # d is a directory, then a symlink to outside, then a directory...
    if libc.renameat2(AT_FDCWD, d.encode(), AT_FDCWD, link.encode(), RENAME_EXCHANGE):
        raise OSError(ctypes.get_errno(), "renameat2")
"""


@contextlib.contextmanager
def _swapping(root: pathlib.Path, outside: pathlib.Path) -> Iterator[None]:
    """Exchange root/d and a symlink to outside atomically (``renameat2``
    ``RENAME_EXCHANGE``), as fast as it can, from another process (real parallelism:
    no GIL shared with the tools): ``d`` is always there, a directory half the time."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _SWAPPER, str(root), str(outside)], stdout=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"swapping\n"  # it runs
        yield
        assert proc.poll() is None, "the swapper stopped early"  # it ran all along
    finally:
        proc.kill()
        proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()
        d, link = root / "d", root / ".swap"
        if d.is_symlink():
            d.unlink()
            link.rename(d)
        else:
            link.unlink()


def test_hammered_swaps_never_read_or_write_outside(
    tree: tuple[Workspace, pathlib.Path],
) -> None:
    ws, outside = tree
    before = _outside_state(outside)
    tools = {name: make(ws) for name, (make, _) in TOOLS.items()}
    outputs: dict[str, list[ToolOutput]] = {name: [] for name in TOOLS}

    async def main() -> None:
        for _ in range(ROUNDS):
            for name, (_, input) in TOOLS.items():
                outputs[name].append(await _call(tools[name], input))
        # Then the cheap ones alone, many times: the window of a check-then-use race
        # is short, and a run of Reads hits it often (the old path-based code leaked
        # here about once in a hundred reads).
        for _ in range(READS):
            for name in ("Read", "Edit"):
                outputs[name].append(await _call(tools[name], TOOLS[name][1]))

    with _swapping(ws.root, outside):
        trio.run(main)
    for name, outs in outputs.items():
        assert len(outs) == ROUNDS + (READS if name in ("Read", "Edit") else 0), name
        for out in outs:
            # Edit's refusal repeats the model's own old_string: not a leak.
            shown = str(out.content).replace(f"String: {SECRET}", "")
            assert SECRET not in shown, (name, out)
            assert "only_outside" not in str(out.content), (name, out)
    assert _outside_state(outside) == before
    # The tools did work on the real directory in between: inside was read.
    assert any("inside" in str(o.content) for o in outputs["Read"])
