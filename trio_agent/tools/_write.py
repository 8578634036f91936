"""The Write tool: create or replace a file, atomically."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from .._tools import Tool, ToolContext, ToolOutput
from ._files import atomic_write, run_guarded
from ._workspace import Workspace

__all__ = ["Write"]

_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "File path, relative to the workspace root."},
        "content": {"type": "string", "description": "The whole new content of the file."},
    },
    "required": ["path", "content"],
    "additionalProperties": False,
}


def _write(ws: Workspace, input: Mapping[str, Any]) -> str:
    data = input["content"].encode("utf-8")
    existed, shown = atomic_write(ws, input["path"], data)
    verb = "Updated" if existed else "Created"
    return f"{verb} {shown} ({len(data)} bytes)"


def Write(ws: Workspace) -> Tool:
    """The Write tool: ``{path, content}`` writes a UTF-8 file.

    Missing parent directories are created (inside the workspace); the file is
    replaced atomically (a temporary file, then ``os.replace``), so a reader never
    sees half of it. Not concurrency-safe.
    """

    async def run(input: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        return await run_guarded(ws, functools.partial(_write, ws, input))

    return Tool(
        "Write",
        "Write a file in the workspace, replacing it if it exists. Parent directories "
        "are created as needed.",
        _SCHEMA,
        run,
    )
