"""One tool call: what the executor tracks about it, and the steps of its task.

The steps around a call: checking its input (and so its concurrency safety);
once it has its slot, :func:`prepare` (the tool, its input and context) and
:func:`permit` (ask ``can_use_tool``); after the tool ran, :func:`returned` or
:func:`raised` (read what it gave back). They touch no executor state: each
answers with a :class:`Runnable`, a :class:`Ran` or a :class:`Rejected`, and the
executor does its bookkeeping in the same task step. The executor's task awaits
the tool itself, so a cancelled tool unwinds straight into it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypeAlias, cast

import attrs
import trio

from .._exceptions import excerpt
from .._hooks import Ask, PostToolUse, PreToolUse, ToolCall
from .._messages import ContentBlock, OpaqueBlock, TextBlock, ToolUseBlock
from .._permissions import Allow, CanUseTool, Defer, Deny, Reject
from .._tools import (
    ContextModifier,
    Tool,
    ToolContext,
    ToolOutput,
    depth_error,
    plain_json,
    schema_error,
)
from ._results import (
    ToolResult,
    bad_return_message,
    cap_content,
    describe,
    invalid_input_message,
    permission_error_message,
    raised_message,
    sendable_blocks,
    summarize_call,
    unsendable_message,
)

__all__ = [
    "Call",
    "CallState",
    "Ran",
    "Rejected",
    "Runnable",
    "check_input",
    "hook_failed",
    "permit",
    "post_tool",
    "pre_tool",
    "prepare",
    "raised",
    "read_return",
    "returned",
]


#: The block types the API accepts in ``tool_result`` content (OpaqueBlock: by type).
RESULT_BLOCK_TYPES = frozenset({"text", "image", "document", "search_result"})

CallState: TypeAlias = Literal["queued", "executing", "finished"]


@attrs.define(eq=False)
class Call:
    """One added ``tool_use`` and where it is in its life."""

    block: ToolUseBlock
    tool: Tool | None
    safe: bool
    input_error: str | None
    #: The validated input as plain JSON (see plain_json), converted once in
    #: check_input(); None for an unknown tool or an invalid input.
    input: Mapping[str, Any] | None = None
    state: CallState = "queued"
    started: bool = False  # tool.run() was called
    result: ToolResult | None = None
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    #: Set once the call is past its permission check and ``pre_tool_use`` hook
    #: (or finished): what it runs with is known.
    prepared: trio.Event = attrs.field(factory=trio.Event)
    #: The input a ``pre_tool_use`` hook replaced the model's with, if it did.
    rewritten: Mapping[str, Any] | None = None

    def summary(self) -> str:
        return summarize_call(self.block.name, self.block.input)


def check_input(
    tool: Tool, block: ToolUseBlock
) -> tuple[str | None, bool, Mapping[str, Any] | None]:
    """The input's error (None if valid), whether the call is concurrency-safe, and
    the valid input as plain JSON (None if invalid).

    Safety is decided on the validated input; an invalid input, or a safety
    check that raises, makes the call unsafe. The input is converted once
    (:func:`plain_json`): the same object is validated, checked for safety and
    given to the tool.
    """
    if block.invalid_input is not None:
        return f"the input is not valid JSON: {excerpt(block.invalid_input)}", False, None
    error, input = validated(tool, block.input)
    if input is None:
        return error, False, None
    return None, tool.is_concurrency_safe(input), input


def validated(tool: Tool, raw: Mapping[str, Any]) -> tuple[str | None, Mapping[str, Any] | None]:
    """(None, *raw* as plain JSON) when *raw* is a valid input of *tool*, else (the
    error, None). Whatever gives a tool its input goes through here: the model's
    block and a permission check's ``updated_input`` alike."""
    error = depth_error(raw)
    if error is not None:
        return error, None
    input: Mapping[str, Any] = plain_json(raw)  # converted once: validated and run
    error = schema_error(tool, input)
    return (error, None) if error is not None else (None, input)


def _result_block(item: object) -> bool:
    if isinstance(item, TextBlock):
        return True
    return isinstance(item, OpaqueBlock) and item.type in RESULT_BLOCK_TYPES


def _culprit(content: Any) -> tuple[object] | None:
    """The first item of a returned list that is not a result block (in a 1-tuple,
    as it may be None), or None if there is none."""
    if isinstance(content, list | tuple):
        for item in cast("Sequence[object]", content):
            if not _result_block(item):
                return (item,)
    return None


def _describe_return(value: Any) -> str:
    """What is wrong with a tool's return, by type: ``a ToolOutput holding bytes``."""
    if isinstance(value, ToolOutput):
        return f"a ToolOutput holding {_describe_return(value.content)}"
    culprit = _culprit(value)
    if culprit is not None:
        return f"a {type(value).__name__} holding {type(culprit[0]).__name__}"
    return type(value).__name__


def read_return(
    value: Any,
) -> tuple[str | tuple[ContentBlock, ...], bool, ContextModifier | None] | None:
    """What a tool's ``run`` returned as (content, is_error, context modifier), or
    None if it is not a str, a list of result blocks (text, image, document,
    search_result: what the API accepts as ``tool_result`` content) or a ToolOutput
    of one (bytes, a ToolUseBlock, a ToolResultBlock... are not)."""
    if isinstance(value, ToolOutput):
        content: Any = value.content
        is_error, modifier = value.is_error, value.context_modifier
    else:
        content, is_error, modifier = value, False, None
    if isinstance(content, str):
        return content, is_error, modifier
    if not isinstance(content, list | tuple) or _culprit(content) is not None:
        return None
    return tuple(cast("Sequence[ContentBlock]", content)), is_error, modifier


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


