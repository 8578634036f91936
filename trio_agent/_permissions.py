"""Permission decisions: what ``can_use_tool(tool, input, ctx)`` may answer.

- :class:`Allow` runs the tool, with ``updated_input`` instead of the model's input
  when given;
- :class:`Deny` answers the call with an error result; the turn goes on;
- :class:`Reject` means the user refused: the executor cancels the turn scope with
  ``AbortReason.PERMISSION_REJECTED`` and the loop ends the turn.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeAlias

import attrs

from ._tools import Tool, ToolContext

__all__ = ["Allow", "CanUseTool", "Deny", "PermissionDecision", "Reject"]


@attrs.frozen
class Allow:
    """Run the tool (with ``updated_input`` when given)."""

    updated_input: Mapping[str, Any] | None = None


@attrs.frozen
class Deny:
    """Do not run the tool; the model reads *message* as an error result."""

    message: str = "Permission to use this tool was denied."


@attrs.frozen
class Reject:
    """The user refused: do not run the tool and end the turn."""

    message: str = "The user rejected this tool use."


PermissionDecision: TypeAlias = Allow | Deny | Reject
CanUseTool: TypeAlias = Callable[
    [Tool, Mapping[str, Any], ToolContext], Awaitable[PermissionDecision]
]
