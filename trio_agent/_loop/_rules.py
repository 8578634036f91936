"""Permission rules: allow / ask / deny lists that act as a ``can_use_tool``.

A rule is a tool name (``"Read"``) or a tool name with a pattern
(``"Bash(git *)"``, ``"Write(src/*)"``). The pattern is matched with
:func:`fnmatch.fnmatchcase` (case-sensitive on every platform; ``*`` also matches
``/``) against the call's *main argument*: the first of the input keys
``path``, ``file_path``, ``command``, ``url``, ``pattern`` that holds a string. A
pattern rule never matches a call that has no such argument; ``Name(*)`` is
the same as ``Name`` except for that.

Rules mean what they say:

- **Bash**: the command is split into the simple commands it would run
  (tree-sitter-bash, see :mod:`._shell`: ``;``, ``&&``, ``||``, ``|``, subshells,
  ``$(...)``, backticks, process substitution, function bodies...). ``Bash(prefix*)``
  allows a command only if *every* simple command in it matches an allow rule, so
  ``Bash(git status*)`` does not allow ``git status; touch pwned``. A deny or ask
  rule applies if it matches the whole command or any simple command in it. A
  command that does not parse is asked about, never allowed by a pattern.
- **Files** (the argument is ``path`` or ``file_path``): the path is resolved against
  *root* (symlinks included) and matched as the workspace-relative path and as the
  absolute real path, so ``./.env``, ``/abs/root/.env`` and a symlink to ``.env``
  all match ``Read(.env)``. Deny and ask rules also match the path as given; allow
  rules only the resolved one (``src/../.env`` is not allowed by ``Read(src/*)``).

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
import fnmatch
import os
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import attrs
import trio

from .._exceptions import TrioAgentError
from .._permissions import Allow, Deny, PermissionDecision
from .._tools import Tool, ToolContext
from ._shell import simple_commands

__all__ = ["MAIN_ARGUMENT_KEYS", "PermissionRuleError", "PermissionRules", "Rule", "RuleAction"]

#: The input keys whose (string) value a ``Name(pattern)`` rule is matched against,
#: in order of preference.
MAIN_ARGUMENT_KEYS: tuple[str, ...] = ("path", "file_path", "command", "url", "pattern")
#: Keys whose value is a file path (resolved before matching).
_PATH_KEYS = ("path", "file_path")

_RULE = re.compile(r"^(?P<name>[a-zA-Z0-9_-]{1,128})(?:\((?P<pattern>.*)\))?$", re.DOTALL)

AskCallback = Callable[[Tool, Mapping[str, Any], ToolContext], Awaitable[PermissionDecision]]


class PermissionRuleError(TrioAgentError, ValueError):
    """A permission rule string is malformed."""


class RuleAction(enum.StrEnum):
    """What the rules say about one call, before asking anyone."""

    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"


def main_argument(input: Mapping[str, Any]) -> str | None:
    """The value a ``Name(pattern)`` rule is matched against, or None."""
    for key in MAIN_ARGUMENT_KEYS:
        value = input.get(key)
        if isinstance(value, str):
            return value
    return None


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
        argument = main_argument(input)
        return argument is not None and fnmatch.fnmatchcase(argument, self.pattern)

    def __str__(self) -> str:
        return self.tool if self.pattern is None else f"{self.tool}({self.pattern})"


@attrs.frozen
class _Subject:
    """What the patterns of one call are matched against.

    ``any_of``: a deny or ask rule applies if it matches one of these. ``every``: a
    pattern allow rule set allows the call if each item (alternative spellings of one
    thing) is matched by some allow rule; None: no pattern can allow it.
    """

    any_of: tuple[str, ...]
    every: tuple[tuple[str, ...], ...] | None


def _main_key(input: Mapping[str, Any]) -> str | None:
    for key in MAIN_ARGUMENT_KEYS:
        if isinstance(input.get(key), str):
            return key
    return None


def _subject(tool_name: str, input: Mapping[str, Any], root: str) -> _Subject:
    key = _main_key(input)
    if key is None:
        return _Subject((), None)
    value: str = input[key]
    if key == "command" and tool_name == "Bash":
        commands = simple_commands(value)
        if commands is None or not commands:
            return _Subject((value,), None)
        return _Subject((value, *commands), tuple((c,) for c in commands))
    if key in _PATH_KEYS and value and "\0" not in value:
        real_root = os.path.realpath(root)
        real = os.path.realpath(os.path.join(real_root, value))
        spellings = [real]
        if real == real_root:
            spellings.insert(0, ".")
        elif real.startswith(real_root.rstrip(os.sep) + os.sep):
            spellings.insert(0, os.path.relpath(real, real_root).replace(os.sep, "/"))
        return _Subject((value, os.path.normpath(value), *spellings), (tuple(spellings),))
    return _Subject((value,), ((value,),))


def _matches(rule: Rule, texts: tuple[str, ...]) -> bool:
    assert rule.pattern is not None
    return any(fnmatch.fnmatchcase(text, rule.pattern) for text in texts)


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
    """

    allow: tuple[Rule, ...] = attrs.field(default=(), converter=_rules)
    ask: tuple[Rule, ...] = attrs.field(default=(), converter=_rules)
    deny: tuple[Rule, ...] = attrs.field(default=(), converter=_rules)
    ask_callback: AskCallback | None = attrs.field(default=None, kw_only=True)
    root: str | os.PathLike[str] | None = attrs.field(default=None, kw_only=True)

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
        subject = _subject(tool_name, input, os.fspath(self.root or os.getcwd()))
        for action, rules in ((RuleAction.DENY, self.deny), (RuleAction.ASK, self.ask)):
            for rule in rules:
                if rule.tool == tool_name and (
                    rule.pattern is None or _matches(rule, subject.any_of)
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
            rule = next((r for r in allow if _matches(r, spellings)), None)
            if rule is None:
                return RuleAction.ASK, None
            deciding = deciding or rule
        return RuleAction.ALLOW, deciding

    async def __call__(
        self, tool: Tool, input: Mapping[str, Any], ctx: ToolContext
    ) -> PermissionDecision:
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
