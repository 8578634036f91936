"""One model call of the loop: stream the answer into a fresh tool executor.

Tools start at their block's ``content_block_stop``, while the model still streams;
text and thinking deltas, finished blocks, tool results and progress are sent as
they come. The call runs in its own *call scope* (the executor's turn scope:
cancelled by :meth:`TurnControl.abort` or by a ``Reject``) and its stream in a *stream scope*
(cancelled by :meth:`TurnControl.interrupt`); whatever way it ends, the
:class:`Attempt` says what it produced, and every tool use it added has a result.
"""

from __future__ import annotations

import contextlib
import logging
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeAlias

import attrs
import trio

from .._exceptions import APIError, OverloadedError, StreamError, StreamStalledError
from .._executor import (
    ToolExecutor,
    ToolFinished,
    ToolResult,
    open_tool_executor,
    start_beside,
    take_ready,
)
from .._hooks import Ask, Hooks, ToolCall
from .._messages import (
    AssistantMessage,
    ContentBlock,
    ToolUseBlock,
    Usage,
    UserMessage,
)
from .._model import (
    ModelClient,
    RecoverableModelClient,
    RetryObserver,
    StreamEvent,
    StreamResult,
)
from .._options import TurnOptions
from .._output import OUTPUT_TOOL_NAME
from .._permissions import Defer, PermissionDecision
from .._tools import Tool, ToolContext
from . import _recovery as rec
from ._control import TurnControl
from ._outbox import Outbox
from ._output import OutputTurn, PartialText, partial_from_tool
from ._state import (
    BlockFinished,
    CacheBust,
    Stall,
    State,
    TextDelta,
    ThinkingDelta,
    TransitionReason,
)
from ._tool_input import PartialInputs

__all__ = ["Attempt", "ModelCaller", "Phase"]

logger = logging.getLogger("trio_agent.loop")

Phase: TypeAlias = Literal["streaming", "tools"]


#: A call that reads less than this fraction of what the previous call cached, and
#: at least :data:`CACHE_BUST_TOKENS` less, busted the cache.
CACHE_BUST_FRACTION = 0.5
#: The shortest prefix the API caches (Sonnet, Opus): a smaller miss is noise.
CACHE_BUST_TOKENS = 1024
#: The transitions after which a bust is the loop's own doing (logged at INFO).
_EXPECTED_BUSTS = frozenset(
    {
        TransitionReason.AUTO_COMPACT,
        TransitionReason.PROMPT_TOO_LONG_COMPACT,
        TransitionReason.MODEL_FALLBACK,
    }
)


@attrs.frozen(eq=False)
class Prefix:
    """What one request's prompt was made of, to tell which part a cache bust changed.

    Compared by identity first (the loop passes the same objects from call to call,
    and from turn to turn of a session), then by value: nothing is serialized or
    hashed, so keeping it costs nothing per call.
    """

    model: str
    tools: tuple[Any, ...]
    system: Any
    messages: tuple[Any, ...]

    def changed(self, before: Prefix) -> tuple[str, ...]:
        """The parts of this prompt that differ from *before*'s, in prompt order."""
        parts: list[str] = []
        if self.model != before.model:
            parts.append("model")
        if not _same(self.tools, before.tools):
            parts.append("tools")
        if self.system is not before.system and self.system != before.system:
            parts.append("system")
        old = before.messages
        if len(self.messages) < len(old) or not _same(self.messages[: len(old)], old):
            parts.append("history")
        return tuple(parts)


def _same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    return len(a) == len(b) and all(x is y or x == y for x, y in zip(a, b, strict=True))


#: The last request's :class:`Prefix` of each client, so the first call of a turn is
#: compared with the last call of the turn before (a weak mapping: it dies with the
#: client).
_last_prefix: weakref.WeakKeyDictionary[Any, Prefix] = weakref.WeakKeyDictionary()


#: Whether each client is a :class:`RecoverableModelClient`: an isinstance() against
#: a runtime-checkable Protocol inspects the class's members each time (about 13 us
#: and a dozen objects), and a Session asks once per turn of the same client.
_is_recoverable: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


def _recoverable(client: ModelClient) -> bool:
    try:
        known = _is_recoverable.get(client)
    except TypeError:  # a client that takes no weak reference (or no hash)
        return isinstance(client, RecoverableModelClient)
    if known is None:
        known = _is_recoverable[client] = isinstance(client, RecoverableModelClient)
    return known


