"""The :class:`ToolExecutor`: scheduling, results and cancellation bookkeeping.

All of it is synchronous (it happens in ``add_tool``, ``interrupt``, ``discard``
and when a tool task ends); the only async code is each tool's own task, whose
work is in :mod:`._tool_task`. So a synthetic result never needs an ``await``
and exists even when the turn scope was cancelled. :func:`open_tool_executor`
(in :mod:`._executor`) makes one and owns its nursery.
"""

from __future__ import annotations

import contextlib
import math
from collections import deque
from collections.abc import Iterable
from functools import partial
from typing import Any, final

import trio

from .._exceptions import ExecutorClosedError, ToolDefinitionError
from .._messages import ToolUseBlock
from .._permissions import CanUseTool
from .._tools import Tool
from ._call import Call as _Call
from ._call import CallState as _State
from ._call import check_input
from ._result_channel import ResultChannel
from ._results import (
    AbortReason,
    ExecutorStatistics,
    ToolFinished,
    ToolProgress,
    ToolResult,
    aborted_message,
    unknown_tool_message,
)
from ._tool_task import Rejected, execute

__all__ = ["TOOL_TASK_PREFIX", "ToolExecutor"]

#: Every tool task's name starts with this (the harness counts them).
TOOL_TASK_PREFIX = "trio_agent tool"


