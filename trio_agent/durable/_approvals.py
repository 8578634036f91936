"""Approvals on the wire: ``{tool_use_id: Allow() | Deny(...) | ...}`` as JSON, so a
client in any process can enqueue the decisions a worker applies."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from .. import Allow, Defer, Deny, PermissionDecision, Reject
from ._errors import DurableError

__all__ = ["approvals_from_json", "approvals_to_json"]


def approvals_to_json(approvals: Mapping[str, PermissionDecision]) -> dict[str, Any]:
    """*approvals* as JSON-ready data.

    Raises:
        DurableError: a key is not a string, or a value not a permission decision.
    """
    out: dict[str, Any] = {}
    for key, decision in approvals.items():
        if not isinstance(key, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise DurableError(f"a tool_use id is a string, not {type(key).__name__}")
        if isinstance(decision, Allow):
            updated = None if decision.updated_input is None else dict(decision.updated_input)
            out[key] = {"decision": "allow", "updated_input": updated}
        elif isinstance(decision, Deny | Reject | Defer):  # pyright: ignore[reportUnnecessaryIsInstance]
            out[key] = {"decision": type(decision).__name__.lower(), "message": decision.message}
        else:
            raise DurableError(
                f"the approval of {key!r:.80} is a {type(decision).__name__},"
                " not Allow, Deny, Reject or Defer"
            )
    return out


def approvals_from_json(data: Any) -> dict[str, PermissionDecision]:
    """The decisions :func:`approvals_to_json` wrote.

    Raises:
        DurableError: *data* is not that JSON.
    """
    if not isinstance(data, Mapping):
        raise DurableError(f"approvals are a JSON object, not {type(data).__name__}")
    out: dict[str, PermissionDecision] = {}
    for key, item in cast(Mapping[Any, Any], data).items():
        if not isinstance(item, Mapping):
            raise DurableError(f"the approval of {key!r:.80} is malformed")
        entry = cast(Mapping[str, Any], item)
        kind = entry.get("decision")
        if kind == "allow":
            updated = entry.get("updated_input")
            if updated is not None and not isinstance(updated, Mapping):
                raise DurableError(f"the approval of {key!r:.80} has a bad updated_input")
            out[str(key)] = Allow(cast(Mapping[str, Any] | None, updated))
        elif kind in ("deny", "reject", "defer") and isinstance(entry.get("message"), str):
            cls = {"deny": Deny, "reject": Reject, "defer": Defer}[kind]
            out[str(key)] = cls(entry["message"])
        else:
            raise DurableError(f"the approval of {key!r:.80} is malformed")
    return out
