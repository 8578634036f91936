"""The workspace: the one directory the built-in file tools may touch.

Every path a model gives a file tool goes through :meth:`Workspace.resolve`, which
resolves symlinks first and checks containment after, so neither ``..``, nor an
absolute path elsewhere, nor a symlink (to a file or a directory) can lead out.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import threading
from typing import final

import attrs

from .._exceptions import WorkspaceError

__all__ = ["ReadLog", "Seen", "Workspace"]


def _real_root(root: str | os.PathLike[str]) -> pathlib.Path:
    path = pathlib.Path(os.path.realpath(os.fspath(root)))
    if not path.is_dir():
        raise WorkspaceError(f"workspace root {os.fspath(root)!r} is not a directory")
    return path


@final
@attrs.frozen
class Seen:
    """What Read saw of a file: its identity and modification stamp, and the
    SHA-256 of its bytes when Read went through all of them (None otherwise)."""

    dev: int
    ino: int
    mtime_ns: int
    size: int
    digest: bytes | None

    @classmethod
    def of(cls, st: os.stat_result, data: bytes | None) -> Seen:
        """The stamp of *st*, with the digest of *data* (the whole file) if given."""
        digest = hashlib.sha256(data).digest() if data is not None else None
        return cls(st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size, digest)

    def same_stamp(self, st: os.stat_result) -> bool:
        """Whether *st* is the file as it was seen (same inode, mtime and size)."""
        return (self.dev, self.ino, self.mtime_ns, self.size) == (
            st.st_dev,
            st.st_ino,
            st.st_mtime_ns,
            st.st_size,
        )


@final
class ReadLog:
    """The files Read has shown in this workspace (by their resolved path relative
    to the root), for the read-before-write check of Write and Edit. Thread-safe:
    the tools record and look up from worker threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[str, Seen] = {}

    def record(self, shown: str, seen: Seen) -> None:
        """*shown* was read (or written) as *seen*."""
        with self._lock:
            self._seen[shown] = seen

    def get(self, shown: str) -> Seen | None:
        """What was last seen of *shown*, or None if it was never read."""
        with self._lock:
            return self._seen.get(shown)

    def forget(self) -> None:
        """Forget every read: each existing file must be read again before a write."""
        with self._lock:
            self._seen.clear()


@final
@attrs.frozen
class Workspace:
    """A directory the file tools are confined to.

    It also remembers which files Read showed (:attr:`reads`): Write and Edit of an
    existing file require that it was read through this workspace and has not
    changed since, as Claude Code's tools do. Use one Workspace per conversation
    (or call ``ws.reads.forget()`` when a new one starts).

    Args:
        root: an existing directory; symlinks in it are resolved once, here.

    Example::

        ws = Workspace(tmp_path)
        ws.resolve("src/main.py")    # tmp_path/src/main.py
        ws.resolve("../etc/passwd")  # raises WorkspaceError
    """

    root: pathlib.Path = attrs.field(converter=_real_root)
    #: The files Read showed, for the read-before-write check (not compared).
    reads: ReadLog = attrs.field(factory=ReadLog, init=False, eq=False, repr=False)

    def resolve(self, path: str) -> pathlib.Path:
        """The real path of *path* (relative to the root, or absolute inside it).

        Symlinks are resolved before the containment check; the path need not exist.

        Raises:
            WorkspaceError: *path* is empty, holds a NUL byte or a ``..`` component,
                or resolves outside the root.
        """
        if not path:
            raise WorkspaceError("empty path")
        if "\0" in path:
            raise WorkspaceError("path contains a NUL byte")
        parts = pathlib.PurePosixPath(path).parts
        if ".." in parts:
            raise WorkspaceError(f"path {path!r} contains '..'")
        real = pathlib.Path(os.path.realpath(self.root / path))
        if real != self.root and not real.is_relative_to(self.root):
            raise WorkspaceError(f"path {path!r} is outside the workspace")
        return real

    def contains(self, path: str | os.PathLike[str]) -> bool:
        """Whether the real path of *path* (absolute) lies inside the root."""
        real = pathlib.Path(os.path.realpath(os.fspath(path)))
        return real == self.root or real.is_relative_to(self.root)

    def display(self, path: pathlib.Path) -> str:
        """*path* relative to the root, for messages (``.`` for the root itself)."""
        try:
            return path.relative_to(self.root).as_posix() or "."
        except ValueError:
            return str(path)
