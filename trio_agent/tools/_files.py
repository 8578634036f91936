"""What the file tools share: refusals as error results, binary detection, race-free
opens and atomic writes (beneath the root, see :mod:`._beneath`), and the
read-before-write check.

The tools' work is synchronous (a sync core run in a worker thread); a refusal is
raised there as :class:`ToolRefusal` and turned into an error result by
:func:`run_guarded`, the async shell. As in Claude Code, a refusal reads
``<tool_use_error>...</tool_use_error>`` (:func:`tool_error`).
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
from ._beneath import Resolved, open_entry, open_regular, resolve_beneath
from ._workspace import Seen, Workspace

__all__ = [
    "FILE_MISSING",
    "MODIFIED_SINCE_READ",
    "NOT_READ_YET",
    "SNIFF_BYTES",
    "ToolRefusal",
    "atomic_write",
    "bounded_lines",
    "check_fresh",
    "cwd_note",
    "describe_os_error",
    "is_binary",
    "open_text",
    "read_all",
    "replace_in",
    "run_guarded",
    "tool_error",
]

#: Claude Code's words for a file that does not exist.
FILE_MISSING = "File does not exist."
#: Claude Code's refusal of a write to an existing file Read never showed.
NOT_READ_YET = "File has not been read yet. Read it first before writing to it."
#: Claude Code's refusal of a write to a file that changed after Read showed it.
MODIFIED_SINCE_READ = (
    "File has been modified since read, either by the user or by a linter. "
    "Read it again before attempting to write it."
)

_SKIP_CHUNK = 65536

#: How many leading bytes decide whether a file is binary (as git and grep do).
SNIFF_BYTES = 8192


class ToolRefusal(Exception):
    """A file tool refuses: its message is shown to the model as an error result."""


def bounded_lines(text: io.TextIOBase, limit: int) -> Iterator[tuple[str, int]]:
    """The lines of *text* without their newline, each cut to *limit* characters,
    with how many characters were cut (a "\r" ending the line is not one of them):
    memory stays O(limit) even for a file that is one huge line."""
    while line := text.readline(limit):
        cut = 0
        if not line.endswith("\n"):
            # The "\r" that ends a cut line (before its "\n", or the file's end) is
            # not counted as cut; cr: the cut part so far ends with "\r".
            cr = dropped = False
            while more := text.readline(_SKIP_CHUNK):
                if more.endswith("\n"):
                    cut += len(more) - 1
                    if more.endswith("\r\n") or (more == "\n" and cr):
                        cut -= 1
                        dropped = True
                    cr = False
                    break
                cut += len(more)
                cr = more.endswith("\r")
            if cr:
                cut -= 1
                dropped = True
            if dropped and not cut:
                # Only the line's ending "\r" was past the limit: the line is whole,
                # and its "\r" is the caller's to drop (not the line's own last one).
                line += "\r"
        yield line.removesuffix("\n"), cut


def is_binary(head: bytes) -> bool:
    """Whether a file whose first bytes are *head* is binary (it holds a NUL byte)."""
    return b"\0" in head


def describe_os_error(exc: OSError, ws: Workspace) -> str:
    reason = exc.strerror or str(exc) or type(exc).__name__
    if exc.filename is not None:
        return f"{reason}: {ws.display(pathlib.Path(os.fsdecode(exc.filename)))}"
    return reason


def cwd_note(ws: Workspace) -> str:
    """The note Claude Code adds to a missing path (Bash runs in the root)."""
    return f"Note: your current working directory is {ws.root}."


def tool_error(message: str) -> ToolOutput:
    """An error result as Claude Code words a refused call:
    ``<tool_use_error>message</tool_use_error>``."""
    return ToolOutput(f"<tool_use_error>{message}</tool_use_error>", is_error=True)


async def run_guarded(ws: Workspace, work: Callable[[], str]) -> ToolOutput:
    """Run the sync *work* in a worker thread; refusals become error results.

    The thread is not abandoned on cancellation: a write in progress completes (it is
    atomic anyway), and no thread outlives the tool.
    """
    try:
        return ToolOutput(await trio.to_thread.run_sync(work))
    except (ToolRefusal, WorkspaceError) as exc:
        return tool_error(str(exc))
    except OSError as exc:
        return tool_error(describe_os_error(exc, ws))


def read_all(fd: int) -> bytes:
    """Every byte of the open file *fd*, from its start (``pread``: the offset stays)."""
    chunks: list[bytes] = []
    at = 0
    while chunk := os.pread(fd, 1 << 20, at):
        chunks.append(chunk)
        at += len(chunk)
    return b"".join(chunks)


def check_fresh(ws: Workspace, shown: str, fd: int, data: bytes | None = None) -> None:
    """Refuse to overwrite the existing file *fd* (at *shown*) unless Read showed it
    and it has not changed since: same inode, mtime and size, or (when Read saw every
    byte) the same content. *data* is its content if the caller already read it.

    Raises:
        ToolRefusal: Claude Code's "not read yet" or "modified since read".
    """
    seen = ws.reads.get(shown)
    if seen is None:
        raise ToolRefusal(NOT_READ_YET)
    st = os.fstat(fd)
    if seen.same_stamp(st):
        return
    if seen.digest is not None:
        if data is None:
            data = read_all(fd)
        if Seen.of(st, data).digest == seen.digest:
            ws.reads.record(shown, Seen.of(st, data))  # touched, not changed
            return
    raise ToolRefusal(MODIFIED_SINCE_READ)


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
            raise ToolRefusal(FILE_MISSING)
        if stat.S_ISDIR(where.st.st_mode):
            raise ToolRefusal(f"{where.shown} is a directory{what}")
        try:
            fd = open_regular(where)
        except WorkspaceError as exc:
            raise ToolRefusal(str(exc)) from None
        with os.fdopen(fd, "rb") as file:
            yield file, where.shown


def replace_in(
    ws: Workspace, where: Resolved, data: bytes, before: Callable[[], None] | None = None
) -> None:
    """Replace the file *where* names by *data*, atomically: a temporary file created
    in the verified directory's descriptor, then renamed over the name in that same
    descriptor. *before* (the freshness check) runs last, just before the rename.
    The new file is recorded as seen (the model knows what it wrote)."""
    assert where.name is not None
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
            written = os.fstat(file.fileno())
        if before is not None:
            before()
        os.replace(tmp, where.name, src_dir_fd=where.dir_fd, dst_dir_fd=where.dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=where.dir_fd)
        raise
    ws.reads.record(where.shown, Seen.of(written, data))


def atomic_write(ws: Workspace, path: str, data: bytes) -> tuple[bool, str]:
    """Write *data* to *path* atomically (:func:`replace_in`). Missing parent
    directories are created (each one walked like any other, so a symlink planted
    meanwhile cannot lead out). An existing file must have been read and be
    unchanged since (:func:`check_fresh`). Returns whether the file existed before,
    and its path for messages.

    Raises:
        ToolRefusal: *path* is a directory or not a regular file, or an existing
            file was not read or changed since.
    """
    with resolve_beneath(ws, path, create_dirs=True) as where:
        shown = where.shown
        if where.name is None or (where.st is not None and stat.S_ISDIR(where.st.st_mode)):
            raise ToolRefusal(f"{shown} is a directory")
        if where.st is not None and not stat.S_ISREG(where.st.st_mode):
            raise ToolRefusal(f"{shown} is not a regular file")
        name = where.name

        def fresh() -> None:
            try:
                fd = open_entry(where.dir_fd, name, shown)
            except FileNotFoundError:
                return  # removed meanwhile: nothing is clobbered
            try:
                check_fresh(ws, shown, fd)
            finally:
                os.close(fd)

        if where.st is not None:
            fresh()  # refuse before any work, and again right before the rename
        # Checked before the rename also for a new file: one that appeared meanwhile
        # was never read, and is not clobbered.
        replace_in(ws, where, data, fresh)
        return where.st is not None, shown
