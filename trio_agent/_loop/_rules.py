"""Permission rules: allow / ask / deny lists that act as a ``can_use_tool``.

A rule is a tool name (``"Read"``) or a tool name with a pattern
(``"Bash(git *)"``, ``"Write(src/*)"``). The pattern is matched with
:func:`fnmatch.fnmatchcase` (case-sensitive on every platform; ``*`` also matches
``/``) against the call's *main argument*: the first of the input keys
``path``, ``file_path``, ``command``, ``url``, ``pattern`` that holds a string. A
pattern rule never matches a call that has no such argument; ``Name(*)`` is
the same as ``Name`` except for that.

Precedence: a matching ``deny`` rule wins, then ``ask``, then ``allow``; a call that
no rule matches is asked. Asking awaits ``ask_callback(tool, input, ctx)``; with no
callback, asking denies (nobody can say yes).

Example::

    rules = PermissionRules(
        allow=["Read", "Grep", "Bash(git status*)"],
        deny=["Bash(rm *)", "Write(/etc/*)"],
        ask_callback=prompt_user,
    )
    async with trio_agent.query(client, messages, tools=tools, model=model,
                                max_tokens=8192, can_use_tool=rules) as events:
        ...
"""

from __future__ import annotations

import enum
import fnmatch
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import attrs
import trio

from .._exceptions import TrioAgentError
from .._permissions import Allow, Deny, PermissionDecision
from .._tools import Tool, ToolContext

__all__ = ["MAIN_ARGUMENT_KEYS", "PermissionRuleError", "PermissionRules", "Rule", "RuleAction"]

#: The input keys whose (string) value a ``Name(pattern)`` rule is matched against,
#: in order of preference.
MAIN_ARGUMENT_KEYS: tuple[str, ...] = ("path", "file_path", "command", "url", "pattern")

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
        ask_callback: ``async (tool, input, ctx) -> Allow | Deny | Reject``; when None,
            every call that must be asked is denied.
    """

    allow: tuple[Rule, ...] = attrs.field(default=(), converter=_rules)
    ask: tuple[Rule, ...] = attrs.field(default=(), converter=_rules)
    deny: tuple[Rule, ...] = attrs.field(default=(), converter=_rules)
    ask_callback: AskCallback | None = attrs.field(default=None, kw_only=True)

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

        Pure and synchronous: deny first, then ask, then allow; no match asks.
        """
        for action, rules in (
            (RuleAction.DENY, self.deny),
            (RuleAction.ASK, self.ask),
            (RuleAction.ALLOW, self.allow),
        ):
            for rule in rules:
                if rule.matches(tool_name, input):
                    return action, rule
        return RuleAction.ASK, None

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
