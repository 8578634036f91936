"""Permission decisions: what ``can_use_tool(tool, input, ctx)`` may answer.

- :class:`Allow` runs the tool, with ``updated_input`` instead of the model's input
  when given;
- :class:`Deny` answers the call with an error result; the turn goes on;
- :class:`Reject` means the user refused: the executor cancels the turn scope with
  ``AbortReason.PERMISSION_REJECTED`` and the loop ends the turn;
- :class:`Defer` asks later: the call is neither run nor answered; the turn ends
  with reason ``awaiting_approval`` once the answer's other calls are done, and a
  later ``Session.submit(approvals={tool_use_id: Allow() | Deny(...)})`` runs or
  answers it and goes on.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeAlias

import attrs

from ._tools import Tool, ToolContext

__all__ = ["Allow", "CanUseTool", "Defer", "Deny", "PermissionDecision", "Reject"]


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


@attrs.frozen
class Defer:
    """Ask later: do not run the tool yet; the turn ends ``awaiting_approval``.

    The call waits, unanswered, in the history's last answer until the user
    decides (``Session.submit(approvals=...)``). If the turn ends another way
    first (an abort, an error), the call is answered with *message* as an error
    result instead, so the history stays valid.
    """

    message: str = "Not run: this tool call was awaiting the user's approval when the turn ended."


PermissionDecision: TypeAlias = Allow | Deny | Reject | Defer
CanUseTool: TypeAlias = Callable[
    [Tool, Mapping[str, Any], ToolContext], Awaitable[PermissionDecision]
]
