"""The workspace: the one directory the built-in file tools may touch.

Every path a model gives a file tool goes through :meth:`Workspace.resolve`, which
resolves symlinks first and checks containment after, so neither ``..``, nor an
absolute path elsewhere, nor a symlink (to a file or a directory) can lead out.
"""

from __future__ import annotations

import os
import pathlib
from typing import final

import attrs

from .._exceptions import WorkspaceError

__all__ = ["Workspace"]


def _real_root(root: str | os.PathLike[str]) -> pathlib.Path:
    path = pathlib.Path(os.path.realpath(os.fspath(root)))
    if not path.is_dir():
        raise WorkspaceError(f"workspace root {os.fspath(root)!r} is not a directory")
    return path


@final
@attrs.frozen
class Workspace:
    """A directory the file tools are confined to.

    Args:
        root: an existing directory; symlinks in it are resolved once, here.

    Example::

        ws = Workspace(tmp_path)
        ws.resolve("src/main.py")    # tmp_path/src/main.py
        ws.resolve("../etc/passwd")  # raises WorkspaceError
    """

    root: pathlib.Path = attrs.field(converter=_real_root)

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
