"""Walking a directory tree beneath the workspace root, race-free and cancellable.

Glob and Grep share it. Directories are opened one level at a time with
``O_DIRECTORY | O_NOFOLLOW`` relative to their parent's descriptor and listed with
``os.scandir(fd)``: a directory swapped for a symlink mid-walk is simply not entered.
Symlinked directories are never entered; a symlinked file is resolved beneath the
root (:func:`resolve_beneath`) and kept only if it leads to a regular file inside.
The walk checks for cancellation (``trio.from_thread.check_cancelled``) in every
directory it visits, so even ``**/**/**/x`` over a deep tree stops at once.
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
from collections.abc import Iterator
from typing import final

import attrs
import trio

from .._exceptions import WorkspaceError
from ._beneath import open_subdir, resolve_beneath, scan_dir
from ._workspace import Workspace

__all__ = ["Found", "GlobMatcher", "walk_files"]

#: Directories deeper than this below the base are not walked.
MAX_DEPTH = 128


@final
@attrs.frozen
class Found:
    """A regular file found by the walk; *dir_fd* is open only until the walk
    moves on. *rel* is where the walk found it, *real* where it is (a symlink's
    file, resolved beneath the root; else *rel*): an exclusion looks at both."""

    rel: str
    dir_fd: int
    name: str
    st: os.stat_result
    real: str


@final
class GlobMatcher:
    """A glob pattern matched one path component at a time (``**`` is any number of
    directories, ``*`` and ``?`` never cross ``/``), as a set of positions."""

    def __init__(self, pattern: str) -> None:
        parts = [p for p in pattern.split("/") if p not in ("", ".")]
        self._parts = parts
        self._regex = [
            None if p == "**" else re.compile(fnmatch.translate(p), re.DOTALL) for p in parts
        ]

    def start(self) -> frozenset[int]:
        """The positions before the first component."""
        return self._closure({0})

    def _closure(self, states: set[int]) -> frozenset[int]:
        todo = list(states)
        while todo:
            i = todo.pop()
            if i < len(self._parts) and self._parts[i] == "**" and i + 1 not in states:
                states.add(i + 1)
                todo.append(i + 1)
        return frozenset(states)

    def step(self, states: frozenset[int], name: str) -> tuple[frozenset[int], bool]:
        """The positions after the entry *name*, and whether the pattern ends there."""
        nxt: set[int] = set()
        for i in states:
            if i >= len(self._parts):
                continue
            regex = self._regex[i]
            if regex is None:
                nxt.add(i)  # ** goes on through this directory
            elif regex.match(name):
                nxt.add(i + 1)
        closed = self._closure(nxt)
        return closed, len(self._parts) in closed


def walk_files(
    ws: Workspace,
    dir_fd: int,
    base_rel: str,
    matcher: GlobMatcher,
    *,
    skip_dirs: frozenset[str] = frozenset(),
) -> Iterator[Found]:
    """The regular files under the directory *dir_fd* (whose path relative to the
    root is *base_rel*) that *matcher* accepts, depth first in name order."""
    rel = "" if base_rel == "." else base_rel
    yield from _walk(ws, dir_fd, rel, matcher, matcher.start(), skip_dirs, 0)


def _walk(
    ws: Workspace,
    dir_fd: int,
    rel: str,
    matcher: GlobMatcher,
    states: frozenset[int],
    skip_dirs: frozenset[str],
    depth: int,
) -> Iterator[Found]:
    trio.from_thread.check_cancelled()
    for entry in scan_dir(dir_fd):
        child_states, matched = matcher.step(states, entry.name)
        if not child_states:
            continue
        path = f"{rel}/{entry.name}" if rel else entry.name
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue  # vanished meanwhile
        if stat.S_ISDIR(st.st_mode):
            if entry.name in skip_dirs or depth >= MAX_DEPTH:
                continue
            with open_subdir(dir_fd, entry.name) as sub:
                if sub is not None:  # None: swapped or unreadable meanwhile
                    yield from _walk(ws, sub, path, matcher, child_states, skip_dirs, depth + 1)
        elif not matched:
            continue
        elif stat.S_ISREG(st.st_mode):
            yield Found(path, dir_fd, entry.name, st, path)
        elif stat.S_ISLNK(st.st_mode):
            try:
                with resolve_beneath(ws, path) as where:
                    target = where.st
                    if (
                        where.name is not None
                        and target is not None
                        and stat.S_ISREG(target.st_mode)
                    ):
                        yield Found(path, where.dir_fd, where.name, target, where.shown)
            except (WorkspaceError, OSError):
                continue  # leads outside, dangling, or a loop: not shown
