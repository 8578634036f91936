"""The Read tool: a text file's lines, numbered as Claude Code's Read numbers them.

Each line is ``N<TAB>text`` (the number, a tab, the line without its ``\\n`` or
``\\r\\n``), as Claude Code's Read shows files since its compact line prefix (the
format Edit's ``old_string`` is copied from). What Read showed is remembered in the
workspace (:class:`~trio_agent.tools.ReadLog`) for Write's and Edit's
read-before-write check.
"""

from __future__ import annotations

import functools
import hashlib
import io
import os
import posixpath
from collections.abc import Mapping
from typing import Any

import trio

from .._tools import Tool, ToolContext, ToolOutput
from ._files import (
    FILE_MISSING,
    SNIFF_BYTES,
    ToolRefusal,
    bounded_lines,
    cwd_note,
    is_binary,
    open_text,
    run_guarded,
)
from ._workspace import Seen, Workspace

__all__ = ["Read"]

#: Lines shown when the model gives no ``limit`` (Claude Code's Read: 2000).
DEFAULT_LINES = 2000
#: Longer lines are cut, with a note (Claude Code's Read promises the same cut).
MAX_LINE_CHARS = 2000
#: Lines between two checks for cancellation in the worker thread.
_CHECK_EVERY = 10_000

#: Claude Code's words for an empty file (a plain result, not an error).
EMPTY_FILE = (
    "<system-reminder>Warning: the file exists but the contents are empty.</system-reminder>"
)

_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "file_path": {
            "type": "string",
            "description": "The absolute path to the file to read "
            "(or a path relative to the workspace root)",
        },
        "offset": {
            "type": "integer",
            "minimum": 0,
            "description": "The line number to start reading from. Only provide if the "
            "file is too large to read at once",
        },
        "limit": {
            "type": "integer",
            "minimum": 1,
            "description": "The number of lines to read. Only provide if the file is too "
            "large to read at once.",
        },
    },
    "required": ["file_path"],
    "additionalProperties": False,
}


def past_the_end(offset: int, total: int) -> str:
    """Claude Code's words for an offset past the last line (a plain result)."""
    return (
        "<system-reminder>Warning: the file exists but is shorter than the provided offset "
        f"({offset}). The file has {total} lines.</system-reminder>"
    )


def binary_refusal(path: str) -> str:
    """Claude Code's refusal of a binary file (it names the file's extension)."""
    ext = posixpath.splitext(path)[1]
    kind = f"a binary {ext} file" if ext else "a binary file"
    return (
        f"This tool cannot read binary files. The file appears to be {kind}. "
        "Please use appropriate tools for binary file analysis."
    )


class _Hashing(io.RawIOBase):
    """A raw reader over *file* that hashes every byte read through it."""

    def __init__(self, file: io.BufferedReader) -> None:
        self._file = file
        self.hash = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = self._file.readinto(buffer)
        self.hash.update(memoryview(buffer)[:n])
        return n


def _read(ws: Workspace, input: Mapping[str, Any], max_chars: int) -> str:
    try:
        return _read_beneath(ws, input, max_chars)
    except ToolRefusal as exc:
        if str(exc) == FILE_MISSING:
            raise ToolRefusal(f"{FILE_MISSING} {cwd_note(ws)}") from None
        raise


def _read_beneath(ws: Workspace, input: Mapping[str, Any], max_chars: int) -> str:
    offset: int = max(input.get("offset", 1), 1)
    limit: int = input.get("limit", DEFAULT_LINES)
    with open_text(ws, input["file_path"], what="; use Glob to list files") as (raw, shown):
        fd = raw.fileno()
        if is_binary(os.pread(fd, SNIFF_BYTES, 0)):
            raise ToolRefusal(binary_refusal(shown))
        st = os.fstat(fd)
        hashing = _Hashing(raw)
        out: list[str] = []
        used = 0
        last = 0
        stop: str | None = None
        # newline="\n": only "\n" ends a line (a lone "\r" is text), as in Claude Code.
        buffered = io.BufferedReader(hashing)
        with io.TextIOWrapper(buffered, encoding="utf-8", errors="replace", newline="\n") as text:
            for number, (line, cut) in enumerate(bounded_lines(text, MAX_LINE_CHARS), 1):
                if number % _CHECK_EVERY == 0:
                    trio.from_thread.check_cancelled()
                last = number
                if number < offset:
                    continue
                if number >= offset + limit:
                    stop = "limit"
                    break
                if not cut:  # a cut line's end (and its "\r") is not shown
                    line = line.removesuffix("\r")
                if number == 1:
                    line = line.removeprefix("\ufeff")
                if cut:
                    line = f"{line} [... line cut, {cut} more characters]"
                entry = f"{number}\t{line}"
                if used + len(entry) + 1 > max_chars and out:
                    stop = "size"
                    break
                out.append(entry)
                used += len(entry) + 1
        # Every byte went through the hash only if the loop reached the end.
        digest = hashing.hash.digest() if stop is None else None
        ws.reads.record(shown, Seen(st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size, digest))
    if last == 0:
        return EMPTY_FILE
    if not out:
        return past_the_end(offset, last)
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
    """The Read tool: ``{file_path, offset?, limit?}`` → numbered lines, ``N<TAB>text``.

    At most *limit* lines (default 2000) and *max_chars* characters are shown, with a
    note saying where to read on; lines past 2000 characters are cut; binary files
    (a NUL byte in the first 8 KiB) are refused. An empty file, or an offset past
    the end, gives Claude Code's ``<system-reminder>`` warning. The file is recorded
    as read in *ws* (Write and Edit require it). Concurrency-safe.
    """

    async def run(input: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        return await run_guarded(ws, functools.partial(_read, ws, input, max_chars))

    return Tool(
        "Read",
        "Reads a file from the workspace.\n\n"
        "Usage:\n"
        "- The file_path parameter is an absolute path inside the workspace, or a path "
        "relative to its root\n"
        f"- By default, it reads up to {DEFAULT_LINES} lines starting from the beginning "
        "of the file\n"
        "- You can optionally specify a line offset and limit (especially handy for long "
        "files), but it's recommended to read the whole file by not providing these "
        "parameters\n"
        f"- Any lines longer than {MAX_LINE_CHARS} characters will be truncated\n"
        "- Results are returned using cat -n format, with line numbers starting at 1\n"
        "- This tool can only read text files, not directories. To list a directory, use "
        "the Glob tool.\n"
        "- You must Read a file before you Write or Edit it.",
        _SCHEMA,
        run,
        concurrency_safe=True,
    )