def cached_before(messages: Sequence[Any]) -> int:
    """What the call that answered the last assistant message of *messages* cached of
    its prompt (tokens read or written): the prefix this request should read."""
    for message in reversed(messages):
        if isinstance(message, AssistantMessage):
            usage = message.usage
            return (usage.cache_read_input_tokens or 0) + (usage.cache_creation_input_tokens or 0)
    return 0


#: The result of a tool call not yet started when the answer ended with a refusal.
REFUSAL_SKIPPED = (
    "Not run: the response ended with a refusal, so this tool call was not carried out."
)


@attrs.define(eq=False)
class Attempt:
    """What one model call produced, whatever way it ended."""

    blocks: list[ContentBlock] = attrs.field(factory=list[ContentBlock])
    start: AssistantMessage | None = None
    result: StreamResult | None = None
    error: APIError | StreamError | None = None
    phase: Phase = "streaming"
    received: dict[str, ToolResult] = attrs.field(factory=dict[str, ToolResult])
    drained: list[ToolResult] = attrs.field(factory=list[ToolResult])
    answer_sent: bool = False
    sent: set[str] = attrs.field(factory=set[str])
    aborted: bool = False
    #: The number of this model call in the turn (1 for the first).
    model_call: int = 0
    #: Overloaded answers the client retried on its own during this call (since
    #: the last other error, if *overloaded_reset*).
    overloaded_retried: int = 0
    overloaded_reset: bool = False
    #: The overloaded error the loop told the client not to retry (it is counted).
    vetoed: Exception | None = None
    #: Stalls of this call.
    stalls: int = 0
    #: The tools' shared context after this call.
    context: Any = None
    #: The ids of the tool uses added to the executor, in order.
    added: list[str] = attrs.field(factory=list[str])

    @property
    def delivered(self) -> bool:
        """Whether the call handed out anything (then a retry needs a tombstone)."""
        return self.start is not None or bool(self.blocks)

    def started_tools(self) -> tuple[ToolUseBlock, ...]:
        """The attempt's tool uses that had started running."""
        results = self.results()
        return tuple(
            b
            for b in self.blocks
            if isinstance(b, ToolUseBlock) and b.id in results and results[b.id].started
        )

    def overloaded_streak(self, before: int) -> int:
        """Overloaded answers in a row after this call, from *before* (the state's):
        the client's retries and this call's own error included."""
        count = (0 if self.overloaded_reset else before) + self.overloaded_retried
        if isinstance(self.error, OverloadedError) and self.error is not self.vetoed:
            count += 1
        return count

    def results(self) -> dict[str, ToolResult]:
        every = dict(self.received)
        for result in self.drained:
            every.setdefault(result.tool_use_id, result)
        return every

    def start_usage(self) -> Usage:
        """The usage the ``message_start`` event reported (the input of an answer cut
        short was billed all the same); zero without one."""
        return self.start.usage if self.start is not None else Usage()

    def partial(self, model: str) -> AssistantMessage | None:
        """The finished blocks of an answer cut short, as a message; None if none."""
        if not self.blocks:
            return None
        start = self.start
        return AssistantMessage(
            id=start.id if start is not None and start.id else "msg_interrupted",
            model=start.model if start is not None and start.model else model,
            content=tuple(self.blocks),
            stop_reason=None,
            usage=self.start_usage(),
        )

    def results_message(self, message: AssistantMessage) -> UserMessage:
        """One tool_result per tool_use of *message*, in tool_use order."""
        results = self.results()
        blocks: list[ContentBlock] = []
        for use in message.tool_uses:
            try:
                blocks.append(results[use.id].to_block())
            except KeyError:  # pragma: no cover - an executor contract breach
                raise RuntimeError(f"the executor gave no result for tool_use {use.id}") from None
        return UserMessage(tuple(blocks))


def _approved(hooks: Hooks | None) -> Hooks | None:
    """*hooks* for calls the user approved: a ``pre_tool_use`` that asks (``Ask``)
    has its answer, so the call runs (it may still deny or rewrite)."""
    hook = hooks.pre_tool_use if hooks is not None else None
    if hooks is None or hook is None:
        return hooks

    async def pre_tool_use(call: ToolCall) -> Any:
        decision = await hook(call)
        return None if isinstance(decision, Ask) else decision

    return attrs.evolve(hooks, pre_tool_use=pre_tool_use)