@final
class ToolExecutor:
    """Runs tool calls as they are added; made by :func:`open_tool_executor`.

    Every call added gets exactly one :class:`ToolResult`, delivered on
    :attr:`results` in ``add_tool`` order, or returned by :meth:`drain` after the
    ``async with`` block.
    """

    def __init__(
        self,
        tools: Iterable[Tool],
        *,
        turn_scope: trio.CancelScope | None,
        can_use_tool: CanUseTool | None,
        max_concurrency: int,
        context: Any,
    ) -> None:
        by_name: dict[str, Tool] = {}
        for t in tools:
            if not isinstance(t, Tool):  # pyright: ignore[reportUnnecessaryIsInstance]
                raise TypeError(f"tools must be Tool values, not {type(t).__name__}")
            if t.name in by_name:
                raise ToolDefinitionError(f"two tools are named {t.name!r}")
            by_name[t.name] = t
        if isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError("max_concurrency must be an int")
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, not {max_concurrency}")
        self._tools = by_name
        self._turn_scope = turn_scope
        self._can_use_tool = can_use_tool
        self._max_concurrency = max_concurrency
        self._context = context
        self._nursery: trio.Nursery | None = None

        self._calls: list[_Call] = []
        self._ids: set[str] = set()
        # Queued calls in add order. Only the head can ever start (a safe call
        # waits only for the cap, like every call after it; a non-safe one holds
        # back the rest), so this is a FIFO; a call answered while queued stays
        # here until it reaches the head (no O(n) removal).
        self._queue: deque[_Call] = deque()
        self._slots = 0  # tool tasks alive
        self._unsafe_slots = 0
        self._peak = 0
        self._counts = {"queued": 0, "executing": 0, "finished": 0}
        self._delivered = 0  # calls[:_delivered] are pushed to the results channel

        self._adding_closed = False  # finish() or discard() was called
        self._discarded = False
        self._exited = False
        self._interrupted = False
        # A sticky abort: every unfinished call, and every call added later, gets it.
        self._abort: tuple[AbortReason, str | None] | None = None

        self._results = ResultChannel()
        send, receive = trio.open_memory_channel[ToolProgress | ToolFinished](math.inf)
        self._progress_send: trio.MemorySendChannel[ToolProgress | ToolFinished] = send
        self._progress_receive: trio.MemoryReceiveChannel[ToolProgress | ToolFinished] = receive

    # -- public API ---------------------------------------------------------------

    @property
    def results(self) -> trio.abc.ReceiveChannel[ToolResult]:
        """Results in ``add_tool`` order; ends after ``finish()`` once all are in."""
        return self._results

    @property
    def progress(self) -> trio.abc.ReceiveChannel[ToolProgress | ToolFinished]:
        """Progress reports and a :class:`ToolFinished` per call, as they happen.

        Unbounded: a tool reporting progress never waits. Items nobody reads stay
        in memory until the executor is dropped, so read this channel (or
        ``aclose()`` it: later items are then discarded) when tools report a lot.
        """
        return self._progress_receive

    @property
    def context(self) -> Any:
        """The shared context, after the context modifiers of the non-safe tools
        that have finished, applied in tool order."""
        return self._context

    def statistics(self) -> ExecutorStatistics:
        """How many calls are queued, executing and finished, and the peak
        number of tools that ran at once."""
        return ExecutorStatistics(
            queued=self._counts["queued"],
            executing=self._counts["executing"],
            finished=self._counts["finished"],
            peak_concurrency=self._peak,
        )

    def add_tool(self, block: ToolUseBlock) -> None:
        """Add one ``tool_use`` block; it starts at once if it may.

        Synchronous and never blocks. An unknown tool is answered at once with an
        error naming the known tools.

        Raises:
            ExecutorClosedError: after ``finish()``, ``discard()`` or the block's end.
            TypeError: *block* is not a :class:`ToolUseBlock`.
            ValueError: a call with the same id was already added.
        """
        if not isinstance(block, ToolUseBlock):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"add_tool() takes a ToolUseBlock, not {type(block).__name__}")
        if self._adding_closed or self._exited:
            why = "discard()" if self._discarded else "finish()"
            raise ExecutorClosedError(f"cannot add tool {block.name!r} ({block.id}) after {why}")
        if block.id in self._ids:
            raise ValueError(f"tool_use id {block.id!r} was already added")
        self._ids.add(block.id)
        self._notice_turn_cancelled()

        tool = self._tools.get(block.name)
        if tool is None:
            call = self._new_call(block, None, safe=False, input_error=None)
            self._finish(
                call,
                ToolResult(block.id, unknown_tool_message(block.name, list(self._tools)), True),
            )
            return
        error, safe = check_input(tool, block)
        call = self._new_call(block, tool, safe=safe, input_error=error)
        if self._abort is not None:
            self._abort_call(call, *self._abort)
        elif self._interrupted and tool.interrupt_behavior == "cancel":
            self._abort_call(call, AbortReason.INTERRUPT, None)
        else:
            self._queue.append(call)
            self._pump()

    def finish(self) -> None:
        """No more tools will be added: ``results`` ends once all are received.

        Idempotent; also done when the ``async with`` block ends normally.
        """
        self._adding_closed = True
        self._maybe_end()

    def interrupt(self) -> None:
        """The user typed a new message: cancel the calls whose tool has
        ``interrupt_behavior="cancel"`` (running, queued and added later), with
        :attr:`AbortReason.INTERRUPT`; ``"block"`` tools run on."""
        if self._exited:
            return
        self._interrupted = True
        cancel = [
            call
            for call in self._unfinished()
            if call.tool is not None and call.tool.interrupt_behavior == "cancel"
        ]
        self._abort_many(cancel, AbortReason.INTERRUPT, None)
        self._pump()

    def skip_unstarted(self, message: str) -> int:
        """Answer every call whose tool has not started with *message*; it never starts.

        For an answer that must not be acted on further (the model's answer
        ended with a ``refusal``): queued calls, and calls still waiting for
        ``can_use_tool``, get an error result with *message*, ``started=False``
        and ``abort_reason=None`` (the executor did not abort them for one of
        the :class:`AbortReason` reasons; the caller chose not to run them).
        Tools already running are left alone. Not sticky: a call added later
        is scheduled as usual.

        Returns:
            How many calls were skipped.
        """
        if self._exited:
            return 0
        skipped = [c for c in self._unfinished() if not c.started]
        for call in skipped:
            if call.state == "executing":  # waiting for can_use_tool (or its first step)
                call.scope.cancel(reason="skipped")
            self._finish(call, ToolResult(call.block.id, message, True, None, False), deliver=False)
        self._deliver()
        self._pump()
        return len(skipped)

    def discard(self) -> None:
        """Streaming fallback: throw this executor's work away.

        Queued calls never start, running ones are cancelled
        (:attr:`AbortReason.STREAMING_FALLBACK`, with ``started`` telling which had
        begun), ``results`` ends at once and ``add_tool`` raises from now on. Every
        result not received is returned by :meth:`drain` after the block.
        """
        if self._discarded or self._exited:
            return
        self._discarded = True
        self._adding_closed = True
        self._results.end(cut=True)
        self._abort_many(self._unfinished(), AbortReason.STREAMING_FALLBACK, None)
        self._maybe_end()

    def drain(self) -> list[ToolResult]:
        """After the ``async with`` block: every result not received, in order.

        Together with what ``results`` delivered, that is exactly one result per
        call added.

        Raises:
            RuntimeError: the block has not ended yet.
        """
        if not self._exited:
            raise RuntimeError("drain() is for after the executor's async with block")
        return self._results.take_all()

    # -- bookkeeping (all synchronous) --------------------------------------------------

    def _new_call(
        self, block: ToolUseBlock, tool: Tool | None, *, safe: bool, input_error: str | None
    ) -> _Call:
        call = _Call(block, tool, safe, input_error)
        self._calls.append(call)
        self._counts["queued"] += 1
        return call

    def _unfinished(self) -> list[_Call]:
        return [c for c in self._calls[self._delivered :] if c.result is None]

    def _set_state(self, call: _Call, state: _State) -> None:
        self._counts[call.state] -= 1
        self._counts[state] += 1
        call.state = state

    def _pump(self) -> None:
        """Start every queued call that may start, in add order."""
        self._notice_turn_cancelled()
        queue = self._queue
        while queue and self._slots < self._max_concurrency and self._unsafe_slots == 0:
            call = queue[0]
            if call.result is not None:  # answered while queued
                queue.popleft()
            elif self._slots == 0 or call.safe:
                queue.popleft()
                self._start(call)
            else:
                break  # a non-safe call keeps its place: nothing after it may pass

    def _start(self, call: _Call) -> None:
        assert self._nursery is not None
        self._set_state(call, "executing")
        self._slots += 1
        self._unsafe_slots += not call.safe
        self._peak = max(self._peak, self._slots)
        self._nursery.start_soon(
            self._run_call, call, name=f"{TOOL_TASK_PREFIX} {call.block.name} {call.block.id}"
        )

    def _finish(self, call: _Call, result: ToolResult, *, deliver: bool = True) -> None:
        """Make *result* final and deliver what is in order (unless the caller
        finishes many calls at once and delivers once after them)."""
        assert call.result is None, "a call is finished once"
        call.result = result
        self._set_state(call, "finished")
        self._send_progress(ToolFinished(result.tool_use_id, result.is_error, result.abort_reason))
        if deliver:
            self._deliver()

    def _deliver(self) -> None:
        """Push the results that are now in order; wake the receiver once."""
        calls, start = self._calls, self._delivered
        ready: list[ToolResult] = []
        while start + len(ready) < len(calls):
            result = calls[start + len(ready)].result
            if result is None:
                break
            ready.append(result)
        if ready:
            self._results.push_many(ready)
            self._delivered = start + len(ready)
        self._maybe_end()

    def _abort_call(
        self, call: _Call, reason: AbortReason, culprit: str | None, *, deliver: bool = True
    ) -> None:
        assert call.result is None, "only unfinished calls are aborted"
        if call.state == "executing":
            call.scope.cancel(reason=reason)
        message = aborted_message(reason, started=call.started, culprit=culprit)
        result = ToolResult(call.block.id, message, True, reason, call.started)
        self._finish(call, result, deliver=deliver)

    def _abort_many(self, calls: Iterable[_Call], reason: AbortReason, culprit: str | None) -> None:
        for call in calls:
            self._abort_call(call, reason, culprit, deliver=False)
        self._deliver()

    def _abort_all(self, reason: AbortReason, culprit: str | None) -> None:
        """A sticky abort: all unfinished calls now, and every call added later."""
        if self._abort is None or self._abort[0] is AbortReason.SIBLING_ERROR:
            self._abort = (reason, culprit)
        self._abort_many(self._unfinished(), reason, culprit)

    def _outer_reason(self, exc: BaseException | None) -> AbortReason:
        if self._abort is not None and self._abort[0] is AbortReason.PERMISSION_REJECTED:
            return AbortReason.PERMISSION_REJECTED
        if isinstance(exc, trio.Cancelled) and exc.reason == AbortReason.PERMISSION_REJECTED:
            return AbortReason.PERMISSION_REJECTED
        return AbortReason.USER_INTERRUPTED

    def _notice_turn_cancelled(self) -> None:
        # The turn may be cancelled while no tool task is there to see it: never
        # start (or accept) a call into a cancelled turn.
        if (
            (self._abort is None or self._abort[0] is AbortReason.SIBLING_ERROR)
            and self._turn_scope is not None
            and self._turn_scope.cancel_called
        ):
            self._abort_all(self._outer_reason(None), None)

    def _send_progress(self, item: ToolProgress | ToolFinished) -> None:
        # Nobody listens any more: progress is advisory, drop it.
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            self._progress_send.send_nowait(item)

    def _report(self, call: _Call, data: Any) -> None:
        if call.result is None:  # never progress after the result
            self._send_progress(ToolProgress(call.block.id, data))

    def _maybe_end(self) -> None:
        if self._adding_closed and self._counts["finished"] == len(self._calls):
            self._results.end()
            self._progress_send.close()

    # -- the tool task --------------------------------------------------------------

    async def _run_call(self, call: _Call) -> None:
        try:
            with call.scope:
                # Never start a tool into an already cancelled scope.
                await trio.lowlevel.checkpoint_if_cancelled()
                outcome = await execute(
                    call,
                    can_use_tool=self._can_use_tool,
                    context=self._context,
                    report=partial(self._report, call),
                )
                if isinstance(outcome, Rejected):
                    self._reject(call, outcome.message)
                else:
                    if outcome.failed:
                        self._cascade(call)
                    self._complete(call, outcome.result, outcome.modifier)
        except BaseException as exc:  # an enclosing scope: turn, or the batch; re-raised
            self._abort_all(self._outer_reason(exc), None)
            raise
        finally:
            self._slots -= 1
            self._unsafe_slots -= not call.safe
            self._pump()

    def _complete(self, call: _Call, result: ToolResult, modifier: Any) -> None:
        if call.result is not None:
            return  # aborted while finishing: the synthetic result stands
        if modifier is not None and not call.safe:
            try:
                self._context = modifier(self._context)
            except Exception as exc:
                result = ToolResult(
                    call.block.id,
                    f"Error: the context modifier of {call.block.name} raised "
                    f"{type(exc).__name__}: {exc}",
                    True,
                    None,
                    True,
                )
        self._finish(call, result)

    def _cascade(self, call: _Call) -> None:
        """A failed call of a cascading tool cancels every other call of the batch."""
        if call.tool is None or not call.tool.cancels_siblings_on_error:
            return
        if call.result is not None or self._abort is not None:
            return
        culprit = call.summary()
        self._abort = (AbortReason.SIBLING_ERROR, culprit)
        others = [other for other in self._unfinished() if other is not call]
        self._abort_many(others, AbortReason.SIBLING_ERROR, culprit)

    def _reject(self, call: _Call, message: str) -> None:
        """The user refused: end the turn (escalation), or the batch without one."""
        culprit = call.summary()
        if self._turn_scope is not None:
            # Cancel first, so a consumer waiting on ``results`` is cancelled now
            # rather than handed results of a turn that is over.
            self._turn_scope.cancel(reason=str(AbortReason.PERMISSION_REJECTED))
        self._abort = (AbortReason.PERMISSION_REJECTED, culprit)
        self._finish(
            call,
            ToolResult(call.block.id, message, True, AbortReason.PERMISSION_REJECTED, False),
        )
        self._abort_all(AbortReason.PERMISSION_REJECTED, culprit)

    # -- lifetime ---------------------------------------------------------------------

    def _close(self, exc: BaseException | None) -> None:
        """The block is over: every call has its result; channels end."""
        self._abort_all(self._outer_reason(exc), None)  # normally none is left
        self._exited = True
        self._adding_closed = True
        self._results.end()
        self._progress_send.close()
