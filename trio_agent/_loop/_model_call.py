"""One model call of the loop: stream the answer into a fresh tool executor.

Tools start at their block's ``content_block_stop``, while the model still streams;
text and thinking deltas, finished blocks, tool results and progress are sent as
they come. The call runs in its own *turn scope* (cancelled by
:meth:`TurnControl.abort` or by a ``Reject``) and its stream in a *stream scope*
(cancelled by :meth:`TurnControl.interrupt`); whatever way it ends, the
:class:`Attempt` says what it produced, and every tool use it added has a result.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, TypeAlias

import attrs
import trio

from .._exceptions import APIError, StreamError
from .._executor import DEFAULT_MAX_RESULT_CHARS, ToolExecutor, ToolResult, open_tool_executor
from .._messages import (
    AssistantMessage,
    ContentBlock,
    Message,
    ToolUseBlock,
    Usage,
    UserMessage,
)
from .._model import ModelClient, StreamEvent, StreamResult
from .._permissions import CanUseTool
from .._tools import Tool
from . import _recovery as rec
from ._control import TurnControl
from ._state import BlockFinished, QueryEvent, State, TextDelta, ThinkingDelta

__all__ = ["Attempt", "ModelCaller", "Phase"]

Phase: TypeAlias = Literal["streaming", "tools"]


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


@attrs.define(eq=False)
class ModelCaller:
    """Makes the model calls of one ``query``."""

    client: ModelClient
    tools: Sequence[Tool]
    system: Any
    can_use_tool: CanUseTool | None
    max_tool_concurrency: int
    control: TurnControl
    params: dict[str, Any]
    send: trio.MemorySendChannel[QueryEvent]
    max_result_chars: int = DEFAULT_MAX_RESULT_CHARS

    async def call(self, state: State) -> Attempt:
        """Stream one answer for *state*; never raises API or stream errors (they
        are in ``Attempt.error``), nor the turn's cancellation."""
        attempt = Attempt()
        turn_scope = trio.CancelScope()
        stream_scope = trio.CancelScope()
        executor: ToolExecutor | None = None
        with (
            self.control.cancelling(turn_scope),
            turn_scope,
            self.control.interrupting() as attach_executor,
        ):
            async with (
                open_tool_executor(
                    self.tools,
                    turn_scope=turn_scope,
                    can_use_tool=self.can_use_tool,
                    max_concurrency=self.max_tool_concurrency,
                    max_result_chars=self.max_result_chars,
                ) as executor,
                trio.open_nursery() as nursery,
            ):
                nursery.start_soon(self._forward_progress, executor)
                nursery.start_soon(self._collect_results, executor, attempt)
                attach_executor(executor)
                try:
                    with self.control.interrupting_stream(stream_scope), stream_scope:
                        await self._stream(state, executor, attempt)
                except (APIError, StreamError) as exc:
                    attempt.error = exc
                    executor.discard()
                if attempt.error is None:
                    executor.finish()
                if attempt.result is not None:
                    attempt.phase = "tools"
                    await self._send_answer(state, attempt)
        assert executor is not None
        attempt.drained = list(executor.drain())
        attempt.aborted = turn_scope.cancelled_caught
        cut = attempt.aborted or stream_scope.cancelled_caught or attempt.error is not None
        if not cut and attempt.result is None:  # pragma: no cover - a client contract breach
            raise RuntimeError("the client's stream ended without a StreamResult")
        return attempt

    async def _stream(self, state: State, executor: ToolExecutor, attempt: Attempt) -> None:
        messages: list[Message] = list(state.messages)
        if state.paused is not None:
            messages.append(state.paused)
        index = 0
        async with self.client.stream(
            model=state.model,
            messages=messages,
            max_tokens=state.effective_max_tokens,
            system=self.system,
            tools=list(self.tools),
            **self.params,
        ) as items:
            async for item in items:
                if isinstance(item, StreamEvent):
                    if item.stop_reason == "refusal":
                        executor.skip_unstarted(REFUSAL_SKIPPED)
                    index = await self._on_event(item, attempt, index)
                elif isinstance(item, AssistantMessage):
                    for block in item.content:
                        # The consumer hears of a block before its tool starts, so a
                        # BaseException from that tool cannot hide a tool_use whose
                        # side effects happened (the Session records it).
                        await self.send.send(BlockFinished(index, block))
                        attempt.blocks.append(block)
                        if isinstance(block, ToolUseBlock):
                            executor.add_tool(block)
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

    async def _send_answer(self, state: State, attempt: Attempt) -> None:
        """Send the complete answer as soon as the stream ends, unless it is dropped
        (escalation) or kept aside (pause)."""
        assert attempt.result is not None
        outcome = rec.classify_answer(state, attempt.result.message)
        if outcome in (rec.Outcome.ESCALATE, rec.Outcome.PAUSE):
            return
        await self.send.send(rec.merge_paused(state.paused, attempt.result.message))
        attempt.answer_sent = True

    async def _forward_progress(self, executor: ToolExecutor) -> None:
        # The progress channel ends once every call has finished after finish() or
        # discard(), so this task never outlives the attempt's tools.
        async for item in executor.progress:
            await self.send.send(item)

    async def _collect_results(self, executor: ToolExecutor, attempt: Attempt) -> None:
        async for result in executor.results:
            attempt.received[result.tool_use_id] = result
            await self.send.send(result)
            attempt.sent.add(result.tool_use_id)

    # -- endings ------------------------------------------------------------------
