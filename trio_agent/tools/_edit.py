"""The Edit tool: replace an exact string in a file."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from .._tools import Tool, ToolContext, ToolOutput
from ._files import ToolRefusal, atomic_write, read_text_file, run_guarded
from ._workspace import Workspace

__all__ = ["Edit"]

_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "File path, relative to the workspace root."},
        "old_string": {"type": "string", "description": "The exact text to replace."},
        "new_string": {"type": "string", "description": "The text to put in its place."},
        "replace_all": {
            "type": "boolean",
            "description": "Replace every occurrence (default: old_string must be unique).",
        },
    },
    "required": ["path", "old_string", "new_string"],
    "additionalProperties": False,
}


def _edit(ws: Workspace, input: Mapping[str, Any]) -> str:
    path: str = input["path"]
    old: str = input["old_string"]
    new: str = input["new_string"]
    replace_all: bool = input.get("replace_all", False)
    if not old:
        raise ToolRefusal("old_string is empty; use Write to create a file")
    if old == new:
        raise ToolRefusal("old_string and new_string are the same; nothing to do")
    text, shown = read_text_file(ws, path)
    count = text.count(old)
    if count == 0:
        raise ToolRefusal(f"old_string not found in {shown}")
    if count > 1 and not replace_all:
        raise ToolRefusal(
            f"old_string occurs {count} times in {shown}; give more surrounding text to "
            "make it unique, or set replace_all to replace every occurrence"
        )
    # Written to the name the read resolved to (a symlink inside is followed once).
    atomic_write(ws, path, text.replace(old, new).encode("utf-8"))
    return f"Replaced {count} occurrence{'s' if count > 1 else ''} in {shown}"


def Edit(ws: Workspace) -> Tool:
    """The Edit tool: ``{path, old_string, new_string, replace_all?}``.

    *old_string* must occur exactly once unless *replace_all* is true; the file is
    rewritten atomically. Not concurrency-safe.
    """

    async def run(input: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        return await run_guarded(ws, functools.partial(_edit, ws, input))

    return Tool(
        "Edit",
        "Replace an exact string in a text file of the workspace. old_string must "
        "match exactly once (whitespace included) unless replace_all is true.",
        _SCHEMA,
        run,
    )
