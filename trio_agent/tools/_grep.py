"""The Grep tool: search file contents with a Python regular expression."""

from __future__ import annotations

import fnmatch
import functools
import io
import os
import pathlib
import re
from collections.abc import Iterator, Mapping
from typing import Any

import trio

from .._tools import Tool, ToolContext, ToolOutput
from ._files import SNIFF_BYTES, ToolRefusal, is_binary, run_guarded
from ._workspace import Workspace

__all__ = ["Grep"]

#: Directories never searched: version-control metadata.
SKIPPED_DIRS = frozenset({".git", ".hg", ".svn"})
#: A matching line is cut to this many characters.
MAX_LINE_CHARS = 500

_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "pattern": {"type": "string", "description": "A Python regular expression."},
        "path": {
            "type": "string",
            "description": "File or directory to search, relative to the workspace root "
            "(default: the root).",
        },
        "glob": {
            "type": "string",
            "description": "Only search files whose name (or, with a '/', whose path "
            "relative to the root) matches this glob, e.g. '*.py'.",
        },
        "case_insensitive": {"type": "boolean"},
    },
    "required": ["pattern"],
    "additionalProperties": False,
}


def _files(ws: Workspace, base: pathlib.Path) -> Iterator[pathlib.Path]:
    """Regular files under *base*, depth first in name order; symlinked directories
    are not entered, symlinked files only when they stay inside the workspace."""
    if not base.is_dir():
        yield base
        return
    stack = [base]
    while stack:
        trio.from_thread.check_cancelled()
        directory = stack.pop()
        try:
            with os.scandir(directory) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue  # unreadable or vanished meanwhile: nothing to search there
        subdirs: list[pathlib.Path] = []
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if entry.name not in SKIPPED_DIRS:
                    subdirs.append(pathlib.Path(entry.path))
            elif entry.is_symlink():
                if entry.is_file() and ws.contains(entry.path):
                    yield pathlib.Path(entry.path)
            elif entry.is_file(follow_symlinks=False):
                yield pathlib.Path(entry.path)
        stack.extend(reversed(subdirs))


def _selected(rel: str, glob: str | None) -> bool:
    if glob is None:
        return True
    if "/" in glob:
        return fnmatch.fnmatchcase(rel, glob)
    return fnmatch.fnmatchcase(rel.rsplit("/", 1)[-1], glob)


def _grep(ws: Workspace, input: Mapping[str, Any], max_results: int) -> str:
    flags = re.IGNORECASE if input.get("case_insensitive", False) else 0
    try:
        regex = re.compile(input["pattern"], flags)
    except re.error as exc:
        raise ToolRefusal(f"invalid regular expression {input['pattern']!r}: {exc}") from None
    base = ws.resolve(input.get("path", "."))
    if not base.exists():
        raise ToolRefusal(f"path not found: {ws.display(base)}")
    glob: str | None = input.get("glob")
    out: list[str] = []
    more = 0
    for path in _files(ws, base):
        trio.from_thread.check_cancelled()
        rel = ws.display(path)
        if not _selected(rel, glob):
            continue
        try:
            with path.open("rb") as raw:
                if is_binary(raw.read(SNIFF_BYTES)):
                    continue
                raw.seek(0)
                with io.TextIOWrapper(raw, "utf-8", "replace") as lines:
                    for number, line in enumerate(lines, 1):
                        if regex.search(line) is None:
                            continue
                        if len(out) >= max_results:
                            more += 1
                            continue
                        text = line.rstrip("\r\n")
                        if len(text) > MAX_LINE_CHARS:
                            text = text[:MAX_LINE_CHARS] + " [...]"
                        out.append(f"{rel}:{number}:{text}")
        except OSError:
            continue  # unreadable or vanished meanwhile
    if not out:
        return f"No matches for {input['pattern']!r}"
    if more:
        out.append(f"[truncated: {more} more matching lines; narrow the pattern, path or glob]")
    return "\n".join(out)


def Grep(ws: Workspace, *, max_results: int = 200) -> Tool:
    """The Grep tool: ``{pattern, path?, glob?, case_insensitive?}`` →
    ``file:line:text`` lines.

    The files are walked with ``os.scandir`` in a worker thread (the event loop is
    never blocked, and the walk stops at the next file when the tool is cancelled);
    binary files and ``.git`` directories are skipped; at most *max_results* lines.
    An invalid regular expression is an error result. Concurrency-safe.
    """

    async def run(input: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        return await run_guarded(ws, functools.partial(_grep, ws, input, max_results))

    return Tool(
        "Grep",
        "Search the contents of files in the workspace with a Python regular expression. "
        "Returns matching lines as path:line:text.",
        _SCHEMA,
        run,
        concurrency_safe=True,
    )