@attrs.define(eq=False)
class ModelCaller:
    """Makes the model calls of one ``query``."""

    client: ModelClient
    tools: Sequence[Tool]
    system: Any
    options: TurnOptions
    control: TurnControl
    send: Outbox
    #: The typed output (``options.output_type``), or None.
    output: OutputTurn | None = None
    calls: int = 0
    #: Whether the client takes ``on_retry`` and has ``create()`` (checked once: an
    #: isinstance() against a runtime-checkable Protocol is slow).
    recoverable: bool = attrs.field(init=False)
    #: The prompt of the request before the current one, and of the current one.
    _previous: Prefix | None = attrs.field(default=None, init=False)
    _current: Prefix | None = attrs.field(default=None, init=False)
    _tools: tuple[Tool, ...] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.recoverable = _recoverable(self.client)
        self._tools = tuple(self.tools)
        try:
            self._current = _last_prefix.get(self.client)
        except TypeError:  # a client that takes no weak reference
            self._current = None

    async def call(self, state: State) -> Attempt:
        """Stream one answer for *state* (or, for the last resort, request it whole);
        never raises API or stream errors (they are in ``Attempt.error``), nor the
        turn's cancellation."""
        self.calls += 1
        attempt = Attempt(model_call=self.calls, context=state.context)
        call_scope = trio.CancelScope()
        stream_scope = trio.CancelScope()
        executor: ToolExecutor | None = None
        with (
            self.control.cancelling(call_scope),
            call_scope,
            self.control.interrupting() as attach_executor,
        ):
            async with self._open_executor(call_scope, self.options, state.context) as executor:
                attach_executor(executor)
                try:
                    with self.control.interrupting_stream(stream_scope), stream_scope:
                        if state.non_streaming:
                            await self._create(state, executor, attempt)
                        else:
                            await self._stream(state, executor, attempt)
                except (APIError, StreamError) as exc:
                    attempt.error = exc
                    executor.discard()
                if attempt.error is None:
                    executor.finish()
                if attempt.result is not None:
                    attempt.phase = "tools"
                    await self._rewrite(executor, attempt)
                    await self._send_answer(state, attempt)
        assert executor is not None
        attempt.context = executor.context
        attempt.drained = list(executor.drain())
        attempt.aborted = call_scope.cancelled_caught
        cut = attempt.aborted or stream_scope.cancelled_caught or attempt.error is not None
        if not cut and attempt.result is None:  # pragma: no cover - a client contract breach
            raise RuntimeError("the client's stream ended without a StreamResult")
        return attempt

    async def run_approved(
        self,
        state: State,
        calls: Sequence[ToolUseBlock],
        approvals: Mapping[str, PermissionDecision],
    ) -> Attempt:
        """Run deferred *calls* in one executor (no model call), each decided by its
        entry of *approvals* (a call without one is deferred again); like
        :meth:`call`, every call gets a result, whatever way it ends."""

        async def decide(
            tool: Tool, input: Mapping[str, Any], ctx: ToolContext
        ) -> PermissionDecision:
            return approvals.get(ctx.tool_use_id, Defer())

        attempt = Attempt(model_call=0, context=state.context, phase="tools")
        call_scope = trio.CancelScope()
        executor: ToolExecutor | None = None
        with (
            self.control.cancelling(call_scope),
            call_scope,
            self.control.interrupting() as attach_executor,
        ):
            async with self._open_executor(
                call_scope,
                attrs.evolve(
                    self.options, can_use_tool=decide, hooks=_approved(self.options.hooks)
                ),
                state.context,
            ) as executor:
                attach_executor(executor)
                for block in calls:
                    attempt.blocks.append(block)
                    self._add_tool(executor, attempt, block)
                executor.finish()
        assert executor is not None
        attempt.context = executor.context
        attempt.drained = list(executor.drain())
        attempt.aborted = call_scope.cancelled_caught
        return attempt

    def _open_executor(
        self, turn_scope: trio.CancelScope, options: TurnOptions, context: Any
    ) -> contextlib.AbstractAsyncContextManager[ToolExecutor]:
        """A model call's executor: this query's tools, caps and timeouts."""
        return open_tool_executor(
            self.tools, turn_scope=turn_scope, context=context, options=options
        )

    def _on_retry(self, state: State, attempt: Attempt) -> RetryObserver:
        """The client's retry observer for this call: counts overloaded answers, and
        stops the client's retries when the streak reaches the fallback threshold."""

        def on_retry(exc: Exception) -> bool:
            if not isinstance(exc, OverloadedError):
                attempt.overloaded_retried, attempt.overloaded_reset = 0, True
                return True
            attempt.overloaded_retried += 1
            if rec.can_fall_back(state, self.options.fallback_model) and (
                attempt.overloaded_streak(state.consecutive_overloaded)
                >= rec.MAX_CONSECUTIVE_OVERLOADED
            ):
                attempt.vetoed = exc  # counted already: raised, not retried
                return False
            return True

        return on_retry

    def _request(self, state: State, attempt: Attempt) -> dict[str, Any]:
        messages = rec.request_messages(state)
        self._previous = self._current
        self._current = Prefix(state.model, self._tools, self.system, tuple(messages))
        with contextlib.suppress(TypeError):
            _last_prefix[self.client] = self._current
        request: dict[str, Any] = {
            "model": state.model,
            "messages": messages,
            "max_tokens": state.effective_max_tokens,
            "system": self.system,
            "tools": list(self.tools),
            "extra_body": self.options.extra_body,
        }
        if self.options.cache is not None:
            # Only when on: a client written before the keyword works with cache=None.
            request["cache"] = self.options.cache
        if self.recoverable:
            request["on_retry"] = self._on_retry(state, attempt)
        if self.output is not None and self.output.native:
            request["output_schema"] = self.output.spec.request_schema
        return request

    async def _create(self, state: State, executor: ToolExecutor, attempt: Attempt) -> None:
        """The last resort: one non-streaming request; its tools run once it is here."""
        assert isinstance(self.client, RecoverableModelClient)
        result = await self.client.create(**self._request(state, attempt))
        attempt.start = result.message
        await self._check_cache(state, attempt, result.message.usage)
        for index, block in enumerate(result.message.content):
            await self._finished_block(executor, attempt, index, block)
        attempt.result = result
        if result.message.stop_reason == "refusal":
            executor.skip_unstarted(REFUSAL_SKIPPED)

    async def _check_cache(self, state: State, attempt: Attempt, usage: Usage) -> None:
        """Send a :class:`CacheBust` when this call read far less from the prompt
        cache than the call before it cached (see :func:`cached_before`)."""
        read = usage.cache_read_input_tokens
        current = self._current
        if read is None or current is None:
            return  # the provider says nothing of caching
        expected = cached_before(current.messages)
        if expected - read < CACHE_BUST_TOKENS or read >= CACHE_BUST_FRACTION * expected:
            return
        previous = self._previous
        changed = current.changed(previous) if previous is not None else ()
        transition = state.transition
        own = transition is not None and transition.reason in _EXPECTED_BUSTS
        logger.log(
            logging.INFO if own else logging.WARNING,
            "prompt cache bust: model call %d read %d cached tokens of the %d the call"
            " before cached (%s)",
            attempt.model_call,
            read,
            expected,
            "changed: " + ", ".join(changed) if changed else "nothing changed: expired or evicted",
        )
        await self.send.send(CacheBust(attempt.model_call, expected, read, changed))

    async def _stall(self, attempt: Attempt, gap: float) -> None:
        """Report a stall; abort the attempt at ``max_stalls``."""
        attempt.stalls += 1
        logger.warning(
            "stream stalled for %.1fs (stall %d of model call %d)",
            gap,
            attempt.stalls,
            attempt.model_call,
        )
        await self.send.send(Stall(gap, attempt.model_call, attempt.stalls))
        max_stalls = self.options.max_stalls
        if max_stalls is not None and attempt.stalls >= max_stalls:
            raise StreamStalledError(
                f"the stream stalled {attempt.stalls} times (max_stalls={max_stalls})"
            )

    async def _stream(self, state: State, executor: ToolExecutor, attempt: Attempt) -> None:
        index = 0
        last: float | None = None
        output = self.output
        deltas = self.options.tool_input_deltas
        inputs = PartialInputs() if deltas or (output and not output.native) else None
        text = PartialText(output.spec, attempt.model_call) if output and output.native else None
        stall_threshold = self.options.stall_threshold
        async with self.client.stream(**self._request(state, attempt)) as items:
            async for item in items:
                if isinstance(item, StreamEvent):
                    if item.type != "ping":
                        now = trio.current_time()
                        if last is not None and now - last > stall_threshold:
                            await self._stall(attempt, now - last)
                        last = now
                    if item.stop_reason == "refusal":
                        executor.skip_unstarted(REFUSAL_SKIPPED)
                    index = await self._on_event(item, attempt, index)
                    if item.type == "message_start" and attempt.start is not None:
                        await self._check_cache(state, attempt, attempt.start.usage)
                    if inputs is not None and (partial := inputs.feed(item)) is not None:
                        if deltas:
                            await self.send.send(partial)
                        if output is not None and partial.name == OUTPUT_TOOL_NAME:
                            await self.send.send(
                                partial_from_tool(output.spec, partial, attempt.model_call)
                            )
                    if text is not None and (partial_output := text.feed(item)) is not None:
                        await self.send.send(partial_output)
                elif isinstance(item, AssistantMessage):
                    for block in item.content:
                        await self._finished_block(executor, attempt, index, block)
                else:
                    attempt.result = item
                    if item.message.stop_reason == "refusal":
                        executor.skip_unstarted(REFUSAL_SKIPPED)

    async def _on_event(self, item: StreamEvent, attempt: Attempt, index: int) -> int:
        if item.type == "message_start":
            attempt.start = item.start_message
        elif item.type == "content_block_stop":
            return item.index if item.index is not None else index
        elif (text := item.text_delta) is not None:
            await self.send.send(TextDelta(text, item.index or 0))
        elif (thinking := item.thinking_delta) is not None:
            await self.send.send(ThinkingDelta(thinking, item.index or 0))
        return index

    async def _rewrite(self, executor: ToolExecutor, attempt: Attempt) -> None:
        """With a ``pre_tool_use`` hook, the answer waits for its calls' hooks: the
        inputs they rewrote are what the history's tool uses say (as the tools ran)."""
        hooks = self.options.hooks
        if hooks is None or hooks.pre_tool_use is None or not attempt.added:
            return
        rewritten = await executor.wait_prepared()
        if not rewritten or attempt.result is None:
            return
        message = attempt.result.message
        content = tuple(
            attrs.evolve(b, input=rewritten[b.id])
            if isinstance(b, ToolUseBlock) and b.id in rewritten
            else b
            for b in message.content
        )
        attempt.result = attrs.evolve(
            attempt.result, message=attrs.evolve(message, content=content)
        )

    async def _send_answer(self, state: State, attempt: Attempt) -> None:
        """Send the complete answer as soon as the stream ends, unless it is dropped
        (escalation) or kept aside (pause)."""
        assert attempt.result is not None
        outcome = rec.classify_answer(state, attempt.result.message)
        if outcome in (rec.Outcome.ESCALATE, rec.Outcome.PAUSE):
            return
        await self.send.send(rec.merge_paused(state.paused, attempt.result.message))
        attempt.answer_sent = True

    async def _finished_block(
        self,
        executor: ToolExecutor,
        attempt: Attempt,
        index: int,
        block: ContentBlock,
    ) -> None:
        """Announce a finished block, then keep it (and start its tool). The consumer
        hears of a block before its tool starts, so a BaseException from that tool
        cannot hide a tool_use whose side effects happened (the Session records it);
        and an abort during the announcement leaves the block out, with no result for
        a call never announced."""
        await self.send.announce(BlockFinished(index, block))
        attempt.blocks.append(block)
        if isinstance(block, ToolUseBlock):
            self._add_tool(executor, attempt, block)

    def _add_tool(self, executor: ToolExecutor, attempt: Attempt, block: ToolUseBlock) -> None:
        """Add *block*'s call; the first one starts the forwarding task (a call
        without tools needs none), beside the tools in the executor's nursery."""
        executor.add_tool(block)
        attempt.added.append(block.id)
        if len(attempt.added) == 1:
            start_beside(executor, self._forward, executor, attempt)

    async def _forward(self, executor: ToolExecutor, attempt: Attempt) -> None:
        """Forward the executor's progress as it comes and, after each
        ``ToolFinished``, the results now ready, in order: one task per call.

        The executor sends a call's ``ToolFinished`` before it delivers its result,
        and delivers results in ``add_tool`` order, so the results ready are those
        of the longest prefix of ``attempt.added`` whose calls have finished:
        receiving them never waits. The progress channel ends once every call has
        finished after ``finish()`` or ``discard()``, so this task never outlives
        the attempt's tools. A result ready is taken without a checkpoint (the
        send that follows is one).
        """
        finished: set[str] = set()
        ready = 0  # attempt.added[:ready] are received
        cut = False  # discarded: the rest is for drain()
        async for item in executor.progress:
            await self.send.send(item)
            if not isinstance(item, ToolFinished):
                continue
            finished.add(item.tool_use_id)
            added = attempt.added
            while not cut and ready < len(added) and added[ready] in finished:
                try:
                    result = take_ready(executor)
                except trio.WouldBlock:  # pragma: no cover - the executor's order, as above
                    result = await executor.results.receive()
                except trio.EndOfChannel:
                    cut = True
                    break
                ready += 1
                attempt.received[result.tool_use_id] = result
                await self.send.send(result)
                attempt.sent.add(result.tool_use_id)

    # -- endings ------------------------------------------------------------------
