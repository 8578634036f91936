"""Permission rules: allow / ask / deny lists that act as a ``can_use_tool``.

A rule is a tool name (``"Read"``) or a tool name with a pattern
(``"Bash(git *)"``, ``"Write(src/*)"``). The pattern is matched with
:func:`fnmatch.fnmatchcase` (case-sensitive on every platform; ``*`` also matches
``/``) against the call's *main argument*: the first of the input keys
``path``, ``file_path``, ``command``, ``url``, ``pattern`` that holds a string (for
Bash, only ``command``: no other key can stand in for what runs). A
pattern rule never matches a call that has no such argument; ``Name(*)`` is
the same as ``Name`` except for that.

Rules mean what they say (docs/SECURITY.md states exactly what they guarantee):

- **Bash**: the command is analyzed by :mod:`trio_agent._shell` into the simple commands
  bash would run, each normalized (assignments, quotes and escapes removed,
  transparent wrappers such as ``env``, ``timeout``, ``xargs``, ``sudo`` seen through,
  the command word also known by its basename), inner lines of ``eval``, ``sh -c``,
  ``find -exec``... included. ``Bash(prefix*)`` allows a command only if *every* simple
  command in it matches an allow rule, so ``Bash(git status*)`` does not allow
  ``git status; touch pwned``. A deny or ask rule applies if it matches the whole
  command or any spelling of any simple command in it. A command that could run
  something the analysis cannot see (*dynamic*: ``eval "$x"``, ``bash script.sh``...)
  or that cannot be analyzed (a syntax error, over 64 KiB, nested deeper than 200) is
  never allowed by a pattern, and every Bash deny or ask pattern applies to it.
  ``Bash(npm run test:*)`` (Claude Code's prefix syntax) matches ``npm run test`` and
  ``npm run test ...``.
- **Files** (the argument is ``path`` or ``file_path``): patterns are gitignore-style
  (``*`` stays in one directory, ``**`` crosses them, a pattern without ``/`` matches a
  name at any depth, what is under a matched directory matches too; ``./x``, ``x``
  and ``/abs/root/x`` are the same pattern; ``\\`` escapes the next character). The
  path is resolved against *root* as the kernel and the file tools resolve it (each
  symlink followed, ``..`` the parent of where the walk is) and matched as the
  workspace-relative path and as the absolute real path, so ``./.env``,
  ``/abs/root/.env``, ``a/../.env`` and a symlink to ``.env`` all match
  ``Read(.env)``; a path whose real path cannot be known (over ``PATH_MAX``, a loop,
  unencodable) gets every deny and ask rule of its tool, and no pattern allows it.
  Deny and ask rules also match the path as given; allow rules only the resolved one
  (``src/../.env`` is not allowed by ``Read(src/*)``). A Write or Edit deny rule
  denies both tools. A Read deny rule also denies a Grep or Glob whose path it covers; give
  :meth:`PermissionRules.read_denied` to ``Grep(ws, exclude=...)`` and ``Glob`` so
  that they skip the files it covers.

Precedence: a matching ``deny`` rule wins, then ``ask``, then ``allow``; a call that
no rule matches is asked, and so is a call of a tool no rule names (a tool the
executor does not know never runs at all). Asking awaits
``ask_callback(tool, input, ctx)``; with no callback, asking denies (nobody can say
yes).

Example::

    rules = PermissionRules(
        allow=["Read", "Grep", "Bash(git status*)"],
        deny=["Bash(rm *)", "Write(/etc/*)"],
        ask_callback=prompt_user,
    )
    async with trio_agent.query(client, messages, tools=tools, model=model, max_tokens=8192,
                                options=trio_agent.TurnOptions(can_use_tool=rules)) as events:
        ...
"""

from __future__ import annotations

import enum
import errno
import fnmatch
import functools
import os
import re
import stat
import warnings
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import attrs
import trio

