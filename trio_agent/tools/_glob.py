"""The Glob tool: find files by name pattern, with Claude Code's input and results."""

from __future__ import annotations

import functools
import pathlib
from collections.abc import Mapping
from typing import Any, Literal

from .._tools import Tool, ToolContext, ToolOutput
from ._beneath import resolve_beneath
from ._files import ToolRefusal, cwd_note, run_guarded
from ._grep import Exclude, hidden_note
from ._walk import GlobMatcher, walk_files
from ._workspace import Workspace

__all__ = ["Glob"]

#: Claude Code's result when nothing matches (Grep's files mode says the same).
NO_FILES = "No files found"
#: Claude Code's last line when more files matched than are listed.
TRUNCATED = "(Results are truncated. Consider using a more specific path or pattern.)"

_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "pattern": {"type": "string", "description": "The glob pattern to match files against"},
        "path": {
            "type": "string",
            "description": "The directory to search in. If not specified, the workspace root "
            "will be used. IMPORTANT: Omit this field to use the default directory. DO NOT enter "
            '"undefined" or "null" - simply omit it for the default behavior. Must be a valid '
            "directory path if provided.",
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
    path: str = input.get("path", ".")
    try:
        return _glob_beneath(ws, path, matcher, max_results, sort, exclude)
    except (FileNotFoundError, NotADirectoryError):
        raise ToolRefusal(f"Directory does not exist: {path}. {cwd_note(ws)}") from None


def _glob_beneath(
    ws: Workspace,
    path: str,
    matcher: GlobMatcher,
    max_results: int,
    sort: Literal["mtime", "name"],
    exclude: Exclude,
) -> str:
    with resolve_beneath(ws, path) as base:
        if base.st is None:
            raise ToolRefusal(f"Directory does not exist: {path}. {cwd_note(ws)}")
        if base.name is not None:
            raise ToolRefusal(f"Path is not a directory: {path}")
        found: list[tuple[int, str]] = []
        hidden: list[str] = []
        for entry in walk_files(ws, base.dir_fd, base.shown, matcher):
            if exclude is not None and (exclude(entry.rel) or exclude(entry.real)):
                hidden.append(entry.rel)
            else:
                found.append((entry.st.st_mtime_ns, entry.rel))
    note = [hidden_note(hidden).replace("not searched", "not listed")] if hidden else []
    if not found:
        return "\n".join([NO_FILES, *note])
    if sort == "mtime":
        found.sort(key=lambda item: (-item[0], item[1]))
    else:
        found.sort(key=lambda item: item[1])
    lines = [name for _, name in found[:max_results]]
    if len(found) > max_results:
        lines.append(TRUNCATED)
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
    or by name; at most *max_results* (100, as in Claude Code), then Claude Code's
    ``(Results are truncated...)`` line; ``No files found`` when nothing matches.
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

    order = "sorted by modification time, newest first" if sort == "mtime" else "sorted by name"
    return Tool(
        "Glob",
        "- Fast file pattern matching tool that works with any codebase size\n"
        '- Supports glob patterns like "**/*.js" or "src/**/*.ts"\n'
        f"- Returns matching file paths (relative to the workspace root) {order}\n"
        "- Use this tool when you need to find files by name patterns",
        _SCHEMA,
        run,
        concurrency_safe=True,
    )
