"""The streaming tool executor: run tool calls while the model is still talking.

Structure (docs/DESIGN.md, "The cancel-scope tree")::

    turn scope (the caller's)              cancelled → user_interrupted
      └─ executor nursery = batch scope    Reject → turn scope cancelled (permission_rejected)
           ├─ tool scope (one per call)    sibling_error · interrupt · streaming_fallback
           └─ ...

:func:`open_tool_executor` returns a class-based async context manager (like
trio's ``NurseryManager``: no generator frames in every traceback) that opens the
batch scope and builds the :class:`ToolExecutor` with it; the executor has no
public constructor, so no half-built one is ever seen. The bookkeeping is
synchronous (it happens in ``add_tool``, ``interrupt``, ``discard`` and when a
tool task ends), so a synthetic result never needs an ``await`` and exists even
when the turn scope was cancelled; the steps of each tool's task are in
:mod:`._call` (``ToolExecutor._run_call`` strings them together and awaits the
tool). "Why didn't my tool start?": ``ToolExecutor._pump`` decides, and
logs each decision on the ``trio_agent.executor`` logger at DEBUG level.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from types import TracebackType
from typing import Any, NoReturn, TypeVar, final

import attrs
import trio

from .._exceptions import ExecutorClosedError, unwrap_single
from .._hooks import Hooks
from .._messages import ToolUseBlock
from .._options import TurnOptions
from .._tools import Tool, tools_by_name
from ._call import (
    Call,
    CallState,
    Ran,
    Rejected,
    Runnable,
    check_input,
    hook_failed,
    permit,
    post_tool,
    pre_tool,
    prepare,
    raised,
    returned,
)
from ._progress import ProgressChannel
from ._results import (
    AbortReason,
    ExecutorStatistics,
    ToolFinished,
    ToolProgress,
    ToolResult,
    aborted_message,
    describe,
    unknown_tool_message,
)

__all__ = ["TOOL_TASK_PREFIX", "ToolExecutor", "open_tool_executor", "start_beside", "take_ready"]

logger = logging.getLogger("trio_agent.executor")

#: Every tool task's name starts with this (the harness counts them).
TOOL_TASK_PREFIX = "trio_agent tool"

_T = TypeVar("_T")
_S = TypeVar("_S")


class NoPublicConstructor(type):
    """A metaclass whose classes cannot be called: only ``Cls._create(...)`` builds
    one (trio's ``NoPublicConstructor``), so users never hold a half-built object.
    """

    def __call__(cls, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError(f"{cls.__module__}.{cls.__qualname__} has no public constructor")

    def _create(cls: type[_T], *args: Any, **kwargs: Any) -> _T:
        return super().__call__(*args, **kwargs)


async def _bounded(call: Call, limit: float | None, name: str, step: Awaitable[_S]) -> _S | Ran:
    """Await a hook's *step* within the call's deadline (*limit* seconds, or none);
    past it, the call's error result."""
    if limit is None:
        return await step
    with trio.move_on_after(limit):
        return await step
    return hook_failed(call, name, f"timed out after {limit:g} s")


def open_tool_executor(
    tools: Iterable[Tool],
    *,
    turn_scope: trio.CancelScope | None = None,
    context: Any = None,
    options: TurnOptions | None = None,
) -> _ExecutorManager:
    """Open a streaming tool executor: tools start while the model still streams.

    Args:
        tools: the tools the model may call (names must be distinct).
        turn_scope: the cancel scope of the turn. ``Reject`` from ``can_use_tool``
            cancels it (``permission_rejected``); without one, a rejection cancels
            every call of this executor instead.
        context: the shared context value; tools see it as ``ctx.context`` and
            non-safe tools may change it with ``ToolOutput.context_modifier``.
        options: a :class:`~trio_agent.TurnOptions`; the executor reads four of its
            fields. ``can_use_tool`` (``async (tool, input, ctx) -> Allow | Deny |
            Reject | Defer``) is consulted inside the call's slot, before the tool
            runs; a ``Defer`` answers the call with a ``deferred`` placeholder result
            at once. ``max_tool_concurrency``: the most tools running at once.
            ``tool_timeout``: seconds a tool may run when it has no ``timeout`` of
            its own; past it the call is answered "timed out after N s".
            ``max_result_chars``: the most characters of text a result keeps (a
            tool's own ``max_result_chars`` wins); the rest is cut, with a note.

    Scheduling: a call starts as soon as nothing runs, or it and everything
    running are concurrency-safe, with fewer than ``max_tool_concurrency`` running.
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

    Raises:
        TypeError: *options* is not a ``TurnOptions``; a tool is not a ``Tool``
            (when the block is entered).
        ToolDefinitionError: two tools have the same name (when the block is entered).
    """
    if options is None:
        options = _DEFAULT_OPTIONS
    elif not isinstance(options, TurnOptions):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"options must be a TurnOptions, not {type(options).__name__}")
    return _ExecutorManager(tools, turn_scope=turn_scope, context=context, options=options)


