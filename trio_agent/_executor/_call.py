"""One tool call: what the executor tracks about it, and what its task does.

The pure steps around a call (checking its input, and so its concurrency
safety; reading what the tool returned) and :func:`execute`, the body of the
call's task once it has its slot: ask ``can_use_tool``, run the tool, read the
return. :func:`execute` touches no executor state: it answers with a
:class:`Ran` or a :class:`Rejected`, and the executor does its bookkeeping in
the same task step.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypeAlias, get_args

import attrs
import trio

from .._exceptions import excerpt
from .._messages import ContentBlock, ToolUseBlock
from .._permissions import Allow, CanUseTool, Defer, Deny, Reject
from .._tools import ContextModifier, Tool, ToolContext, ToolOutput, plain_json
from ._results import (
    ToolResult,
    bad_return_message,
    invalid_input_message,
    permission_error_message,
    raised_message,
    summarize_call,
)

__all__ = ["Call", "CallState", "Ran", "Rejected", "check_input", "execute", "read_return"]

_BLOCK_TYPES: tuple[type, ...] = get_args(ContentBlock)

CallState: TypeAlias = Literal["queued", "executing", "finished"]


@attrs.define(eq=False)
class Call:
    """One added ``tool_use`` and where it is in its life."""

    block: ToolUseBlock
    tool: Tool | None
    safe: bool
    input_error: str | None
    state: CallState = "queued"
    started: bool = False  # tool.run() was called
    result: ToolResult | None = None
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)

    def summary(self) -> str:
        return summarize_call(self.block.name, self.block.input)


def check_input(tool: Tool, block: ToolUseBlock) -> tuple[str | None, bool]:
    """The input's error (None if valid) and whether the call is concurrency-safe.

    Safety is decided on the validated input; an invalid input, or a safety
    check that raises, makes the call unsafe.
    """
    if block.invalid_input is not None:
        return f"the input is not valid JSON: {excerpt(block.invalid_input)}", False
    error = tool.validate(block.input)
    if error is not None:
        return error, False
    return None, tool.is_concurrency_safe(plain_json(block.input))


def read_return(
    value: Any,
) -> tuple[str | tuple[ContentBlock, ...], bool, ContextModifier | None] | None:
    """What a tool's ``run`` returned as (content, is_error, context modifier), or
    None if it is not a str, a sequence of content blocks or a ToolOutput."""
    modifier = None
    is_error = False
    content: Any = value
    if isinstance(value, ToolOutput):
        content, is_error, modifier = value.content, value.is_error, value.context_modifier
    if isinstance(content, str):
        return content, is_error, modifier
    if isinstance(content, Sequence) and all(isinstance(b, _BLOCK_TYPES) for b in content):  # pyright: ignore[reportUnknownVariableType]
        return tuple(content), is_error, modifier  # pyright: ignore[reportUnknownVariableType]
    return None


@attrs.frozen
class Ran:
    """The call was answered: by the tool, or by an error before it ran.

    Attributes:
        result: the result.
        modifier: the tool's context modifier, if it returned one.
        failed: the tool ran and failed (raised, returned an error or
            garbage): a cascading tool cancels its siblings.
    """

    result: ToolResult
    modifier: ContextModifier | None = None
    failed: bool = False


@attrs.frozen
class Rejected:
    """``can_use_tool`` answered :class:`~trio_agent.Reject`: the user refused."""

    message: str


async def execute(
    call: Call,
    *,
    can_use_tool: CanUseTool | None,
    context: Any,
    report: Callable[[Any], None],
    tool_timeout: float | None = None,
) -> Ran | Rejected:
    """Permission, then the tool (setting ``call.started`` as it begins), for at
    most the tool's own ``timeout`` or else *tool_timeout* seconds."""
    tool, block = call.tool, call.block
    assert tool is not None
    if call.input_error is not None:
        return _error(call, invalid_input_message(tool.name, call.input_error))
    input: Mapping[str, Any] = plain_json(block.input)
    ctx = ToolContext(block.id, tool.name, context=context, report=report)
    if can_use_tool is not None:
        try:
            decision = await can_use_tool(tool, input, ctx)
            if not isinstance(decision, Allow | Deny | Reject | Defer):  # pyright: ignore[reportUnnecessaryIsInstance]
                raise TypeError(f"can_use_tool returned {type(decision).__name__}")
        except Exception as exc:
            return _error(call, permission_error_message(tool.name, exc))
        if isinstance(decision, Deny):
            return _error(call, decision.message)
        if isinstance(decision, Reject):
            return Rejected(decision.message)
        if isinstance(decision, Defer):
            # Pairing holds: a placeholder result, marked, that the loop keeps out of
            # the history while the call waits for approval.
            result = ToolResult(block.id, decision.message, is_error=True, deferred=True)
            return Ran(result)
        if decision.updated_input is not None:
            error = tool.validate(decision.updated_input)
            if error is not None:
                return _error(call, invalid_input_message(tool.name, error))
            input = plain_json(decision.updated_input)
    call.started = True
    limit = tool.timeout if tool.timeout is not None else tool_timeout
    value: Any = None
    try:
        # The tool's own deadline (a TooSlowError it raises itself is its error).
        with trio.move_on_after(math.inf if limit is None else limit) as deadline:
            value = await tool.run(input, ctx)
    except Exception as exc:
        return _error(call, raised_message(tool.name, exc), failed=True)
    if deadline.cancelled_caught:
        return _error(call, f"Error: {tool.name} timed out after {limit:g} s", failed=True)
    read = read_return(value)
    if read is None:
        return _error(call, bad_return_message(block.name, value), failed=True)
    content, is_error, modifier = read
    result = ToolResult(block.id, content, is_error=is_error, started=True)
    return Ran(result, modifier, failed=is_error)


def _error(call: Call, message: str, *, failed: bool = False) -> Ran:
    return Ran(
        ToolResult(call.block.id, message, is_error=True, started=call.started), failed=failed
    )
