"""Hooks around every step of a turn: ``TurnOptions(hooks=Hooks(...))``.

=====================  ======================================  ===============================
hook                   called with                             may return
=====================  ======================================  ===============================
``pre_tool_use``       ``(call: ToolCall)``, after             None (run it), ``Deny(message)``
                       ``can_use_tool`` allowed the call       (an error result), ``Ask()``
                                                               (wait for approval, as
                                                               ``Defer``), or a mapping: the
                                                               input the tool runs with
``post_tool_use``      ``(call, result: ToolResult)`` after    None, or what a tool returns
                       the tool succeeded                      (str, blocks, ``ToolOutput``):
                                                               the result the model reads
``post_tool_failure``  ``(call, result)`` after the tool       None, or a replacement result
                       failed (raised, timed out, an error)
``user_prompt_submit`` ``(prompt: UserMessage)`` before the    None, ``Deny(message)`` (the
                       turn's first model call                 turn ends ``prompt_denied``,
                                                               the prompt left out), or a str:
                                                               context added after the prompt
``pre_compact``        ``(history)`` before the compactor      None
``stop``               ``(history, *, stop_hook_active)``      ``StopHookResult`` or None
                       when the model ends its answer
``subagent_stop``      ``(agent, history, *,                   ``StopHookResult`` or None
                       stop_hook_active)`` when a subagent's
                       answer ends (its turn's stop hook)
=====================  ======================================  ===============================

Every hook is an async callable. A tool hook runs inside the call's cancel scope
(an abort, an interrupt or a sibling's failure cancels it) and within the tool's
timeout (``Tool.timeout``, else ``tool_timeout``); a turn hook runs inside the
turn's. A hook that raises, or returns something else, is the call's error result
(tool hooks) or the turn's error, a :class:`HookError` (turn hooks); never a crash.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol, TypeAlias

import attrs

from ._exceptions import TrioAgentError
from ._messages import Message, UserMessage
from ._permissions import Deny
from ._tools import Tool, ToolContext

__all__ = [
    "Ask",
    "HookError",
    "Hooks",
    "StopHook",
    "StopHookResult",
    "SubagentStopHook",
    "ToolCall",
]


@attrs.frozen
class StopHookResult:
    """What a stop hook says about the end of a turn.

    Attributes:
        block: True to refuse the end: the loop sends *message* as a user message
            and calls the model again (transition ``stop_hook_blocking``).
        message: what the model reads when the hook blocks.
    """

    block: bool = False
    message: str | None = None


class StopHook(Protocol):
    """``async hook(history, *, stop_hook_active) -> StopHookResult | None``.

    *stop_hook_active* is True when the model is going on because a stop hook
    blocked earlier in this turn (a hook can let go then, to avoid a loop).
    """

    def __call__(
        self, messages: tuple[Message, ...], *, stop_hook_active: bool
    ) -> Awaitable[StopHookResult | None]: ...


class SubagentStopHook(Protocol):
    """``async hook(agent, history, *, stop_hook_active) -> StopHookResult | None``:
    a stop hook for the turns of subagent *agent*."""

    def __call__(
        self, agent: str, messages: tuple[Message, ...], *, stop_hook_active: bool
    ) -> Awaitable[StopHookResult | None]: ...


@attrs.frozen
class ToolCall:
    """What a tool hook is told of a call.

    Attributes:
        tool: the tool.
        input: the input it runs with (validated; ``can_use_tool``'s update applied).
        ctx: the call's :class:`~trio_agent.ToolContext` (its id, the shared context).
    """

    tool: Tool
    input: Mapping[str, Any]
    ctx: ToolContext

    @property
    def name(self) -> str:
        """The tool's name."""
        return self.tool.name

    @property
    def id(self) -> str:
        """The tool_use id."""
        return self.ctx.tool_use_id


@attrs.frozen
class Ask:
    """``pre_tool_use``'s answer: ask the user first. The call waits for approval, as
    after ``can_use_tool``'s :class:`~trio_agent.Defer` (the turn ends
    ``awaiting_approval``)."""

    message: str = "Not run: a hook asked for the user's approval of this tool call."


class HookError(TrioAgentError):
    """A turn hook raised (its exception is the ``__cause__``) or returned a value it
    may not: the turn's error (``TurnEnd.error``).

    Attributes:
        hook: the hook's name (``"user_prompt_submit"``, ``"stop"``...).
    """

    def __init__(self, hook: str, message: str) -> None:
        super().__init__(f"the {hook} hook {message}")
        self.hook = hook


#: ``pre_tool_use``'s answers besides None.
PreToolUseResult: TypeAlias = Deny | Ask | Mapping[str, Any] | None
PreToolUse: TypeAlias = Callable[[ToolCall], Awaitable[PreToolUseResult]]
PostToolUse: TypeAlias = Callable[[ToolCall, Any], Awaitable[Any]]
UserPromptSubmit: TypeAlias = Callable[[UserMessage], Awaitable[Deny | str | None]]
PreCompact: TypeAlias = Callable[[tuple[Message, ...]], Awaitable[None]]


def _optional_callable(inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not callable(value):
        raise TypeError(
            f"Hooks.{attribute.name} must be an async callable or None, not {value!r:.80}"
        )


@attrs.frozen(kw_only=True)
class Hooks:
    """The hooks of a turn (see the module's table); each is None or an async callable."""

    pre_tool_use: PreToolUse | None = attrs.field(default=None, validator=_optional_callable)
    post_tool_use: PostToolUse | None = attrs.field(default=None, validator=_optional_callable)
    post_tool_failure: PostToolUse | None = attrs.field(default=None, validator=_optional_callable)
    user_prompt_submit: UserPromptSubmit | None = attrs.field(
        default=None, validator=_optional_callable
    )
    pre_compact: PreCompact | None = attrs.field(default=None, validator=_optional_callable)
    stop: StopHook | None = attrs.field(default=None, validator=_optional_callable)
    subagent_stop: SubagentStopHook | None = attrs.field(default=None, validator=_optional_callable)

    @property
    def tool_hooks(self) -> bool:
        """Whether any hook runs around tool calls."""
        return (
            self.pre_tool_use is not None
            or self.post_tool_use is not None
            or self.post_tool_failure is not None
        )