_DEFAULT_OPTIONS = TurnOptions()


@attrs.define(eq=False)
class _Hooks:
    """What the manager may do to the executor it built; the executor fills it in."""

    body_ended: Callable[[BaseException | None], None] = attrs.field(init=False)
    close: Callable[[BaseException | None], None] = attrs.field(init=False)


@final
class _ExecutorManager:
    """``async with open_tool_executor(...)``: the batch scope and its executor."""

    def __init__(
        self,
        tools: Iterable[Tool],
        *,
        turn_scope: trio.CancelScope | None,
        context: Any,
        options: TurnOptions,
    ) -> None:
        self._tools = tools
        self._turn_scope = turn_scope
        self._context = context
        self._options = options
        self._hooks = _Hooks()
        self._nursery_manager = trio.open_nursery()

    async def __aenter__(self) -> ToolExecutor:
        # Check the arguments before opening the nursery: an error here is raised
        # as itself, not wrapped in the nursery's group.
        tools = tools_by_name(self._tools)
        nursery = await self._nursery_manager.__aenter__()
        # The one place that builds an executor (trio's NurseryManager does the same).
        return ToolExecutor._create(  # pyright: ignore[reportPrivateUsage]
            nursery,
            tools,
            turn_scope=self._turn_scope,
            context=self._context,
            options=self._options,
            hooks=self._hooks,
        )

    async def __aexit__(
        self,
        etype: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        hooks = self._hooks
        try:
            hooks.body_ended(exc)
            return bool(await self._nursery_manager.__aexit__(etype, exc, tb))
        except BaseExceptionGroup as group:
            # Tool tasks never raise anything but Cancelled, so this nursery is an
            # implementation detail: give back the body's own exception, or the
            # single Cancelled, rather than a group.
            _cancelled, rest = group.split(trio.Cancelled)
            if rest is None:
                if isinstance(exc, trio.Cancelled):
                    return False  # the body's own Cancelled propagates as itself
                raise unwrap_single(group) or group  # noqa: B904
            if exc is not None and rest.split(lambda e: e is exc)[1] is None:
                return False  # only the body's exception: it propagates as itself
            raise
        finally:
            hooks.close(exc)


@final
class _ResultChannel(trio.abc.ReceiveChannel[ToolResult]):
    """Receives the executor's results in ``add_tool`` order.

    ``receive()`` raises :exc:`trio.EndOfChannel` once every result has been
    received after ``finish()``, or at once after ``discard()`` (what was not
    received is left for ``drain()``).
    """

    def __init__(self) -> None:
        self._buffer: deque[ToolResult] = deque()
        self._lot = trio.lowlevel.ParkingLot()
        self._ended = False  # no result will be pushed any more
        self._cut = False  # receivers get EndOfChannel even with results buffered
        self._closed = False  # aclose() was called on this end

    def push_many(self, results: list[ToolResult]) -> None:
        """Push several results, waking the receiver once."""
        self._buffer.extend(results)
        self._lot.unpark()

    def end(self, *, cut: bool = False) -> None:
        self._ended = True
        self._cut = self._cut or cut
        self._lot.unpark_all()

    def take_all(self) -> list[ToolResult]:
        items = list(self._buffer)
        self._buffer.clear()
        return items

    def _ready(self) -> bool:
        return bool(self._buffer) and not self._cut

    def _over(self) -> bool:
        return self._cut or (self._ended and not self._buffer)

    def take_ready(self) -> ToolResult:
        """The next result, which must be ready, without a checkpoint.

        Raises:
            trio.EndOfChannel: no result will come any more (after ``discard()``).
            trio.WouldBlock: the next result is not there yet.
        """
        if self._ready():
            return self._buffer.popleft()
        if self._over():
            raise trio.EndOfChannel
        raise trio.WouldBlock

    async def receive(self) -> ToolResult:
        """The next result in ``add_tool`` order, waiting for it if needed.

        Raises:
            trio.EndOfChannel: no result will come any more.
            trio.ClosedResourceError: this channel was closed with ``aclose()``.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        if self._closed:
            raise trio.ClosedResourceError("the results channel was closed")
        if self._ready() or self._over():
            await trio.lowlevel.cancel_shielded_checkpoint()
        else:
            while not (self._ready() or self._over()):
                await self._lot.park()
                if self._closed:
                    raise trio.ClosedResourceError("the results channel was closed")
        if self._ready():
            return self._buffer.popleft()
        raise trio.EndOfChannel

    async def aclose(self) -> None:
        """Stop receiving; results not received stay available to ``drain()``."""
        self._closed = True
        self._lot.unpark_all()
        await trio.lowlevel.checkpoint()


@final
class ToolExecutor(metaclass=NoPublicConstructor):
    """Runs tool calls as they are added; made by :func:`open_tool_executor`.

    Every call added gets exactly one :class:`ToolResult`, delivered on
    :attr:`results` in ``add_tool`` order, or returned by :meth:`drain` after the
    ``async with`` block.
    """

    def __init__(
        self,
        nursery: trio.Nursery,
        tools: dict[str, Tool],
        *,
        turn_scope: trio.CancelScope | None,
        context: Any,
        options: TurnOptions,
        hooks: _Hooks,
    ) -> None:
        self._max_result_chars = options.max_result_chars
        self._nursery = nursery
        self._tools = tools
        self._turn_scope = turn_scope
        self._can_use_tool = options.can_use_tool
        self._max_concurrency = options.max_tool_concurrency
        self._context = context
        self._tool_timeout = options.tool_timeout
        self._tool_hooks = options.hooks if options.hooks and options.hooks.tool_hooks else None
        hooks.body_ended = self._body_ended
        hooks.close = self._close

        self._calls: list[Call] = []
        self._ids: set[str] = set()
        # Queued calls in add order. Only the head can ever start (a safe call
        # waits only for the cap, like every call after it; a non-safe one holds
        # back the rest), so this is a FIFO; a call answered while queued stays
        # here until it reaches the head (no O(n) removal).
        self._queue: deque[Call] = deque()
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

        self._results = _ResultChannel()
        self._progress = ProgressChannel()

    @property
    def results(self) -> trio.abc.ReceiveChannel[ToolResult]:
        """Results in ``add_tool`` order; ends after ``finish()`` once all are in."""
        return self._results

    @property
    def progress(self) -> trio.abc.ReceiveChannel[ToolProgress | ToolFinished]:
        """Progress reports and a :class:`ToolFinished` per call, as they happen.

        A tool reporting progress never waits, and memory stays bounded: at most
        256 reports of one call wait unreceived (``MAX_UNREAD`` in ``_progress.py``);
        past that a new report replaces the newest unread one, whose ``dropped``
        counts the ones it replaced, so the latest report always arrives.
        ``aclose()`` discards later items.
        """
        return self._progress

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
                ToolResult(
                    block.id, unknown_tool_message(block.name, list(self._tools)), is_error=True
                ),
            )
            return
        error, safe, input = check_input(tool, block)
        call = self._new_call(block, tool, safe=safe, input_error=error, input=input)
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
                # Not an AbortReason: the call is answered by the caller's choice
                # (abort_reason=None), so its scope is cancelled without a reason.
                call.scope.cancel()
            result = ToolResult(call.block.id, message, is_error=True)
            self._finish(call, result, deliver=False)
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

    def _new_call(
        self,
        block: ToolUseBlock,
        tool: Tool | None,
        *,
        safe: bool,
        input_error: str | None,
        input: Mapping[str, Any] | None = None,
    ) -> Call:
        call = Call(block, tool, safe, input_error, input)
        self._calls.append(call)
        self._counts["queued"] += 1
        return call

    def _unfinished(self) -> list[Call]:
        return [c for c in self._calls[self._delivered :] if c.result is None]

    def _set_state(self, call: Call, state: CallState) -> None:
        self._counts[call.state] -= 1
        self._counts[state] += 1
        call.state = state

    def _pump(self) -> None:
        """Start every queued call that may start, in add order."""
        self._notice_turn_cancelled()
        queue = self._queue
        while queue:
            call = queue[0]
            if call.result is not None:  # answered while queued
                queue.popleft()
            elif self._unsafe_slots:
                logger.debug(
                    "%s %s waits: a non-safe tool is running", call.block.name, call.block.id
                )
                break
            elif self._slots >= self._max_concurrency:
                logger.debug(
                    "%s %s waits: %d tools run (max_concurrency)",
                    call.block.name,
                    call.block.id,
                    self._slots,
                )
                break
            elif self._slots == 0 or call.safe:
                queue.popleft()
                logger.debug(
                    "%s %s starts (%d running)", call.block.name, call.block.id, self._slots
                )
                self._start(call)
            else:
                # A non-safe call keeps its place: nothing after it may pass.
                logger.debug(
                    "%s %s waits: not concurrency-safe while %d tools run; %d calls behind it",
                    call.block.name,
                    call.block.id,
                    self._slots,
                    len(queue) - 1,
                )
                break

    def _start(self, call: Call) -> None:
        self._set_state(call, "executing")
        self._slots += 1
        self._unsafe_slots += not call.safe
        self._peak = max(self._peak, self._slots)
        self._nursery.start_soon(
            self._run_call, call, name=f"{TOOL_TASK_PREFIX} {call.block.name} {call.block.id}"
        )

    def _finish(self, call: Call, result: ToolResult, *, deliver: bool = True) -> None:
        """Make *result* final and deliver what is in order (unless the caller
        finishes many calls at once and delivers once after them)."""
        assert call.result is None, "a call is finished once"
        call.result = result
        call.prepared.set()
        self._set_state(call, "finished")
        self._progress.finished((result,))
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

    def _abort_call(self, call: Call, reason: AbortReason, culprit: str | None) -> None:
        self._abort_many((call,), reason, culprit)

    def _abort_many(self, calls: Iterable[Call], reason: AbortReason, culprit: str | None) -> None:
        """Cancel each of *calls* (unfinished) and answer it with a synthetic result,
        then deliver once: a cascade over a thousand siblings is one pass, with one
        wake-up of each channel's receiver (the same steps as :meth:`_finish`)."""
        counts = self._counts
        results: list[ToolResult] = []
        # Indexed by ``started``: every sibling reads one of two messages.
        messages = (
            aborted_message(reason, started=False, culprit=culprit),
            aborted_message(reason, started=True, culprit=culprit),
        )
        for call in calls:
            assert call.result is None, "only unfinished calls are aborted"
            state = call.state
            if state == "executing":
                call.scope.cancel(reason=reason)
            started = call.started
            call.result = result = ToolResult(
                call.block.id,
                messages[started],
                is_error=True,
                abort_reason=reason,
                started=started,
            )
            call.prepared.set()
            counts[state] -= 1
            call.state = "finished"
            results.append(result)
        if results:
            counts["finished"] += len(results)
            self._progress.finished(results)
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

    def _maybe_end(self) -> None:
        if self._adding_closed and self._counts["finished"] == len(self._calls):
            self._results.end()
            self._progress.end()

    async def _run_call(self, call: Call) -> None:
        """The call's task: permission, then the tool, awaited here (not in a helper)
        so that a cancelled tool unwinds straight into this frame."""
        try:
            with call.scope:
                # Never start a tool into an already cancelled scope.
                await trio.lowlevel.checkpoint_if_cancelled()
                outcome = prepare(
                    call,
                    context=self._context,
                    report=self._progress.reporter(call.block.id),
                    tool_timeout=self._tool_timeout,
                )
                if self._can_use_tool is not None and isinstance(outcome, Runnable):
                    outcome = await permit(call, outcome, self._can_use_tool)
                tool_hooks = self._tool_hooks
                pre = tool_hooks.pre_tool_use if tool_hooks is not None else None
                if pre is not None and isinstance(outcome, Runnable):
                    before = outcome
                    outcome = await _bounded(
                        call, outcome.limit, "pre_tool_use", pre_tool(call, outcome, pre)
                    )
                    if isinstance(outcome, Runnable) and outcome is not before:
                        call.rewritten = outcome.input
                call.prepared.set()
                if isinstance(outcome, Runnable):
                    runnable, limit = outcome, outcome.limit
                    value: Any = None
                    timed_out = False
                    call.started = True
                    try:
                        if limit is None:
                            value = await runnable.tool.run(runnable.input, runnable.ctx)
                        else:
                            # The tool's own deadline (a TooSlowError it raises itself
                            # is its error).
                            with trio.move_on_after(limit) as deadline:
                                value = await runnable.tool.run(runnable.input, runnable.ctx)
                            timed_out = deadline.cancelled_caught
                    except Exception as exc:
                        outcome = raised(call, runnable, exc)
                    else:
                        outcome = returned(
                            call,
                            runnable,
                            value,
                            timed_out=timed_out,
                            max_result_chars=self._max_result_chars,
                        )
                    if tool_hooks is not None:
                        outcome = await self._after_hooks(call, runnable, outcome, tool_hooks)
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

    async def _after_hooks(self, call: Call, runnable: Runnable, ran: Ran, hooks: Hooks) -> Ran:
        """*ran* as the ``post_tool_use`` (success) or ``post_tool_failure`` hook
        leaves it, within the tool's deadline."""
        name = "post_tool_failure" if ran.failed else "post_tool_use"
        hook = hooks.post_tool_failure if ran.failed else hooks.post_tool_use
        if hook is None:
            return ran
        step = post_tool(
            call, runnable, ran, hook, name=name, max_result_chars=self._max_result_chars
        )
        return await _bounded(call, runnable.limit, name, step)

    async def wait_prepared(self) -> dict[str, Mapping[str, Any]]:
        """Wait until every call added is past its permission check and
        ``pre_tool_use`` hook (or finished); the inputs the hooks rewrote, by id."""
        for call in list(self._calls):
            await call.prepared.wait()
        return {c.block.id: c.rewritten for c in self._calls if c.rewritten is not None}

    def _complete(self, call: Call, result: ToolResult, modifier: Any) -> None:
        if call.result is not None:
            return  # aborted while finishing: the synthetic result stands
        if modifier is not None and not call.safe:
            try:
                self._context = modifier(self._context)
            except Exception as exc:
                result = ToolResult(
                    call.block.id,
                    f"Error: the context modifier of {call.block.name} raised "
                    f"{type(exc).__name__}: {describe(exc)}",
                    is_error=True,
                    started=True,
                )
        self._finish(call, result)

    def _cascade(self, call: Call) -> None:
        """A failed call of a cascading tool cancels every other call of the batch."""
        if call.tool is None or not call.tool.cancels_siblings_on_error:
            return
        if call.result is not None or self._abort is not None:
            return
        culprit = call.summary()
        self._abort = (AbortReason.SIBLING_ERROR, culprit)
        others = [other for other in self._unfinished() if other is not call]
        self._abort_many(others, AbortReason.SIBLING_ERROR, culprit)

    def _reject(self, call: Call, message: str) -> None:
        """The user refused: end the turn (escalation), or the batch without one."""
        culprit = call.summary()
        if self._turn_scope is not None:
            # Cancel first, so a consumer waiting on ``results`` is cancelled now
            # rather than handed results of a turn that is over.
            self._turn_scope.cancel(reason=AbortReason.PERMISSION_REJECTED)
        self._abort = (AbortReason.PERMISSION_REJECTED, culprit)
        self._finish(
            call,
            ToolResult(
                call.block.id,
                message,
                is_error=True,
                abort_reason=AbortReason.PERMISSION_REJECTED,
            ),
        )
        self._abort_all(AbortReason.PERMISSION_REJECTED, culprit)

    def _body_ended(self, exc: BaseException | None) -> None:
        """The ``async with`` body is over: wait for the calls as after ``finish()``,
        or cancel them all if it raised (or was cancelled)."""
        if exc is None:
            self.finish()
        else:
            self._abort_all(self._outer_reason(exc), None)

    def _close(self, exc: BaseException | None) -> None:
        """The block is over: every call has its result; channels end."""
        self._abort_all(self._outer_reason(exc), None)  # normally none is left
        self._exited = True
        self._adding_closed = True
        self._results.end()
        self._progress.end()


# What the loop's model call does with its executor beyond the public API: it
# forwards the executor's progress and results to the turn's events from a task
# of its own (ModelCaller._forward). That task runs in the executor's nursery, and
# takes a result it knows is ready without a checkpoint: a nursery and a task
# step fewer per model call than through the public API.


def start_beside(
    executor: ToolExecutor, fn: Callable[..., Awaitable[object]], *args: object
) -> None:
    """Run ``fn(*args)`` in *executor*'s nursery, beside its tools.

    The task must end once the executor's channels end (as the tools do, which is
    what the block's end waits for) and raise nothing but ``Cancelled``: like a
    tool task's, its cancellation is the block's (the body's exception, or the
    turn's cancellation).
    """
    executor._nursery.start_soon(fn, *args)  # pyright: ignore[reportPrivateUsage]  (this module's class)


def take_ready(executor: ToolExecutor) -> ToolResult:
    """The next result of *executor*'s ``results``, known to be ready (the results
    before it were received and its call has finished), without a checkpoint.

    Raises:
        trio.EndOfChannel: the results channel was cut (``discard()``): the rest
            is for ``drain()``.
        trio.WouldBlock: the result is not ready (a caller's mistake).
    """
    return executor._results.take_ready()  # pyright: ignore[reportPrivateUsage]  (this module's class)