from .._exceptions import TrioAgentError
from .._permissions import Allow, Deny, PermissionDecision
from .._shell import MAX_COMMAND_BYTES, analyze
from .._tools import Tool, ToolContext

__all__ = [
    "MAIN_ARGUMENT_KEYS",
    "PermissionRuleError",
    "PermissionRules",
    "Rule",
    "RuleAction",
    "UnknownToolWarning",
]

#: The input keys whose (string) value a ``Name(pattern)`` rule is matched against,
#: in order of preference.
MAIN_ARGUMENT_KEYS: tuple[str, ...] = ("path", "file_path", "command", "url", "pattern")
#: Keys whose value is a file path (resolved before matching).
_PATH_KEYS = ("path", "file_path")

#: Tools that list or search files: a Read deny rule also applies to their path.
_SEARCH_TOOLS = frozenset({"Grep", "Glob"})
#: Tools that change a file's content: a deny rule for one applies to each.
_FILE_WRITERS = frozenset({"Write", "Edit"})
#: Symlinks followed in resolving one path before it counts as unresolvable (Linux's).
_MAX_LINKS = 40
#: A Bash command longer than this is decided in a worker thread.
_INLINE_COMMAND_CHARS = 1024

_RULE = re.compile(r"^(?P<name>[a-zA-Z0-9_-]{1,128})(?:\((?P<pattern>.*)\))?$", re.DOTALL)

AskCallback = Callable[[Tool, Mapping[str, Any], ToolContext], Awaitable[PermissionDecision]]


class PermissionRuleError(TrioAgentError, ValueError):
    """A permission rule string is malformed."""


class UnknownToolWarning(UserWarning):
    """A permission rule names a tool that is not among the rules' ``tools``."""


def _tool_names(value: Iterable[str | Tool] | None) -> frozenset[str] | None:
    if value is None:
        return None
    return frozenset(t if isinstance(t, str) else t.name for t in value)


class RuleAction(enum.StrEnum):
    """What the rules say about one call, before asking anyone."""

    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"


def main_argument(input: Mapping[str, Any], tool_name: str | None = None) -> str | None:
    """The value a ``Name(pattern)`` rule is matched against, or None (for Bash,
    always its ``command``: no other key can stand in for what runs)."""
    key = _main_key(tool_name, input)
    return None if key is None else input[key]


