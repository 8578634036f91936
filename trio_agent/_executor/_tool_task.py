"""What one tool call's task does once it has its slot: ask ``can_use_tool``,
run the tool, and read what it returned.

It touches no executor state: it answers with an :class:`Ran` (the result, the
context modifier, and whether the failure cancels siblings) or a
:class:`Rejected`, and the executor does its bookkeeping in the same task step.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from .._permissions import Allow, CanUseTool, Deny, Reject
from .._tools import ContextModifier, ToolContext, plain_json
from ._call import Call, read_return
from ._results import (
    ToolResult,
    bad_return_message,
    invalid_input_message,
    permission_error_message,
    raised_message,
)

__all__ = ["Ran", "Rejected", "execute"]


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
) -> Ran | Rejected:
    """Permission, then the tool (setting ``call.started`` as it begins)."""
    tool, block = call.tool, call.block
    assert tool is not None
    if call.input_error is not None:
        return _error(call, invalid_input_message(tool.name, call.input_error))
    input: Mapping[str, Any] = plain_json(block.input)
    ctx = ToolContext(block.id, tool.name, context=context, report=report)
    if can_use_tool is not None:
        try:
            decision = await can_use_tool(tool, input, ctx)
            if not isinstance(decision, Allow | Deny | Reject):  # pyright: ignore[reportUnnecessaryIsInstance]
                raise TypeError(f"can_use_tool returned {type(decision).__name__}")
        except Exception as exc:
            return _error(call, permission_error_message(tool.name, exc))
        if isinstance(decision, Deny):
            return _error(call, decision.message)
        if isinstance(decision, Reject):
            return Rejected(decision.message)
        if decision.updated_input is not None:
            error = tool.validate(decision.updated_input)
            if error is not None:
                return _error(call, invalid_input_message(tool.name, error))
            input = plain_json(decision.updated_input)
    call.started = True
    try:
        value = await tool.run(input, ctx)
    except Exception as exc:
        return _error(call, raised_message(tool.name, exc), failed=True)
    read = read_return(value)
    if read is None:
        return _error(call, bad_return_message(block.name, value), failed=True)
    content, is_error, modifier = read
    return Ran(ToolResult(block.id, content, is_error, None, True), modifier, failed=is_error)


def _error(call: Call, message: str, *, failed: bool = False) -> Ran:
    return Ran(ToolResult(call.block.id, message, True, None, call.started), failed=failed)
