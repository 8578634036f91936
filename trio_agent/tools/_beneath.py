"""Race-free path resolution beneath the workspace root.

Each path is walked one component at a time from a file descriptor of the root:
``os.stat(name, dir_fd=..., follow_symlinks=False)`` then
``os.open(name, O_DIRECTORY | O_NOFOLLOW, dir_fd=...)``. The kernel is never given
more than one name to follow, and never follows a symlink: a symlink met on the
way is read (``readlink`` with ``dir_fd``) and its target walked the same way, from
the root for an absolute target, with ``..`` popping a descriptor, never above
the root. Swapping a directory for a symlink between two steps (or between check
and use) therefore cannot lead out: the next step opens the new entry with
``O_NOFOLLOW`` and either resolves it beneath the root or fails.

What the caller gets is the descriptor of the verified directory and a single
name in it; files are opened with ``O_NOFOLLOW | O_NONBLOCK`` (a FIFO swapped in
cannot block) and checked again with ``fstat``; Write's temporary file is created in
that directory descriptor and renamed there.

POSIX only (``dir_fd`` support); the same code runs on Linux, macOS and the BSDs.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Generator
from typing import final

import attrs

from .._exceptions import WorkspaceError
from ._workspace import Workspace

__all__ = ["Resolved", "open_entry", "open_regular", "open_subdir", "resolve_beneath", "scan_dir"]

#: Symlinks followed in one path before giving up (Linux's limit).
MAX_LINKS = 40

# getattr: the module still imports where a flag is missing (Windows), where the
# file tools are not supported.
_DIR_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_DIRECTORY", 0)
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
)
_FILE_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_NOCTTY", 0)
)


@final
@attrs.define(eq=False)
class Resolved:
    """Where a path ended: the verified directory's descriptor and one name in it.

    ``name`` is None when the path is the root itself (or a directory reached
    through ``.``); ``st`` is the entry's ``lstat`` (None: it does not exist).
    """

    dir_fd: int
    name: str | None
    st: os.stat_result | None
    #: The path relative to the root, for messages ("." for the root).
    shown: str


def _outside(path: str) -> WorkspaceError:
    return WorkspaceError(f"path {path!r} is outside the workspace")


def _parts(ws: Workspace, path: str, original: str) -> list[str]:
    """The components of *path* relative to the root (an absolute path must begin
    with the root's components).

    A ``..`` is kept, never folded lexically: the walk pops the directory it is
    in, as the kernel does, so ``/root/link/../x`` (``link`` a symlink to ``a/b``)
    is ``a/x``, what ``open()`` and ``os.path.realpath`` (the permission rules)
    say too, not ``x``.
    """
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if os.path.isabs(path):
        root = [p for p in str(ws.root).split("/") if p]
        if parts[: len(root)] != root:
            raise _outside(original)
        del parts[: len(root)]
    return parts


def check_path(path: str) -> None:
    """The model-facing rules for a path: not empty, no NUL byte, no ``..``."""
    if not path:
        raise WorkspaceError("empty path")
    if "\0" in path:
        raise WorkspaceError("path contains a NUL byte")
    if ".." in path.split("/"):
        raise WorkspaceError(f"path {path!r} contains '..'")


@contextlib.contextmanager
def resolve_beneath(ws: Workspace, path: str, *, create_dirs: bool = False) -> Generator[Resolved]:
    """Resolve *path* beneath the root, race-free; the descriptors close on exit.

    Symlinks are followed (the last one too) as long as they stay inside. With
    *create_dirs*, missing directories before the last component are created.

    Raises:
        WorkspaceError: a bad path, or one that leads outside the workspace.
        OSError: e.g. a missing directory, or a component that is a regular file.
    """
    check_path(path)
    stack: list[int] = [os.open(ws.root, _DIR_FLAGS)]
    names: list[str] = []
    try:
        todo = _parts(ws, path, path)
        links = 0
        while todo:
            comp = todo.pop(0)
            if comp == ".":
                continue
            if comp == "..":  # only ever from a symlink's target
                if len(stack) == 1:
                    raise _outside(path)
                os.close(stack.pop())
                names.pop()
                continue
            last = not todo
            try:
                st = os.stat(comp, dir_fd=stack[-1], follow_symlinks=False)
            except FileNotFoundError:
                if last:
                    yield Resolved(stack[-1], comp, None, "/".join([*names, comp]))
                    return
                if not create_dirs:
                    raise FileNotFoundError(
                        errno.ENOENT, "No such file or directory", "/".join([*names, comp])
                    ) from None
                with contextlib.suppress(FileExistsError):
                    os.mkdir(comp, dir_fd=stack[-1])
                todo.insert(0, comp)  # walk it like any other (it may be raced)
                continue
            if stat.S_ISLNK(st.st_mode):
                links += 1
                if links > MAX_LINKS:
                    raise WorkspaceError(f"too many symlinks in {path!r}")
                try:
                    target = os.readlink(comp, dir_fd=stack[-1])
                except OSError as exc:
                    if exc.errno not in (errno.EINVAL, errno.ENOENT):
                        raise
                    if links > MAX_LINKS:
                        raise WorkspaceError(f"{path!r} keeps changing") from None
                    todo.insert(0, comp)  # not a symlink any more: look again
                    continue
                if os.path.isabs(target):
                    while len(stack) > 1:
                        os.close(stack.pop())
                    names.clear()
                    todo = _parts(ws, target, path) + todo
                else:
                    todo = [p for p in target.split("/") if p not in ("", ".")] + todo
                continue
            if last and not stat.S_ISDIR(st.st_mode):
                yield Resolved(stack[-1], comp, st, "/".join([*names, comp]))
                return
            if not stat.S_ISDIR(st.st_mode):
                raise NotADirectoryError(errno.ENOTDIR, "Not a directory", "/".join([*names, comp]))
            try:
                fd = os.open(comp, _DIR_FLAGS, dir_fd=stack[-1])
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT):
                    # Swapped since the stat: look again (counts as a link step).
                    links += 1
                    if links > MAX_LINKS:
                        raise WorkspaceError(f"{path!r} keeps changing") from None
                    todo.insert(0, comp)
                    continue
                raise
            stack.append(fd)
            names.append(comp)
        # A directory (or the root): its own descriptor, no name.
        yield Resolved(stack[-1], None, os.fstat(stack[-1]), "/".join(names) or ".")
    finally:
        for fd in stack:
            os.close(fd)


def open_regular(resolved: Resolved) -> int:
    """Open the regular file *resolved* names for reading: a descriptor.

    Raises:
        WorkspaceError: it is not a regular file (checked before the open from the
            ``lstat``, and after it with ``fstat``: nothing can block or be swapped).
        FileNotFoundError: it does not exist.
    """
    if resolved.name is None or resolved.st is None:
        raise FileNotFoundError(2, "No such file", resolved.shown)
    if not stat.S_ISREG(resolved.st.st_mode):
        raise WorkspaceError(f"{resolved.shown} is not a regular file")
    return open_entry(resolved.dir_fd, resolved.name, resolved.shown)


def open_entry(dir_fd: int, name: str, shown: str) -> int:
    """Open the regular file *name* of the directory *dir_fd* for reading, without
    following a symlink or blocking on a FIFO swapped in; checked with ``fstat``.

    Raises:
        WorkspaceError: it is not a regular file (any more).
    """
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise WorkspaceError(f"{shown} was replaced by a symlink meanwhile") from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise WorkspaceError(f"{shown} is not a regular file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextlib.contextmanager
def open_subdir(dir_fd: int, name: str) -> Generator[int | None]:
    """A descriptor of the subdirectory *name* (not a symlink), or None."""
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError:
        yield None
        return
    try:
        yield fd
    finally:
        os.close(fd)


def scan_dir(dir_fd: int) -> list[os.DirEntry[str]]:
    """The entries of a directory descriptor, by name (an unreadable one: none)."""
    try:
        with os.scandir(dir_fd) as it:  # scandir duplicates the descriptor
            return sorted(it, key=lambda e: e.name)
    except OSError:
        return []
