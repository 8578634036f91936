"""The Write tool: create or replace a file, atomically.

Replacing an existing file requires that Read showed it and it has not changed
since (Claude Code's read-before-write rule, :func:`._files.check_fresh`).
"""

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
        "file_path": {
            "type": "string",
            "description": "The absolute path to the file to write "
            "(or a path relative to the workspace root)",
        },
        "content": {"type": "string", "description": "The content to write to the file"},
    },
    "required": ["file_path", "content"],
    "additionalProperties": False,
}


def _write(ws: Workspace, input: Mapping[str, Any]) -> str:
    path: str = input["file_path"]
    existed, _shown = atomic_write(ws, path, input["content"].encode("utf-8"))
    if existed:
        return f"The file {path} has been updated successfully."
    return f"File created successfully at: {path}"


def Write(ws: Workspace) -> Tool:
    """The Write tool: ``{file_path, content}`` writes a UTF-8 file.

    Missing parent directories are created (inside the workspace); the file is
    replaced atomically (a temporary file, then ``os.replace``), so a reader never
    sees half of it. An existing file must have been Read through *ws* and be
    unchanged since. Not concurrency-safe.
    """

    async def run(input: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        return await run_guarded(ws, functools.partial(_write, ws, input))

    return Tool(
        "Write",
        "Writes a file to the workspace.\n\n"
        "Usage:\n"
        "- This tool will overwrite the existing file if there is one at the provided path.\n"
        "- If this is an existing file, you MUST use the Read tool first to read the file's "
        "contents. This tool will fail if you did not read the file first.\n"
        "- Parent directories are created as needed.\n"
        "- ALWAYS prefer editing existing files with the Edit tool. NEVER write new files "
        "unless explicitly required.",
        _SCHEMA,
        run,
    )
