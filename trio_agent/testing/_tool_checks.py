"""Check a :class:`~trio_agent.testing.ToolRun`: the executor's invariants, with
each call's facts from the user's tool declarations, plus what a real tool's
results must look like."""

from __future__ import annotations

from typing import Any, get_args

import trio

from .._executor import ToolResult, read_return, sendable_blocks
from .._messages import ContentBlock
from .._permissions import Deny
from ._checks import CallFacts, check, check_record
from ._tool_runs import ToolRun

__all__ = ["check_tool_run"]

_BLOCK_TYPES: tuple[type, ...] = get_args(ContentBlock)


def check_tool_run(run: ToolRun) -> None:
    """Check the invariants a run of real tools must keep, whatever the timing.

    - pairing: exactly one result per added ``tool_use`` across ``results`` and
      ``drain()``, none for a call never added; ``started`` tells the truth;
    - order: results in ``add_tool`` order;
    - exclusivity by the tools' declared safety for that input (no non-safe call
      overlaps any other) and the concurrency cap;
    - cascade scope (a ``cancels_siblings_on_error`` tool's error cancels only
      its batch), escalation (``Reject`` cancels the turn), interrupt spares
      ``"block"`` tools, discard, turn cancellation;
    - progress of a call before its result;
    - every result well formed: content a str or content blocks; an unknown
      tool, an invalid input or a Deny is an error and the tool never ran; a
      tool that raised gives an error naming the exception; a tool that
      returned gives exactly what it returned;
    - statistics add up and no tool task is left after the block.

    Raises:
        InvariantViolation: with a message saying which invariant and call.
    """
    record = run.record()
    check_record(record)
    for i, facts in enumerate(record.facts):
        result = record.result(i)
        if result is not None:
            _check_result(run, i, facts, result)


def _check_result(run: ToolRun, i: int, facts: CallFacts, result: ToolResult) -> None:
    where = f"call {i} ({run.batch.calls[i].block.name})"
    content = result.content
    check(
        isinstance(content, str) or all(isinstance(b, _BLOCK_TYPES) for b in content),
        f"{where}: result content is neither text nor content blocks: {content!r}",
    )
    ran = bool(run.of(i, "started"))
    if not facts.known:
        check(
            result.is_error and result.abort_reason is None and not ran,
            f"{where}: an unknown tool must get a plain error result, got {result}",
        )
        check(
            isinstance(content, str) and run.batch.calls[i].block.name in content,
            f"{where}: the unknown-tool error does not name the tool: {content!r}",
        )
        return
    if result.abort_reason is not None:
        check(result.is_error, f"{where}: an aborted call's result is not an error")
        return
    if not facts.valid:
        check(result.is_error and not ran, f"{where}: an invalid input must not run the tool")
        return
    decision = run.decisions[i]
    if isinstance(decision, Deny):
        check(
            result.is_error and not ran and content == decision.message,
            f"{where}: a Deny must give its message as an error, got {result}",
        )
        return
    stopped = run.of(i, "stopped")
    if not stopped:
        return  # never ran: e.g. the permission check failed
    _check_returned(where, stopped[0].detail, result)


def _check_returned(where: str, outcome: Any, result: ToolResult) -> None:
    if isinstance(outcome, trio.Cancelled):
        return  # cancelled by something else and the executor's result stands
    if isinstance(outcome, BaseException):
        name = type(outcome).__name__
        check(
            result.is_error and isinstance(result.content, str) and name in result.content,
            f"{where}: the tool raised {name} but the result does not say so: {result}",
        )
        return
    read = read_return(outcome)
    if read is None:
        check(
            result.is_error, f"{where}: the tool returned {outcome!r}, not a result, yet no error"
        )
        return
    content, is_error, modifier = read
    if not isinstance(content, str):
        sendable = sendable_blocks(content)
        if isinstance(sendable, str):  # blocks no request can carry: an error result
            check(result.is_error, f"{where}: the tool returned unsendable blocks, yet no error")
            return
        content = sendable
    if modifier is not None:
        return  # a raising context modifier turns the result into an error
    check(
        (result.content, result.is_error) == (content, is_error),
        f"{where}: the tool returned {(content, is_error)!r} but the result is {result}",
    )
