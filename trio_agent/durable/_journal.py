"""The journal of a running turn: each model answer and each tool result, recorded
as it completes, so that a turn re-run after a crash answers from the record.

Re-running a turn from its start replays its model calls in order: the *n*-th
call of the turn, if its answer was recorded, is answered from the record (the
same blocks, hence the same tool calls and ids); otherwise the model is asked.
A tool call is keyed by the model call it belongs to, its tool name, its input and
its rank among identical calls of that answer, so a recorded result answers the
same call again even when the model, asked again, gives it another id. What is
not recorded runs again: a tool that had started but not returned, a tool that
raised, a model answer cut before its end.

A tool call that runs a turn of its own (a :func:`trio_agent.subagent`) journals that
turn under its own key: its model calls are ``<call key>/model/<n>``, and its tools
(a subagent's are wrapped too) ``<call key>/tool/...``, counted apart from the
parent's calls; once the call's result is recorded, a re-run answers it from the
record and the nested turn does not run again.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import hashlib
import json
from collections import Counter
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any, Unpack, cast, final

import attrs
import trio

from .. import (
    AssistantMessage,
    ContentBlock,
    ModelClient,
    OpaqueBlock,
    TextBlock,
    Tool,
    ToolContext,
    ToolOutput,
)
from .._executor import read_return, sendable_blocks, unsendable_message
from .._messages import clean_text
from .._model import StreamArguments
from .._retry import RetryPolicy
from .._subagent import SubagentRunner
from .._tools import ContextModifier
from ..lowlevel import (
    RecoverableModelClient,
    RetryObserver,
    StreamItem,
    StreamResult,
    StreamStatistics,
    block_from_api,
    message_from_api,
)
from ._store import SqlSessionStore
from ._writer import RecordWriter

__all__ = ["TurnJournal", "current_turn_id", "idempotency_key"]

_TURN_ID: contextvars.ContextVar[str] = contextvars.ContextVar("trio_agent_durable_turn_id")
# tool_use_id -> the call's journal key, for the running turn's tools.
_CALL_KEYS: contextvars.ContextVar[Mapping[str, str]] = contextvars.ContextVar(
    "trio_agent_durable_call_keys"
)
# The journal key of the tool call whose run the task is in: a turn it runs (a
# subagent's) is journaled under it. Absent at the turn's own level.
_SCOPE: contextvars.ContextVar[str] = contextvars.ContextVar("trio_agent_durable_scope")


def current_turn_id() -> str | None:
    """The id of the durable turn the calling task runs in (its DBOS workflow id), or None."""
    return _TURN_ID.get(None)


def idempotency_key(ctx: ToolContext) -> str:
    """A key for a tool's external side effect: the same across re-runs of the call.

    Inside a durable turn it is ``<turn id>/tool/<model call>/<tool name>/<input
    digest>/<rank>``: the *n*-th model call of the turn, the tool's name, a digest
    of its input and its rank among identical calls of that answer, the journal's
    key of the call. It does not depend on the ``tool_use_id``, so it stays the same
    when a call is cut while its answer was still streaming and the model, asked
    again after the crash, makes the same call under another id. It changes only
    when the re-asked model makes another call (another tool, another input, or
    the same call a different number of times before it). Pass it to services that
    deduplicate requests (an ``Idempotency-Key`` header) so that a call re-run
    after a crash (its result was not recorded) does not act twice.

    Outside a durable turn it is ``ctx.tool_use_id``.
    """
    turn = current_turn_id()
    if turn is None:
        return ctx.tool_use_id
    key = _CALL_KEYS.get({}).get(ctx.tool_use_id)
    return f"{turn}/{ctx.tool_use_id}" if key is None else f"{turn}/{key}"


def _call_key(call: int, name: str, input: Mapping[str, Any], rank: int) -> str:
    canonical = json.dumps(input, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    digest = hashlib.sha256(canonical.encode()).hexdigest()[:32]
    return f"tool/{call}/{name}/{digest}/{rank}"


def _describe_return(value: Any) -> str:
    """What is wrong with a tool's return, by type, in the executor's words
    (``bytes``, ``a list holding ToolUseBlock``, ``a ToolOutput holding dict``)."""
    if isinstance(value, ToolOutput):
        return f"a ToolOutput holding {_describe_return(value.content)}"
    if isinstance(value, list | tuple):
        for item in cast("Sequence[object]", value):
            if not _result_block(item):
                return f"a {type(value).__name__} holding {type(item).__name__}"
    return type(value).__name__


def _result_block(item: object) -> bool:
    if isinstance(item, TextBlock):
        return True
    return isinstance(item, OpaqueBlock) and item.type in _RESULT_BLOCK_TYPES


#: The block types the API accepts in ``tool_result`` content (the executor's).
_RESULT_BLOCK_TYPES = frozenset({"text", "image", "document", "search_result"})


def _error_record(message: str) -> dict[str, Any]:
    return {"content": message, "is_error": True}


def _encode(name: str, value: Any) -> tuple[dict[str, Any], ContextModifier | None]:
    """The record of what the tool *name* returned: what the executor delivers of it,
    and the return's context modifier (None when its return was refused).

    Text as UTF-8 can carry it (a lone surrogate as U+FFFD, as the executor cleans
    it), blocks as their API JSON (an opaque block's strings cleaned the same way);
    a return the executor refuses (bytes, a dict, a ToolUseBlock...) is the error
    result it gives, in its words; blocks that no model request can carry (a
    ``datetime``, a set, NaN in an opaque block) are an error result too. Never
    raises: whatever the tool returned, its outcome is recorded, so it does not run
    again (a tool that returned is never re-run).
    """
    read = read_return(value)
    if read is None:
        return _error_record(
            f"Error: {name} returned {_describe_return(value)}, expected a str, a list of"
            " text / image / document / search_result blocks, or a ToolOutput"
        ), None
    content, is_error, modifier = read
    if isinstance(content, str):
        return {"content": clean_text(content), "is_error": bool(is_error)}, modifier
    # What the model request carries of the blocks: the executor's own check.
    sendable = sendable_blocks(content)
    if isinstance(sendable, str):
        return _error_record(unsendable_message(name, sendable)), None
    blocks = [b.to_api() for b in sendable]
    try:
        for block in blocks:  # and what a re-run reads back (an opaque "text" block...)
            block_from_api(block)
    except Exception as exc:
        return _error_record(unsendable_message(name, f"{type(exc).__name__}: {_said(exc)}")), None
    return {"content": blocks, "is_error": bool(is_error)}, modifier


def _said(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:
        return "(its message cannot be shown)"
    return clean_text(text[:300])


def _delivered(record: Mapping[str, Any], modifier: ContextModifier | None) -> ToolOutput:
    """What the journaled tool hands the executor: its record, decoded (a re-run
    answered from the record gets the same), with the return's context modifier."""
    output = _decode(record)
    return output if modifier is None else attrs.evolve(output, context_modifier=modifier)


def _decode(record: Mapping[str, Any]) -> ToolOutput:
    content = record["content"]
    blocks: str | Sequence[ContentBlock] = (
        content if isinstance(content, str) else [block_from_api(b) for b in content]
    )
    return ToolOutput(blocks, is_error=bool(record.get("is_error", False)))


@attrs.define(eq=False)
class _Nested:
    """The model-call counters of a turn run inside a tool call (see the module)."""

    calls: int = 0
    current: int = 0
    ranks: Counter[str] = attrs.field(factory=Counter[str])


@final
@attrs.define(eq=False)
class TurnJournal:
    """Records and replays one turn's model answers and tool results."""

    store: SqlSessionStore
    turn_id: str
    recorded: dict[str, Any]
    #: The index of the next model call (the number of answers so far).
    calls: int = 0
    #: The index of the model call in progress (its tools' keys name it).
    current: int = 0
    replayed_tools: int = 0
    _ranks: Counter[str] = attrs.field(factory=Counter[str])
    _keys: dict[str, str] = attrs.field(factory=dict[str, str])
    _nested: dict[str, _Nested] = attrs.field(factory=dict[str, _Nested])
    #: Writes the records behind the turn (:mod:`._writer`); None: each record is
    #: written before the turn goes on.
    writer: RecordWriter | None = None

    def bind(self) -> None:
        """Make this the calling task's turn (its tools inherit it): :func:`current_turn_id`
        and :func:`idempotency_key` answer from it."""
        _TURN_ID.set(self.turn_id)
        _CALL_KEYS.set(self._keys)

    @classmethod
    async def open(cls, store: SqlSessionStore, turn_id: str) -> TurnJournal:
        recorded = await trio.to_thread.run_sync(store.journal, turn_id)
        return cls(store, turn_id, recorded)

    async def _record(self, key: str, value: Any) -> None:
        self.recorded[key] = value
        if self.writer is not None:  # written behind the turn, in order
            self.writer.add(key, value)
            return
        # Shielded: once the work is done its record must land, or it runs again.
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(self.store.record, self.turn_id, key, value)

    async def flushed(self) -> None:
        """Wait until every record made so far is written (at once without a writer)."""
        if self.writer is not None:
            await self.writer.flush()

    def client(self, inner: ModelClient) -> ModelClient:
        """*inner* with each answer recorded, and answered from the record when the turn
        runs again; of the same kind as *inner* (a :class:`RecoverableModelClient` stays
        one, so the loop keeps its retry policy, overload counting and last resort)."""
        if isinstance(inner, RecoverableModelClient):
            return _JournaledRecoverableClient(inner, self)
        return _JournaledClient(inner, self)

    def tools(self, tools: Sequence[Tool]) -> list[Tool]:
        return [_with_run(t, self._wrap(t)) for t in tools]

    def _wrap(self, tool: Tool) -> Any:
        run = tool.run
        if isinstance(run, SubagentRunner):  # its turn's tools are journaled too
            run = attrs.evolve(run, tools=tuple(self.tools(run.tools)))

        async def journaled(input: Mapping[str, Any], ctx: ToolContext) -> Any:
            scope = _SCOPE.get(None)
            nested = None if scope is None else self._nested.setdefault(scope, _Nested())
            current, ranks = (
                (self.current, self._ranks)
                if nested is None
                else (
                    nested.current,
                    nested.ranks,
                )
            )
            base = _call_key(current, tool.name, input, 0)[: -len("/0")]
            if scope is not None:
                base = f"{scope}/{base}"
            rank = ranks[base]
            ranks[base] += 1
            key = f"{base}/{rank}"
            self._keys[ctx.tool_use_id] = key
            if key in self.recorded:
                self.replayed_tools += 1
                return _decode(self.recorded[key])
            token = _SCOPE.set(key)  # a turn the tool runs is journaled under its key
            try:
                value = await run(input, ctx)
            finally:
                _SCOPE.reset(token)
            record, modifier = _encode(tool.name, value)
            await self._record(key, record)
            return _delivered(record, modifier)

        return journaled

    def next_call(self) -> tuple[int, AssistantMessage | None]:
        """Start the turn's next model call: its index and its recorded answer, if any.

        The index moves on only past an answer: a call cut short (and retried by the
        loop, streamed or as its last resort) leaves its index to the call that answers,
        so a re-run replays that answer at the same place, and a tool the cut call had
        started keeps its key in the retry. Inside a tool call's run, the calls are
        those of the turn it runs, counted under the call's key."""
        scope = _SCOPE.get(None)
        if scope is not None:
            nested = self._nested.setdefault(scope, _Nested())
            index = nested.current = nested.calls
            nested.ranks.clear()
            data = self.recorded.get(f"{scope}/model/{index}")
            if data is None:
                return index, None
            nested.calls = index + 1
            return index, _assistant(data)
        index = self.current = self.calls
        self._ranks.clear()
        data = self.recorded.get(f"model/{index}")
        if data is None:
            return index, None
        self.calls = index + 1
        return index, _assistant(data)

    async def record_answer(self, index: int, message: AssistantMessage) -> None:
        scope = _SCOPE.get(None)
        if scope is not None:
            await self._record(f"{scope}/model/{index}", message.to_api())
            self._nested.setdefault(scope, _Nested()).calls = index + 1
            return
        await self._record(f"model/{index}", message.to_api())
        self.calls = index + 1


def _with_run(tool: Tool, run: Any) -> Tool:
    """*tool* with another ``run``, keeping its compiled schema validator.

    ``attrs.evolve`` would build the tool anew and check its JSON schema again, for
    every tool of every durable turn (the largest single CPU cost of the benchmark's
    durable turn under a profiler). A copy with the one field replaced keeps
    everything else, validator included (same schema).
    """
    new = copy.copy(tool)
    object.__setattr__(new, "run", run)  # a frozen class: set on the fresh copy only
    return new


def _assistant(data: Mapping[str, Any]) -> AssistantMessage:
    message = message_from_api(data)
    assert isinstance(message, AssistantMessage)
    return message


@final
@attrs.define(eq=False)
class _JournaledClient:
    inner: ModelClient
    journal: TurnJournal

    def stream(
        self, **request: Unpack[StreamArguments]
    ) -> contextlib.AbstractAsyncContextManager[trio.abc.ReceiveChannel[StreamItem]]:
        index, answer = self.journal.next_call()
        if answer is not None:
            return _replay(answer)
        return _recorded(self.inner, request, self.journal, index)


@final
@attrs.define(eq=False)
class _JournaledRecoverableClient:
    """:class:`_JournaledClient` for a :class:`RecoverableModelClient`: its ``retry``,
    ``on_retry`` and ``create()`` go through, each answer recorded the same way."""

    inner: RecoverableModelClient
    journal: TurnJournal
    #: The wrapped client's policy (the wrapper lives for one turn).
    retry: RetryPolicy = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.retry = self.inner.retry

    def stream(
        self, *, on_retry: RetryObserver | None = None, **request: Unpack[StreamArguments]
    ) -> contextlib.AbstractAsyncContextManager[trio.abc.ReceiveChannel[StreamItem]]:
        index, answer = self.journal.next_call()
        if answer is not None:
            return _replay(answer)
        return _recorded(self.inner, request, self.journal, index, on_retry)

    async def create(
        self, *, on_retry: RetryObserver | None = None, **request: Unpack[StreamArguments]
    ) -> StreamResult:
        index, answer = self.journal.next_call()
        if answer is not None:
            return StreamResult(answer, ttft=None, statistics=StreamStatistics())
        await self.journal.flushed()
        result = await self.inner.create(**request, on_retry=on_retry)
        await self.journal.record_answer(index, result.message)
        return result


@trio.as_safe_channel
async def _replay(message: AssistantMessage) -> AsyncGenerator[StreamItem]:
    for block in message.content:
        yield attrs.evolve(message, content=(block,))
    yield StreamResult(message, ttft=None, statistics=StreamStatistics())


@trio.as_safe_channel
async def _recorded(
    inner: ModelClient,
    request: StreamArguments,
    journal: TurnJournal,
    index: int,
    on_retry: RetryObserver | None = None,
) -> AsyncGenerator[StreamItem]:
    await journal.flushed()  # what the answer follows is recorded before it is asked
    opened = (
        inner.stream(**request)
        if on_retry is None
        else cast(RecoverableModelClient, inner).stream(**request, on_retry=on_retry)
    )
    async with opened as items:
        async for item in items:
            if isinstance(item, StreamResult):
                await journal.record_answer(index, item.message)
            yield item
