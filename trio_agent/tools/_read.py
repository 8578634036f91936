"""The Read tool: a text file's lines, numbered like ``cat -n``."""

from __future__ import annotations

import functools
import io
from collections.abc import Mapping
from typing import Any

import trio

from .._tools import Tool, ToolContext, ToolOutput
from ._files import SNIFF_BYTES, ToolRefusal, bounded_lines, is_binary, open_text, run_guarded
from ._workspace import Workspace

__all__ = ["Read"]

#: Lines shown when the model gives no ``limit``.
DEFAULT_LINES = 2000
#: Longer lines are cut, with a note.
MAX_LINE_CHARS = 2000
#: Lines between two checks for cancellation in the worker thread.
_CHECK_EVERY = 10_000

_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "File path, relative to the workspace root."},
        "offset": {"type": "integer", "minimum": 1, "description": "First line to show (1-based)."},
        "limit": {"type": "integer", "minimum": 1, "description": "How many lines to show."},
    },
    "required": ["path"],
    "additionalProperties": False,
}


def _read(ws: Workspace, input: Mapping[str, Any], max_chars: int) -> str:
    offset: int = input.get("offset", 1)
    limit: int = input.get("limit", DEFAULT_LINES)
    with open_text(ws, input["path"], what="; use Glob to list files") as (raw, shown):
        if is_binary(raw.read(SNIFF_BYTES)):
            raise ToolRefusal(f"{shown} is a binary file; Read shows text files only")
        raw.seek(0)
        out: list[str] = []
        used = 0
        last = 0
        stop: str | None = None
        with io.TextIOWrapper(raw, encoding="utf-8", errors="replace") as text:
            for number, (line, cut) in enumerate(bounded_lines(text, MAX_LINE_CHARS), 1):
                if number % _CHECK_EVERY == 0:
                    trio.from_thread.check_cancelled()
                last = number
                if number < offset:
                    continue
                if number >= offset + limit:
                    stop = "limit"
                    break
                line = line.removesuffix("\r")
                if cut:
                    line = f"{line} [... line cut, {cut} more characters]"
                entry = f"{number:6}\t{line}"
                if used + len(entry) + 1 > max_chars and out:
                    stop = "size"
                    break
                out.append(entry)
                used += len(entry) + 1
    if last == 0:
        return f"(file {shown} is empty)"
    if not out:
        raise ToolRefusal(f"offset {offset} is past the end of {shown} ({last} lines)")
    first_shown = offset
    last_shown = offset + len(out) - 1
    if stop is not None:
        why = (
            f"the output limit of {max_chars} characters"
            if stop == "size"
            else f"the limit of {limit} lines"
        )
        out.append(
            f"[truncated at {why}: showed lines {first_shown}-{last_shown}; more lines follow, "
            f"read on with offset={last_shown + 1}]"
        )
    return "\n".join(out)


def Read(ws: Workspace, *, max_chars: int = 100_000) -> Tool:
    """The Read tool: ``{path, offset?, limit?}`` → numbered lines (``cat -n`` style).

    At most *limit* lines (default 2000) and *max_chars* characters are shown, with a
    note saying where to read on; lines past 2000 characters are cut; binary files
    (a NUL byte in the first 8 KiB) are refused. Concurrency-safe.
    """

    async def run(input: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        return await run_guarded(ws, functools.partial(_read, ws, input, max_chars))

    return Tool(
        "Read",
        "Read a text file in the workspace. Returns its lines numbered like `cat -n`. "
        "Use offset and limit to read a long file in parts.",
        _SCHEMA,
        run,
        concurrency_safe=True,
    )
