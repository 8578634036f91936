"""The streaming tool executor: run tool calls while the model is still talking.

Structure (DESIGN.md, Layer 2)::

    turn scope (the caller's)              cancelled → user_interrupted
      └─ executor nursery = batch scope    Reject → turn scope cancelled (permission_rejected)
           ├─ tool scope (one per call)    sibling_error · interrupt · streaming_fallback
           └─ ...

:func:`open_tool_executor` (here) owns the batch scope; the bookkeeping is the
synchronous :class:`ToolExecutor` (:mod:`._tool_executor`), and what each tool's
task does is in :mod:`._tool_task`.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterable
from contextlib import asynccontextmanager
from typing import Any

import trio

from .._permissions import CanUseTool
from .._tools import Tool
from ._tool_executor import TOOL_TASK_PREFIX as TOOL_TASK_PREFIX
from ._tool_executor import ToolExecutor as ToolExecutor

__all__ = ["TOOL_TASK_PREFIX", "ToolExecutor", "open_tool_executor"]


@asynccontextmanager
async def open_tool_executor(
    tools: Iterable[Tool],
    *,
    turn_scope: trio.CancelScope | None = None,
    can_use_tool: CanUseTool | None = None,
    max_concurrency: int = 10,
    context: Any = None,
) -> AsyncGenerator[ToolExecutor, None]:
    """Open a streaming tool executor: tools start while the model still streams.

    Args:
        tools: the tools the model may call (names must be distinct).
        turn_scope: the cancel scope of the turn. ``Reject`` from ``can_use_tool``
            cancels it (``permission_rejected``); without one, a rejection cancels
            every call of this executor instead.
        can_use_tool: ``async (tool, input, ctx) -> Allow | Deny | Reject``,
            consulted inside the call's slot, before the tool runs.
        max_concurrency: the most tools running at once.
        context: the shared context value; tools see it as ``ctx.context`` and
            non-safe tools may change it with ``ToolOutput.context_modifier``.

    Scheduling: a call starts as soon as nothing runs, or it and everything
    running are concurrency-safe, with fewer than *max_concurrency* running.
    Calls are considered in order; a non-safe call that cannot start holds back
    every later one.

    When the block ends normally it waits for the remaining tools (as if
    ``finish()`` had been called). When it ends by an exception or cancellation,
    the remaining tools are cancelled. No task outlives the block.

    Example::

        with trio.CancelScope() as turn:
            async with trio_agent.open_tool_executor(tools, turn_scope=turn) as executor:
                for block in tool_use_blocks:      # as they stream in
                    executor.add_tool(block)
                executor.finish()
                async for result in executor.results:
                    send_back(result.to_block())
        for result in executor.drain():            # what was not received
            send_back(result.to_block())
    """
    executor = ToolExecutor(
        tools,
        turn_scope=turn_scope,
        can_use_tool=can_use_tool,
        max_concurrency=max_concurrency,
        context=context,
    )
    body_exc: BaseException | None = None
    try:
        async with trio.open_nursery() as nursery:
            executor._nursery = nursery  # pyright: ignore[reportPrivateUsage]
            try:
                yield executor
            except BaseException as exc:
                body_exc = exc
                executor._abort_all(executor._outer_reason(exc), None)  # pyright: ignore[reportPrivateUsage]
                raise
            executor.finish()
    except BaseExceptionGroup as group:
        # Tool tasks never raise anything but Cancelled, so this nursery is an
        # implementation detail: give back the body's own exception, or a
        # single Cancelled, rather than a group.
        _cancelled, rest = group.split(trio.Cancelled)
        if rest is None:
            raise body_exc if isinstance(body_exc, trio.Cancelled) else _first_leaf(group)  # noqa: B904
        if body_exc is not None and rest.split(lambda e: e is body_exc)[1] is None:
            raise body_exc from body_exc.__cause__
        raise
    finally:
        executor._close(body_exc)  # pyright: ignore[reportPrivateUsage]


def _first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    first = group.exceptions[0]
    return _first_leaf(first) if isinstance(first, BaseExceptionGroup) else first
