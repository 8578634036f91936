"""The Edit tool: replace an exact string in a file, with Claude Code's checks.

The file is resolved once, beneath the root; its content is read from the opened
descriptor, checked against what Read showed (:func:`._files.check_fresh`), and the
new content is renamed over the same name in the same verified directory.
"""

from __future__ import annotations

import functools
import os
import stat
from collections.abc import Mapping
from typing import Any

from .._tools import Tool, ToolContext, ToolOutput
from ._beneath import open_entry, open_regular, resolve_beneath
from ._files import (
    FILE_MISSING,
    SNIFF_BYTES,
    ToolRefusal,
    check_fresh,
    is_binary,
    read_all,
    replace_in,
    run_guarded,
)
from ._workspace import Workspace

__all__ = ["Edit"]

#: Claude Code's refusal of an edit that changes nothing.
NO_CHANGE = "No changes to make: old_string and new_string are exactly the same."
#: Claude Code's refusal of ``old_string=""`` (create) on a file that has content.
ALREADY_EXISTS = "Cannot create new file - file already exists."

_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "file_path": {
            "type": "string",
            "description": "The absolute path to the file to modify "
            "(or a path relative to the workspace root)",
        },
        "old_string": {"type": "string", "description": "The text to replace"},
        "new_string": {
            "type": "string",
            "description": "The text to replace it with (must be different from old_string)",
        },
        "replace_all": {
            "type": "boolean",
            "default": False,
            "description": "Replace all occurrences of old_string (default false)",
        },
    },
    "required": ["file_path", "old_string", "new_string"],
    "additionalProperties": False,
}


def not_found(old: str) -> str:
    """Claude Code's refusal when *old* does not occur in the file."""
    return f"String to replace not found in file.\nString: {old}"


def not_unique(count: int, old: str) -> str:
    """Claude Code's refusal when *old* occurs *count* > 1 times without replace_all."""
    return (
        f"Found {count} matches of the string to replace, but replace_all is false. To "
        "replace all occurrences, set replace_all to true. To replace only one occurrence, "
        f"please provide more context to uniquely identify the instance.\nString: {old}"
    )


def _decode(data: bytes, shown: str) -> str:
    if is_binary(data[:SNIFF_BYTES]):
        raise ToolRefusal(f"{shown} is a binary file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolRefusal(f"{shown} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def _edit(ws: Workspace, input: Mapping[str, Any]) -> str:
    path: str = input["file_path"]
    old: str = input["old_string"]
    new: str = input["new_string"]
    replace_all: bool = input.get("replace_all", False)
    if old == new:
        raise ToolRefusal(NO_CHANGE)
    try:
        _edit_beneath(ws, path, old, new, replace_all)
    except (FileNotFoundError, NotADirectoryError):
        raise ToolRefusal(FILE_MISSING) from None
    if replace_all:
        return f"The file {path} has been updated. All occurrences were successfully replaced."
    return f"The file {path} has been updated successfully."


def _edit_beneath(ws: Workspace, path: str, old: str, new: str, replace_all: bool) -> None:
    with resolve_beneath(ws, path, create_dirs=not old) as where:
        shown = where.shown
        if where.name is None or (where.st is not None and stat.S_ISDIR(where.st.st_mode)):
            raise ToolRefusal(f"{shown} is a directory")
        name = where.name

        def unchanged(*, size: int | None = None) -> None:
            """Right before the rename: the file is still what was checked."""
            try:
                fd = open_entry(where.dir_fd, name, shown)
            except FileNotFoundError:
                if where.st is None:
                    return  # still a new file
                raise
            try:
                if size is not None:  # an empty or blank file, filled without a Read
                    if os.fstat(fd).st_size != size:
                        raise ToolRefusal(ALREADY_EXISTS)
                else:
                    check_fresh(ws, shown, fd)
            finally:
                os.close(fd)

        if where.st is None:
            if old:
                raise ToolRefusal(FILE_MISSING)
            # old_string="" creates the file, as in Claude Code.
            replace_in(ws, where, new.encode("utf-8"), functools.partial(unchanged, size=0))
            return
        fd = open_regular(where)
        try:
            data = read_all(fd)
            text = _decode(data, shown)
            if old:
                check_fresh(ws, shown, fd, data)
            elif text.strip():
                raise ToolRefusal(ALREADY_EXISTS)
        finally:
            os.close(fd)
        if not old:
            # An empty (or blank) file is filled without a Read, as Claude Code does.
            replace_in(ws, where, new.encode("utf-8"), functools.partial(unchanged, size=len(data)))
            return
        # A CRLF file is matched with "\n" line ends (what Read showed) and written
        # back with CRLF, as Claude Code does.
        crlf = text.count("\r\n") * 2 > text.count("\n")
        if crlf:
            text = text.replace("\r\n", "\n")
        count = text.count(old)
        if count == 0:
            raise ToolRefusal(not_found(old))
        if count > 1 and not replace_all:
            raise ToolRefusal(not_unique(count, old))
        updated = text.replace(old, new) if replace_all else text.replace(old, new, 1)
        if crlf:
            updated = updated.replace("\n", "\r\n")
        replace_in(ws, where, updated.encode("utf-8"), unchanged)


def Edit(ws: Workspace) -> Tool:
    """The Edit tool: ``{file_path, old_string, new_string, replace_all?}``.

    *old_string* must occur exactly once unless *replace_all* is true; the file must
    have been Read through *ws* and be unchanged since; it is rewritten atomically.
    ``old_string=""`` creates a missing file (or fills an empty one). The refusals
    are Claude Code's. Not concurrency-safe.
    """

    async def run(input: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        return await run_guarded(ws, functools.partial(_edit, ws, input))

    return Tool(
        "Edit",
        "Performs exact string replacements in files.\n\n"
        "Usage:\n"
        "- You must use your `Read` tool at least once in the conversation before editing. "
        "This tool will error if you attempt an edit without reading the file.\n"
        "- When editing text from Read tool output, ensure you preserve the exact "
        "indentation (tabs/spaces) as it appears AFTER the line number prefix. The line "
        "number prefix format is: line number + tab. Everything after that tab is the "
        "actual file content to match. Never include any part of the line number prefix in "
        "the old_string or new_string.\n"
        "- The edit will FAIL if `old_string` is not unique in the file. Either provide a "
        "larger string with more surrounding context to make it unique or use `replace_all` "
        "to change every instance of `old_string`.\n"
        "- Use `replace_all` for replacing and renaming strings across the file.",
        _SCHEMA,
        run,
    )