@attrs.frozen
class Rule:
    """One parsed rule: a tool name and an optional fnmatch pattern."""

    tool: str
    pattern: str | None = None

    @classmethod
    def parse(cls, text: str) -> Rule:
        """Parse ``"Name"`` or ``"Name(pattern)"``.

        Raises:
            PermissionRuleError: the text is not a rule.
        """
        if not isinstance(text, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise PermissionRuleError(f"a rule is a string, not {type(text).__name__}")
        match = _RULE.match(text.strip())
        if match is None:
            raise PermissionRuleError(
                f"invalid permission rule {text!r}: use 'ToolName' or 'ToolName(pattern)'"
            )
        pattern = match.group("pattern")
        if pattern == "":
            raise PermissionRuleError(f"invalid permission rule {text!r}: empty pattern")
        return cls(match.group("name"), pattern)

    def matches(self, tool_name: str, input: Mapping[str, Any]) -> bool:
        """Whether this rule applies to a call of *tool_name* with *input*."""
        if tool_name != self.tool:
            return False
        if self.pattern is None:
            return True
        argument = main_argument(input, tool_name)
        return argument is not None and fnmatch.fnmatchcase(argument, self.pattern)

    def __str__(self) -> str:
        return self.tool if self.pattern is None else f"{self.tool}({self.pattern})"


@attrs.frozen
class _Subject:
    """What the patterns of one call are matched against.

    ``any_of``: a deny or ask rule applies if it matches one of these; ``wildcard``:
    every deny and ask pattern applies (a command that could run anything).
    ``every``: a pattern allow rule set allows the call if each item (alternative
    spellings of one thing) is matched by some allow rule; None: no pattern can allow
    it. ``paths``: the call names a file; its patterns are gitignore-style.
    """

    any_of: tuple[str, ...]
    every: tuple[tuple[str, ...], ...] | None
    wildcard: bool = False
    paths: bool = False


def _main_key(tool_name: str | None, input: Mapping[str, Any]) -> str | None:
    keys = ("command",) if tool_name == "Bash" else MAIN_ARGUMENT_KEYS
    for key in keys:
        if isinstance(input.get(key), str):
            return key
    return None


def _bash_subject(command: str) -> _Subject:
    if len(command) > MAX_COMMAND_BYTES:  # before any encoding or parsing
        return _Subject((), None, wildcard=True)
    analysis = _analyze(command)
    if analysis.unanalyzable is not None:
        return _Subject((), None, wildcard=True)
    any_of = [command]
    every: list[tuple[str, ...]] = []
    for simple in analysis.commands:
        any_of.extend(simple.deny_texts)
        every.append(simple.allow_texts)
    if analysis.dynamic or not every or any(not texts for texts in every):
        # No simple command to hold against the allow rules (``[[ ... ]]``, a bare
        # assignment): nothing a pattern names, so no pattern allows it.
        return _Subject(tuple(any_of), None, wildcard=analysis.dynamic)
    return _Subject(tuple(dict.fromkeys(any_of)), tuple(every))


_analyze = functools.lru_cache(maxsize=256)(analyze)


class _Unresolvable(Exception):
    """A path whose real path cannot be known here (see :func:`_real_path`)."""


def _real_path(path: str) -> str:
    """The real path of the absolute *path*, as the kernel's lookup finds it: each
    symlink followed, ``..`` the parent of where the walk is. A missing component
    (and what follows it) is kept as it is spelled, as ``os.path.realpath`` does.

    Unlike ``os.path.realpath``, which takes a component it cannot ``lstat`` for
    a plain name, any other failure (a path over ``PATH_MAX``, a symlink loop, no
    permission, a name the file system cannot encode) raises
    :class:`_Unresolvable`: a tool that walks the path its own way (the file
    tools, one ``dir_fd`` step at a time, with no length limit) might reach a file
    this cannot name, so the rules fail closed.
    """
    todo = [p for p in path.split("/") if p not in ("", ".")]
    done: list[str] = []
    links = 0
    try:
        while todo:
            comp = todo.pop(0)
            if comp == "..":
                if done:
                    done.pop()
                continue
            here = "/" + "/".join([*done, comp])
            try:
                st = os.lstat(here)
            except OSError as exc:
                if exc.errno not in (errno.ENOENT, errno.ENOTDIR):
                    raise
                done.append(comp)
                continue
            if not stat.S_ISLNK(st.st_mode):
                done.append(comp)
                continue
            links += 1
            if links > _MAX_LINKS:
                raise OSError(errno.ELOOP, "too many symlinks", path)
            target = os.readlink(here)
            if target.startswith("/"):
                done.clear()
            todo[:0] = [p for p in target.split("/") if p not in ("", ".")]
    except (OSError, ValueError) as exc:  # UnicodeEncodeError is a ValueError
        raise _Unresolvable(path) from exc
    return "/" + "/".join(done)


def _path_spellings(value: str, root: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the resolved spellings: workspace-relative and absolute real path, the
    spellings as given, normalized).

    Raises:
        _Unresolvable: the real path cannot be known (see :func:`_real_path`).
    """
    real_root = _real_path(root if os.path.isabs(root) else os.path.join(os.getcwd(), root))
    real = _real_path(os.path.join(real_root, value))
    resolved = [real]
    if real == real_root:
        resolved.insert(0, ".")
    elif real.startswith(real_root.rstrip(os.sep) + os.sep):
        resolved.insert(0, os.path.relpath(real, real_root).replace(os.sep, "/"))
    given = [value]
    normal = os.path.normpath(value).replace(os.sep, "/")
    if os.path.isabs(normal):
        given.append(normal)
    elif not normal.startswith("../"):
        given.append(normal)
        given.append(os.path.relpath(os.path.join(real_root, normal), real_root))
    return tuple(resolved), tuple(dict.fromkeys(given))


def _subject(tool_name: str, input: Mapping[str, Any], root: str) -> _Subject:
    key = _main_key(tool_name, input)
    if key is None:
        return _Subject((), None)
    value: str = input[key]
    if tool_name == "Bash":
        return _bash_subject(value)
    if key in _PATH_KEYS and value and "\0" not in value:
        try:
            resolved, given = _path_spellings(value, root)
        except _Unresolvable:
            # Which file it names cannot be known: every deny and ask rule applies.
            return _Subject((value,), None, wildcard=True, paths=True)
        return _Subject(tuple(dict.fromkeys((*given, *resolved))), (resolved,), paths=True)
    return _Subject((value,), ((value,),))


def _restricts(rule_tool: str, tool_name: str, action: RuleAction) -> bool:
    """Whether a deny or ask rule for *rule_tool* applies to a call of *tool_name*:
    its own tool; a Write or Edit deny rule also the other (both change a file,
    so denying one alone would protect nothing)."""
    if rule_tool == tool_name:
        return True
    return action is RuleAction.DENY and rule_tool in _FILE_WRITERS and tool_name in _FILE_WRITERS


def _matches(
    rule: Rule, texts: tuple[str, ...], *, paths: bool = False, root: str = "", broad: bool = False
) -> bool:
    """Whether *rule*'s pattern matches one of *texts*; *broad* (deny and ask rules):
    ``Bash(rm *)`` also matches the bare ``rm``."""
    assert rule.pattern is not None
    if paths:
        regex = _path_regex(rule.pattern, root)
        return any(_covers(regex, text) for text in texts)
    if rule.tool == "Bash" and rule.pattern.endswith(":*"):
        # Claude Code's prefix syntax: the prefix, then nothing or a space.
        prefix = rule.pattern[:-2]
        return any(t == prefix or t.startswith(prefix + " ") for t in texts)
    if broad and rule.tool == "Bash" and rule.pattern.endswith(" *"):
        bare = rule.pattern[:-2]
        if any(fnmatch.fnmatchcase(text, bare) for text in texts):
            return True
    return any(fnmatch.fnmatchcase(text, rule.pattern) for text in texts)


def _covers(regex: re.Pattern[str], path: str) -> bool:
    """Whether *regex* matches *path* or one of its parent directories (gitignore:
    what is under a matched directory is matched too)."""
    if regex.fullmatch(path):
        return True
    while True:
        parent = path.rsplit("/", 1)[0] if "/" in path.strip("/") else ""
        if not parent or parent == path:
            return False
        if regex.fullmatch(parent):
            return True
        path = parent


@functools.lru_cache(maxsize=1024)
def _path_regex(pattern: str, root: str) -> re.Pattern[str]:
    """A gitignore-style pattern as a regular expression over the spellings of
    :func:`_path_spellings`.

    ``./x`` and ``x/y`` are relative to the root (``**`` crosses directories, ``*``
    does not); a pattern without a ``/`` matches a name at any depth; ``//abs`` and
    ``/abs`` are absolute paths (a pattern inside the root also matches its
    workspace-relative spelling); ``~/x`` is in the home directory.
    """
    text = pattern
    if text.startswith("~/"):
        text = os.path.expanduser(text)
    if text.startswith("//"):
        text = text[1:]
    real_root = os.path.realpath(root).rstrip("/")
    if text.startswith("/"):
        text = _real_directories(text)
        inside = real_root and (text == real_root or text.startswith(real_root + "/"))
        if inside:
            relative = text[len(real_root) :].lstrip("/") or "."
            body = f"(?:{re.escape(real_root)}/)?{_glob_body(relative)}"
        else:
            body = _glob_body(text)
        return re.compile(body, re.DOTALL)
    while text.startswith("./"):
        text = text[2:]
    text = text.rstrip("/") or "."
    body = _glob_body(text)
    if "/" not in text:
        body = f"(?:.*/)?{body}"
    return re.compile(body, re.DOTALL)  # a name may hold a newline: ``.`` matches it too


def _real_directories(pattern: str) -> str:
    """The absolute *pattern* with the directories before its first glob character
    spelled as their real path: ``/alias/secret/**`` (``/alias`` a symlink to the
    workspace) is ``/real/workspace/secret/**``, the spelling a resolved path has.
    A pattern's last component stays as it is (it names what is matched)."""
    parts = pattern.split("/")
    fixed = 0
    while fixed < len(parts) - 1 and not any(c in parts[fixed] for c in "*?[\\"):
        fixed += 1
    if fixed <= 1:
        return pattern
    try:
        real = os.path.realpath("/".join(parts[:fixed]))
    except ValueError:  # a name the file system cannot encode: as it is spelled
        return pattern
    return "/".join([real.rstrip("/"), *parts[fixed:]])


def _glob_body(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        if text.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif text.startswith("/**", i) and i + 3 == len(text):
            out.append("(?:/.*)?")
            i += 3
        elif text.startswith("**", i):
            out.append(".*")
            i += 2
        elif text[i] == "*":
            out.append("[^/]*")
            i += 1
        elif text[i] == "?":
            out.append("[^/]")
            i += 1
        elif text[i] == "\\" and i + 1 < len(text):  # gitignore: the next character as it is
            out.append(re.escape(text[i + 1]))
            i += 2
        elif text[i] == "[" and (end := text.find("]", i + 2)) > 0:
            inner = text[i + 1 : end].replace("\\", "\\\\")
            if inner.startswith("!"):
                inner = "^" + inner[1:]
            out.append(f"[{inner}]")
            i = end + 1
        else:
            out.append(re.escape(text[i]))
            i += 1
    return "".join(out)


def _rules(value: Iterable[str | Rule]) -> tuple[Rule, ...]:
    if isinstance(value, str):
        # A lone string would otherwise be split into one-letter rules.
        raise PermissionRuleError(f"rules are a list of strings, not the string {value!r}")
    return tuple(r if isinstance(r, Rule) else Rule.parse(r) for r in value)


@attrs.frozen
class PermissionRules:
    """Allow / ask / deny lists; an instance is itself a ``can_use_tool``.

    Args:
        allow: rules whose calls run without asking.
        ask: rules whose calls are asked even if an allow rule matches.
        deny: rules whose calls are always denied (the model gets an error result).
        ask_callback: ``async (tool, input, ctx) -> Allow | Deny | Reject | Defer``; when None,
            every call that must be asked is denied.
        root: the directory file paths are resolved against (the workspace root);
            None: the current directory when the call is decided.
        tools: the tools (or their names) the rules are for; a rule naming another
            tool warns (:class:`UnknownToolWarning`) here, since it can never match.
            None: not checked.
    """

    allow: tuple[Rule, ...] = attrs.field(default=(), converter=_rules)
    ask: tuple[Rule, ...] = attrs.field(default=(), converter=_rules)
    deny: tuple[Rule, ...] = attrs.field(default=(), converter=_rules)
    ask_callback: AskCallback | None = attrs.field(default=None, kw_only=True)
    root: str | os.PathLike[str] | None = attrs.field(default=None, kw_only=True)
    tools: frozenset[str] | None = attrs.field(
        default=None, kw_only=True, converter=_tool_names, eq=False, repr=False
    )

    def __attrs_post_init__(self) -> None:
        if self.tools is None:
            return
        for rule in (*self.allow, *self.ask, *self.deny):
            if rule.tool not in self.tools:
                warnings.warn(
                    f"the permission rule {str(rule)!r} names no known tool "
                    f"(known: {', '.join(sorted(self.tools))})",
                    UnknownToolWarning,
                    stacklevel=3,
                )

    @classmethod
    def default(cls, ask_callback: AskCallback | None = None) -> PermissionRules:
        """Read, Glob, Grep and WebFetch run; Write, Edit and Bash are asked."""
        return cls(
            allow=["Read", "Glob", "Grep", "WebFetch"],
            ask=["Write", "Edit", "Bash"],
            ask_callback=ask_callback,
        )

    def decide(self, tool_name: str, input: Mapping[str, Any]) -> tuple[RuleAction, Rule | None]:
        """The action for a call and the rule that decided it (None: no rule matched).

        Synchronous: deny first, then ask, then allow; no match asks (see the
        module for what a pattern is matched against).
        """
        root = os.fspath(self.root or os.getcwd())
        subject = _subject(tool_name, input, root)
        if tool_name in _SEARCH_TOOLS and subject.paths:
            # Grep and Glob never search what Read may not see.
            for rule in self.deny:
                if rule.tool == "Read" and (
                    rule.pattern is None
                    or subject.wildcard
                    or _matches(rule, subject.any_of, paths=True, root=root)
                ):
                    return RuleAction.DENY, rule
        for action, rules in ((RuleAction.DENY, self.deny), (RuleAction.ASK, self.ask)):
            for rule in rules:
                if _restricts(rule.tool, tool_name, action) and (
                    rule.pattern is None
                    or subject.wildcard
                    or _matches(rule, subject.any_of, paths=subject.paths, root=root, broad=True)
                ):
                    return action, rule
        allow = [rule for rule in self.allow if rule.tool == tool_name]
        for rule in allow:
            if rule.pattern is None:
                return RuleAction.ALLOW, rule
        if not allow or subject.every is None:
            return RuleAction.ASK, None
        deciding: Rule | None = None
        for spellings in subject.every:
            rule = next(
                (r for r in allow if _matches(r, spellings, paths=subject.paths, root=root)),
                None,
            )
            if rule is None:
                return RuleAction.ASK, None
            deciding = deciding or rule
        return RuleAction.ALLOW, deciding

    def read_denied(self, path: str) -> bool:
        """Whether a Read deny rule covers *path* (relative to the root, or absolute):
        give it to ``Grep(ws, exclude=rules.read_denied)`` and ``Glob(...)`` so that
        they skip what Read may not see."""
        if not path or "\0" in path:
            return False
        root = os.fspath(self.root or os.getcwd())
        try:
            resolved, given = _path_spellings(path, root)
        except _Unresolvable:
            return any(rule.tool == "Read" for rule in self.deny)  # fail closed
        texts = (*given, *resolved)
        return any(
            rule.tool == "Read"
            and (rule.pattern is None or _matches(rule, texts, paths=True, root=root))
            for rule in self.deny
        )

    async def __call__(
        self, tool: Tool, input: Mapping[str, Any], ctx: ToolContext
    ) -> PermissionDecision:
        command = input.get("command") if tool.name == "Bash" else None
        if isinstance(command, str) and len(command) > _INLINE_COMMAND_CHARS:
            # A long command's parse takes milliseconds: not on the event loop.
            action, rule = await trio.to_thread.run_sync(self.decide, tool.name, input)
        else:
            action, rule = self.decide(tool.name, input)
        if action is not RuleAction.ASK or self.ask_callback is None:
            # Every async call is a checkpoint, asked or not.
            await trio.lowlevel.checkpoint()
        if action is RuleAction.ALLOW:
            return Allow()
        if action is RuleAction.DENY:
            return Deny(f"Permission to use {tool.name} was denied by the rule {str(rule)!r}.")
        if self.ask_callback is None:
            return Deny(
                f"Using {tool.name} needs permission and there is no one to ask; it was denied."
            )
        return await self.ask_callback(tool, input, ctx)