@attrs.frozen
class Runnable:
    """The call may run: its tool, the input and context it runs with, and its
    deadline (seconds, or None)."""

    tool: Tool
    input: Mapping[str, Any]
    ctx: ToolContext
    limit: float | None


def prepare(
    call: Call, *, context: Any, report: Callable[[Any], None], tool_timeout: float | None
) -> Ran | Runnable:
    """The call's tool, input, context and deadline (the tool's own ``timeout``,
    else *tool_timeout*), or its answer if its input is invalid."""
    tool, block, input = call.tool, call.block, call.input
    assert tool is not None
    if call.input_error is not None:
        return _error(call, invalid_input_message(tool.name, call.input_error))
    assert input is not None, "a valid call has its plain input"
    ctx = ToolContext(block.id, tool.name, context=context, report=report)
    limit = tool.timeout if tool.timeout is not None else tool_timeout
    return Runnable(tool, input, ctx, limit)


async def permit(
    call: Call, runnable: Runnable, can_use_tool: CanUseTool
) -> Ran | Rejected | Runnable:
    """Ask ``can_use_tool``: the call runs (maybe with an updated input), or is
    answered (denied, deferred, its check failed) or rejected."""
    tool = runnable.tool
    try:
        decision = await can_use_tool(tool, runnable.input, runnable.ctx)
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
        result = ToolResult(call.block.id, decision.message, is_error=True, deferred=True)
        return Ran(result)
    if decision.updated_input is not None:
        error, input = validated(tool, decision.updated_input)
        if input is None:
            return _error(call, invalid_input_message(tool.name, error or "invalid"))
        return attrs.evolve(runnable, input=input)
    return runnable


def hook_failed(call: Call, hook: str, what: str) -> Ran:
    """The error result of a call whose *hook* failed (*what*: "raised X: ...")."""
    return _error(call, f"Error: the {hook} hook of {call.block.name} {what}", failed=True)


def _hook_raised(call: Call, hook: str, exc: Exception) -> Ran:
    return hook_failed(call, hook, f"raised {type(exc).__name__}: {describe(exc)}")


async def pre_tool(call: Call, runnable: Runnable, hook: PreToolUse) -> Ran | Runnable:
    """Ask the ``pre_tool_use`` hook: the call runs (maybe with the input it gave),
    or is answered (denied, deferred by ``Ask``, the hook failed)."""
    try:
        decision = await hook(ToolCall(runnable.tool, runnable.input, runnable.ctx))
    except Exception as exc:
        return _hook_raised(call, "pre_tool_use", exc)
    if decision is None:
        return runnable
    if isinstance(decision, Deny):
        return _error(call, decision.message)
    if isinstance(decision, Ask):
        result = ToolResult(call.block.id, decision.message, is_error=True, deferred=True)
        return Ran(result)
    if isinstance(decision, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
        error, input = validated(runnable.tool, decision)
        if input is None:
            return _error(call, invalid_input_message(runnable.tool.name, error or "invalid"))
        return attrs.evolve(runnable, input=input)
    return hook_failed(
        call,
        "pre_tool_use",
        f"returned a {type(decision).__name__}, not None, Deny, Ask or an input",
    )


async def post_tool(
    call: Call,
    runnable: Runnable,
    ran: Ran,
    hook: PostToolUse,
    *,
    name: str,
    max_result_chars: int,
) -> Ran:
    """Show *ran*'s result to the ``post_tool_use`` (or ``post_tool_failure``) hook:
    what it returns instead (read as a tool's return, capped as one) replaces it."""
    try:
        value = await hook(ToolCall(runnable.tool, runnable.input, runnable.ctx), ran.result)
    except Exception as exc:
        return _hook_raised(call, name, exc)
    if value is None:
        return ran
    read = read_return(value)
    if read is None:
        return hook_failed(call, name, f"returned {_describe_return(value)}, not a tool result")
    content, is_error, _modifier = read
    if not isinstance(content, str):
        sendable = sendable_blocks(content)
        if isinstance(sendable, str):
            return hook_failed(call, name, f"returned a result that cannot be sent ({sendable})")
        content = sendable
    tool = runnable.tool
    limit = tool.max_result_chars if tool.max_result_chars is not None else max_result_chars
    result = ToolResult(call.block.id, cap_content(content, limit), is_error=is_error, started=True)
    return Ran(result, ran.modifier, failed=ran.failed or is_error)


def raised(call: Call, runnable: Runnable, exc: Exception) -> Ran:
    """The answer of a tool that raised *exc*."""
    return _error(call, raised_message(runnable.tool.name, exc), failed=True)


def returned(
    call: Call, runnable: Runnable, value: Any, *, timed_out: bool, max_result_chars: int
) -> Ran:
    """The answer of a tool that returned *value* (or ran past its deadline); its
    text is capped at the tool's ``max_result_chars``, else *max_result_chars*."""
    tool = runnable.tool
    if timed_out:
        return _error(call, f"Error: {tool.name} timed out after {runnable.limit:g} s", failed=True)
    read = read_return(value)
    if read is None:
        return _error(
            call,
            bad_return_message(call.block.name, _describe_return(value)),
            failed=True,
        )
    content, is_error, modifier = read
    if not isinstance(content, str):
        sendable = sendable_blocks(content)
        if isinstance(sendable, str):
            return _error(call, unsendable_message(call.block.name, sendable), failed=True)
        content = sendable
    limit = tool.max_result_chars if tool.max_result_chars is not None else max_result_chars
    content = cap_content(content, limit)
    result = ToolResult(call.block.id, content, is_error=is_error, started=True)
    return Ran(result, modifier, failed=is_error)


def _error(call: Call, message: str, *, failed: bool = False) -> Ran:
    return Ran(
        ToolResult(call.block.id, message, is_error=True, started=call.started), failed=failed
    )
