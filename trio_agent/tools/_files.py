"""What the file tools share: refusals as error results, binary detection, atomic writes.

The tools' work is synchronous (a sync core run in a worker thread); a refusal is
raised there as :class:`ToolRefusal` and turned into an error result by
:func:`run_guarded`, the async shell.
"""

from __future__ import annotations

import contextlib
import errno
import os
import pathlib
import secrets
from collections.abc import Callable

import trio

from .._exceptions import WorkspaceError
from .._tools import ToolOutput
from ._workspace import Workspace

__all__ = [
    "SNIFF_BYTES",
    "ToolRefusal",
    "atomic_write",
    "is_binary",
    "read_text_file",
    "run_guarded",
]

#: How many leading bytes decide whether a file is binary (as git and grep do).
SNIFF_BYTES = 8192


class ToolRefusal(Exception):
    """A file tool refuses: its message is shown to the model as an error result."""


def is_binary(head: bytes) -> bool:
    """Whether a file whose first bytes are *head* is binary (it holds a NUL byte)."""
    return b"\0" in head


def _describe_os_error(exc: OSError, ws: Workspace) -> str:
    reason = exc.strerror or errno.errorcode.get(exc.errno or 0, type(exc).__name__)
    if exc.filename is not None:
        return f"{reason}: {ws.display(pathlib.Path(os.fsdecode(exc.filename)))}"
    return reason


async def run_guarded(ws: Workspace, work: Callable[[], str]) -> ToolOutput:
    """Run the sync *work* in a worker thread; refusals become error results.

    The thread is not abandoned on cancellation: a write in progress completes (it is
    atomic anyway), and no thread outlives the tool.
    """
    try:
        return ToolOutput(await trio.to_thread.run_sync(work))
    except (ToolRefusal, WorkspaceError) as exc:
        return ToolOutput(str(exc), is_error=True)
    except OSError as exc:
        return ToolOutput(_describe_os_error(exc, ws), is_error=True)


def read_text_file(ws: Workspace, path: pathlib.Path) -> str:
    """The whole text of a UTF-8 file inside the workspace, for editing.

    Raises:
        ToolRefusal: the file is missing, a directory, binary or not UTF-8.
    """
    shown = ws.display(path)
    if not path.exists():
        raise ToolRefusal(f"file not found: {shown}")
    if path.is_dir():
        raise ToolRefusal(f"{shown} is a directory")
    if not path.is_file():
        raise ToolRefusal(f"{shown} is not a regular file")
    data = path.read_bytes()
    if is_binary(data[:SNIFF_BYTES]):
        raise ToolRefusal(f"{shown} is a binary file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolRefusal(f"{shown} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def atomic_write(ws: Workspace, path: pathlib.Path, data: bytes) -> bool:
    """Write *data* to *path* atomically (temp file in the same directory, then
    ``os.replace``); create missing parent directories. Returns whether the file
    existed before.

    *path* must come from :meth:`Workspace.resolve`. The parent is checked again after
    the directories are made, so a symlink planted meanwhile cannot lead out.

    Raises:
        ToolRefusal: *path* is a directory, or its parent left the workspace.
    """
    shown = ws.display(path)
    if path.is_dir():
        raise ToolRefusal(f"{shown} is a directory")
    parent = path.parent
    parent.mkdir(parents=True, exist_ok=True)
    if not ws.contains(parent):
        raise ToolRefusal(f"{shown}: parent directory is outside the workspace")
    existed = path.exists()
    # O_EXCL with 0o666: the umask applies as for any new file, and nothing is
    # followed; an existing file keeps its permission bits.
    mode = path.stat().st_mode & 0o7777 if existed else 0o666
    tmp = parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        if existed:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return existed
