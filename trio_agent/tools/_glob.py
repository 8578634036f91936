"""The Glob tool: find files by name pattern."""

from __future__ import annotations

import functools
import pathlib
from collections.abc import Mapping
from typing import Any, Literal

from .._tools import Tool, ToolContext, ToolOutput
from ._beneath import resolve_beneath
from ._files import ToolRefusal, run_guarded
from ._grep import Exclude, hidden_note
from ._walk import GlobMatcher, walk_files
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
    ws: Workspace,
    input: Mapping[str, Any],
    max_results: int,
    sort: Literal["mtime", "name"],
    exclude: Exclude = None,
) -> str:
    pattern: str = input["pattern"]
    check_pattern(pattern)
    matcher = GlobMatcher(pattern)
    with resolve_beneath(ws, input.get("path", ".")) as base:
        if base.name is not None:
            raise ToolRefusal(f"not a directory: {base.shown}")
        found: list[tuple[float, str]] = []
        hidden: list[str] = []
        for entry in walk_files(ws, base.dir_fd, base.shown, matcher):
            if exclude is not None and exclude(entry.rel):
                hidden.append(entry.rel)
            else:
                found.append((entry.st.st_mtime, entry.rel))
    note = [hidden_note(hidden).replace("not searched", "not listed")] if hidden else []
    if not found:
        return "\n".join([f"No files match {pattern!r} in {base.shown}", *note])
    if sort == "mtime":
        found.sort(key=lambda item: (-item[0], item[1]))
    else:
        found.sort(key=lambda item: item[1])
    lines = [name for _, name in found[:max_results]]
    if len(found) > max_results:
        lines.append(
            f"[truncated: {len(found) - max_results} more files; use a narrower pattern or path]"
        )
    return "\n".join([*lines, *note])


def Glob(
    ws: Workspace,
    *,
    max_results: int = 100,
    sort: Literal["mtime", "name"] = "mtime",
    exclude: Exclude = None,
) -> Tool:
    """The Glob tool: ``{pattern, path?}`` → matching files, one per line.

    Paths are relative to the workspace root; sorted newest first (``sort="mtime"``)
    or by name; at most *max_results*, with a note giving how many more matched.
    The tree is walked race-free beneath the root (see :mod:`._walk`), checking for
    cancellation in every directory; symlinked directories are not entered, and
    symlinked files leading out of the workspace are left out. Concurrency-safe.

    *exclude* (a predicate of the workspace-relative path, such as
    ``PermissionRules.read_denied``) leaves files out; the result says which.
    """

    async def run(input: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        return await run_guarded(
            ws, functools.partial(_glob, ws, input, max_results, sort, exclude)
        )

    return Tool(
        "Glob",
        "Find files in the workspace whose path matches a glob pattern ('**' matches "
        "any number of directories). Returns paths relative to the workspace root, "
        + ("most recently modified first." if sort == "mtime" else "sorted by name."),
        _SCHEMA,
        run,
        concurrency_safe=True,
    )
