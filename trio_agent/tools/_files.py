"""What the file tools share: refusals as error results, binary detection, race-free
opens and atomic writes (beneath the root, see :mod:`._beneath`).

The tools' work is synchronous (a sync core run in a worker thread); a refusal is
raised there as :class:`ToolRefusal` and turned into an error result by
:func:`run_guarded`, the async shell.
"""

from __future__ import annotations

import contextlib
import io
import os
import pathlib
import secrets
import stat
from collections.abc import Callable, Generator, Iterator

import trio

from .._exceptions import WorkspaceError
from .._tools import ToolOutput
from ._beneath import open_regular, resolve_beneath
from ._workspace import Workspace

__all__ = [
    "SNIFF_BYTES",
    "ToolRefusal",
    "atomic_write",
    "bounded_lines",
    "describe_os_error",
    "is_binary",
    "open_text",
    "read_text_file",
    "run_guarded",
]

_SKIP_CHUNK = 65536

#: How many leading bytes decide whether a file is binary (as git and grep do).
SNIFF_BYTES = 8192


class ToolRefusal(Exception):
    """A file tool refuses: its message is shown to the model as an error result."""


def bounded_lines(text: io.TextIOBase, limit: int) -> Iterator[tuple[str, int]]:
    """The lines of *text* without their newline, each cut to *limit* characters,
    with how many characters were cut: memory stays O(limit) even for a file that
    is one huge line."""
    while line := text.readline(limit):
        cut = 0
        if not line.endswith("\n"):
            while more := text.readline(_SKIP_CHUNK):
                if more.endswith("\n"):
                    cut += len(more) - 1
                    break
                cut += len(more)
        yield line.removesuffix("\n"), cut


def is_binary(head: bytes) -> bool:
    """Whether a file whose first bytes are *head* is binary (it holds a NUL byte)."""
    return b"\0" in head


def describe_os_error(exc: OSError, ws: Workspace) -> str:
    reason = exc.strerror or str(exc) or type(exc).__name__
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
        return ToolOutput(describe_os_error(exc, ws), is_error=True)


@contextlib.contextmanager
def open_text(
    ws: Workspace, path: str, *, what: str = ""
) -> Generator[tuple[io.BufferedReader, str]]:
    """The regular file *path*, opened for reading race-free beneath the root, and
    its path for messages.

    Raises:
        ToolRefusal: the file is missing, a directory or not a regular file (a FIFO,
            a device, a socket: refused before any open that could block).
    """
    with resolve_beneath(ws, path) as where:
        if where.st is None:
            raise ToolRefusal(f"file not found: {where.shown}")
        if stat.S_ISDIR(where.st.st_mode):
            raise ToolRefusal(f"{where.shown} is a directory{what}")
        try:
            fd = open_regular(where)
        except WorkspaceError as exc:
            raise ToolRefusal(str(exc)) from None
        with os.fdopen(fd, "rb") as file:
            yield file, where.shown


def read_text_file(ws: Workspace, path: str) -> tuple[str, str]:
    """The whole text of a UTF-8 file inside the workspace, for editing, and its
    path for messages.

    Raises:
        ToolRefusal: the file is missing, a directory, not a regular file, binary or
            not UTF-8.
    """
    with open_text(ws, path) as (file, shown):
        data = file.read()
    if is_binary(data[:SNIFF_BYTES]):
        raise ToolRefusal(f"{shown} is a binary file")
    try:
        return data.decode("utf-8"), shown
    except UnicodeDecodeError as exc:
        raise ToolRefusal(f"{shown} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def atomic_write(ws: Workspace, path: str, data: bytes) -> tuple[bool, str]:
    """Write *data* to *path* atomically: a temporary file created in the verified
    directory's descriptor, then renamed over the name in that same descriptor.
    Missing parent directories are created (each one walked like any other, so a
    symlink planted meanwhile cannot lead out). Returns whether the file existed
    before, and its path for messages.

    Raises:
        ToolRefusal: *path* is a directory or not a regular file.
    """
    with resolve_beneath(ws, path, create_dirs=True) as where:
        shown = where.shown
        if where.name is None or (where.st is not None and stat.S_ISDIR(where.st.st_mode)):
            raise ToolRefusal(f"{shown} is a directory")
        if where.st is not None and not stat.S_ISREG(where.st.st_mode):
            raise ToolRefusal(f"{shown} is not a regular file")
        existed = where.st is not None
        # O_EXCL with 0o666: the umask applies as for any new file, and nothing is
        # followed; an existing file keeps its permission bits.
        mode = where.st.st_mode & 0o7777 if where.st is not None else 0o666
        tmp = f".{where.name}.{secrets.token_hex(6)}.tmp"
        fd = os.open(
            tmp,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            mode,
            dir_fd=where.dir_fd,
        )
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(data)
                file.flush()
                if existed:
                    os.fchmod(file.fileno(), mode)
                os.fsync(file.fileno())
            os.replace(tmp, where.name, src_dir_fd=where.dir_fd, dst_dir_fd=where.dir_fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=where.dir_fd)
            raise
        return existed, shown
