"""The file tools never touch anything outside the workspace, whatever path the model
gives, and every tool under attack really runs (``run_tool`` fails the test on an
input its schema rejects, instead of skipping it).

This supersedes ``test_file_tools_never_touch_anything_outside`` of the old
tests/test_security.py, which gave Read, Write and Edit a key their schema did not
have, so only Glob and Grep ran. (Read, Write and Edit take Claude Code's
``file_path``; Glob and Grep its ``path``.)
"""

from __future__ import annotations

import pathlib
from typing import Any

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import Tool, ToolOutput
from trio_agent.testing import run_tool
from trio_agent.tools import Workspace, default_tools

SECRET = "secret-outside"

HOSTILE = st.one_of(
    st.sampled_from(
        [
            "../x",
            "../../etc/passwd",
            "/etc/passwd",
            "a/../../x",
            "link/x",
            "link",
            "link/",
            "./link/x",
            "filelink",
            "deep/link/x",
            "loop/x",
        ]
    ),
    st.builds(lambda n: "../" * n + "escape.txt", st.integers(1, 5)),
    st.builds(
        lambda parts: "/".join(parts),
        st.lists(st.sampled_from(["link", ".", "deep", "x", "..", "loop", "filelink"]), max_size=5),
    ).filter(bool),
)


def _inputs(path: str) -> dict[str, dict[str, Any]]:
    return {
        "Read": {"file_path": path},
        "Write": {"file_path": path, "content": "pwned"},
        "Edit": {"file_path": path, "old_string": SECRET, "new_string": "pwned"},
        "Glob": {"pattern": "*", "path": path},
        "Grep": {"pattern": "secret", "path": path},
    }


def _state(directory: pathlib.Path) -> list[tuple[str, int, bytes]]:
    return sorted(
        (str(p.relative_to(directory)), p.stat().st_mtime_ns, p.read_bytes())
        for p in directory.rglob("*")
        if p.is_file()
    )


@settings(max_examples=40, deadline=None)
@given(path=HOSTILE)
def test_file_tools_never_touch_anything_outside(
    tmp_path_factory: pytest.TempPathFactory, path: str
) -> None:
    base = tmp_path_factory.mktemp("ws")
    root, outside = base / "root", base / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "x").write_text(SECRET)
    (root / "link").symlink_to(outside)
    (root / "filelink").symlink_to(outside / "x")
    (root / "deep").mkdir()
    (root / "deep" / "link").symlink_to("../../outside")
    (root / "loop").symlink_to("loop")
    before = _state(outside)
    tools: dict[str, Tool] = {
        t.name: t for t in default_tools(Workspace(root)) if t.name in _inputs(path)
    }
    runs: list[str] = []
    outputs: dict[str, ToolOutput] = {}

    async def main() -> None:
        for name, input in _inputs(path).items():
            outputs[name] = await run_tool(tools[name], input, runs=runs)

    trio.run(main)
    assert runs == ["Read", "Write", "Edit", "Glob", "Grep"]  # every tool ran
    for name, out in outputs.items():
        # Edit's refusal repeats the model's own old_string (Claude Code's words): not a leak.
        shown = str(out.content).replace(f"String: {SECRET}", "")
        assert SECRET not in shown, (name, out)
        if name != "Write":
            assert out.is_error or "No " in str(out.content), (name, out)
    assert _state(outside) == before
    assert not (base / "escape.txt").exists()
    assert not (base.parent / "escape.txt").exists()


async def test_run_tool_refuses_an_input_the_schema_rejects(tmp_path: pathlib.Path) -> None:
    read = next(t for t in default_tools(Workspace(tmp_path)) if t.name == "Read")
    runs: list[str] = []
    with pytest.raises(AssertionError, match="Read was not run"):
        await run_tool(read, {"path": "x"}, runs=runs)
    assert runs == []
    (tmp_path / "x").write_text("hello")
    out = await run_tool(read, {"file_path": "x"}, runs=runs)
    assert out.content == "1\thello"
    assert runs == ["Read"]
