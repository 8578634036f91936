"""The Glob tool: find files by name pattern."""

from __future__ import annotations

import functools
import pathlib
from collections.abc import Mapping
from typing import Any, Literal

import trio

from .._tools import Tool, ToolContext, ToolOutput
from ._files import ToolRefusal, run_guarded
from ._workspace import Workspace

__all__ = ["Glob"]

_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "pattern": {
            "type": "string",
            "description": "A glob pattern such as '**/*.py' or 'src/*.txt'.",
        },
        "path": {
            "type": "string",
            "description": "Directory to search in, relative to the workspace root "
            "(default: the root).",
        },
    },
    "required": ["pattern"],
    "additionalProperties": False,
}

_CHECK_EVERY = 1000


def check_pattern(pattern: str) -> None:
    """Refuse a glob pattern that could name paths outside its base directory."""
    if not pattern:
        raise ToolRefusal("empty pattern")
    if "\0" in pattern:
        raise ToolRefusal("pattern contains a NUL byte")
    pure = pathlib.PurePosixPath(pattern)
    if pure.is_absolute():
        raise ToolRefusal("pattern must be relative; use path to choose the directory")
    if ".." in pure.parts:
        raise ToolRefusal("pattern must not contain '..'")


def _glob(
    ws: Workspace, input: Mapping[str, Any], max_results: int, sort: Literal["mtime", "name"]
) -> str:
    pattern: str = input["pattern"]
    check_pattern(pattern)
    base = ws.resolve(input.get("path", "."))
    if not base.is_dir():
        raise ToolRefusal(f"not a directory: {ws.display(base)}")
    found: list[tuple[float, str]] = []
    for count, match in enumerate(base.glob(pattern), 1):
        if count % _CHECK_EVERY == 0:
            trio.from_thread.check_cancelled()
        # A symlink may point out of the workspace: such matches are not shown.
        if not match.is_file() or not ws.contains(match):
            continue
        found.append((match.stat().st_mtime, ws.display(match)))
    if not found:
        return f"No files match {pattern!r} in {ws.display(base)}"
    if sort == "mtime":
        found.sort(key=lambda item: (-item[0], item[1]))
    else:
        found.sort(key=lambda item: item[1])
    lines = [name for _, name in found[:max_results]]
    if len(found) > max_results:
        lines.append(
            f"[truncated: {len(found) - max_results} more files; use a narrower pattern or path]"
        )
    return "\n".join(lines)


def Glob(
    ws: Workspace, *, max_results: int = 100, sort: Literal["mtime", "name"] = "mtime"
) -> Tool:
    """The Glob tool: ``{pattern, path?}`` → matching files, one per line.

    Paths are relative to the workspace root; sorted newest first (``sort="mtime"``)
    or by name; at most *max_results*, with a note giving how many more matched.
    Matches that are symlinks leading out of the workspace are left out.
    Concurrency-safe.
    """

    async def run(input: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        return await run_guarded(ws, functools.partial(_glob, ws, input, max_results, sort))

    return Tool(
        "Glob",
        "Find files in the workspace whose path matches a glob pattern ('**' matches "
        "any number of directories). Returns paths relative to the workspace root, "
        + ("most recently modified first." if sort == "mtime" else "sorted by name."),
        _SCHEMA,
        run,
        concurrency_safe=True,
    )
