"""MessageAccumulator: Messages API stream events in, an AssistantMessage out.

Pure and synchronous (no Trio): feed it the decoded JSON of each server-sent event.

Example::

    acc = MessageAccumulator()
    for event in events:
        for done in acc.feed(event):
            if isinstance(done, ToolUseBlock):
                executor.add_tool(done)
    message = acc.message

Dispatch is on the event's JSON ``type`` (never the SSE event name). Text fields
start empty and grow only by deltas. Tool input JSON is collected as a list of parts,
joined and parsed once at ``content_block_stop``, so accumulating is linear in the
input size (the official SDK re-parses the partial JSON at every delta).

Speed: ``feed`` is a closure whose first lines take the deltas that only append to
the open block (nearly every event of a stream) with every check of the general path
and no attribute lookup; ``feed_deltas`` takes a run of them from a batch without a
call per event. The general path (``_Accumulation``) does everything else.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import islice
from typing import Any, ClassVar, TypeVar

import attrs
import jiter

from .._exceptions import StreamLimitError, StreamProtocolError, excerpt
from .._messages import (
    AssistantMessage,
    ContentBlock,
    OpaqueBlock,
    ServerToolUseBlock,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    Usage,
    block_from_api,
    json_depth,
)
from ._accumulate_block import (
    DELTA_FIELD,
    DELTA_KIND,
    HOT_DELTA,
    JSON_BLOCK_TYPES,
    Block,
    load_event,
    strict_loads,
    utf8_len,
)
from ._errors_http import error_from_event

__all__ = ["AccumulatorStatistics", "MessageAccumulator", "StreamLimits"]

_T = TypeVar("_T")

#: The keys of ``message_delta``'s ``delta`` and event that are not kept as message
#: fields: everything else (``stop_details``, ``container``, ``context_management``,
#: what the API adds tomorrow) goes verbatim into ``AssistantMessage.extra``.
_DELTA_KEYS = frozenset({"stop_reason", "stop_sequence"})
_EVENT_KEYS = frozenset({"type", "delta", "usage"})
#: The message's own fields: a message_delta that sets one is a protocol violation.
_MESSAGE_KEYS = frozenset({"id", "type", "role", "model", "content"})


@attrs.frozen
class StreamLimits:
    """Bounds on what one streamed answer may hold; exceeding one is a StreamLimitError.

    Attributes:
        max_event_bytes: the largest ``data`` of one server-sent event, in UTF-8 bytes.
        max_tool_input_bytes: the largest accumulated input JSON of one tool_use block.
        max_blocks: the most content blocks in one message.
        max_json_depth: the deepest nesting of objects and arrays in a tool input (so
            that nothing downstream, from validation to the transcript, recurses out
            of stack).
    """

    max_event_bytes: int = 8 * 1024 * 1024
    max_tool_input_bytes: int = 32 * 1024 * 1024
    max_blocks: int = 10_000
    max_json_depth: int = 100


@attrs.frozen
class AccumulatorStatistics:
    """Counts of what a :class:`MessageAccumulator` was fed.

    Attributes:
        events: every event fed, pings and ignored ones included.
        pings: ``ping`` events.
        ignored: events of unknown type, and deltas of unknown type.
    """

    events: int = 0
    pings: int = 0
    ignored: int = 0


def _violation(what: str, event: Mapping[str, Any]) -> StreamProtocolError:
    etype = event.get("type")
    name = etype if isinstance(etype, str) else "an"
    return StreamProtocolError(f"{name} event: {what}: {excerpt(repr(event))}")


def _checked(event: Mapping[str, Any], build: Callable[..., _T], *args: Any) -> _T:
    """``build(*args)``, its StreamProtocolError (a wrong field) naming *event*."""
    try:
        return build(*args)
    except StreamProtocolError as exc:
        raise _violation(str(exc), event) from exc


def _str_or_none(delta: Mapping[str, Any], key: str, event: Mapping[str, Any]) -> str | None:
    value = delta.get(key)
    if value is not None and not isinstance(value, str):
        raise _violation(f"{key} must be a string or null, not {type(value).__name__}", event)
    return value


class MessageAccumulator:
    """Builds one :class:`AssistantMessage` from the events of its stream.

    Args:
        limits: bounds on event size, tool input size and block count.

    Attributes:
        feed: ``feed(event)`` applies one decoded event and returns a tuple of what it
            completed: the finished block at ``content_block_stop``, the final message
            at ``message_stop``, else ``()`` (one shared empty tuple: nearly every event
            completes nothing, and a list per event is an allocation). Protocol violations raise
            :class:`StreamProtocolError`; limits raise :class:`StreamLimitError`; an
            ``error`` event raises its typed :class:`APIStatusError`. (A function,
            not a method: the deltas that only append to the open block, nearly every
            event of a stream, take a path that reads no attribute.)
        limits: the bounds in force.

    :meth:`feed_deltas` feeds a run of such deltas at once, for a caller that holds a
    batch of events.
    """

    feed: Callable[[Mapping[str, Any]], tuple[ContentBlock | AssistantMessage, ...]]

    def __init__(self, limits: StreamLimits | None = None) -> None:
        self.limits = limits if limits is not None else StreamLimits()
        self._state = _Accumulation(self.limits)
        self.feed = _hot_feed(self._state)

    def __repr__(self) -> str:
        return f"<MessageAccumulator {self._state.describe()}>"

    # -- reading ---------------------------------------------------------------------

    @property
    def started(self) -> bool:
        """True once ``message_start`` was fed."""
        return self._state.started

    @property
    def stopped(self) -> bool:
        """True once ``message_stop`` was fed."""
        return self._state.stopped

    @property
    def message(self) -> AssistantMessage:
        """A snapshot of the message so far (tool inputs are ``{}`` until their stop).

        Raises:
            StreamProtocolError: no ``message_start`` was fed yet.
        """
        return self._state.message()

    def message_for(self, *blocks: ContentBlock) -> AssistantMessage:
        """The message so far (id, model, usage...) holding just *blocks*.

        Cheap (independent of the number of blocks so far); the client uses it to hand
        out each finished block as a message of its own, as ``claude.ts`` does.
        """
        return self._state.message_for(blocks)

    def statistics(self) -> AccumulatorStatistics:
        """Counts of events, pings and ignored events so far."""
        return self._state.statistics()

    # -- decoding --------------------------------------------------------------------

    def decode(self, data: str | bytes) -> dict[str, Any]:
        """Parse one server-sent event's ``data`` into an event dict, within the limits.

        Raises:
            StreamLimitError: the data is larger than ``limits.max_event_bytes``.
            StreamProtocolError: the data is not a JSON object with a string ``type``.
        """
        limit = self.limits.max_event_bytes
        event: Any
        if type(data) is str:
            # load_event's first try inline (a call per event fewer): whatever it
            # refuses (too large, a lone surrogate, not JSON to jiter) load_event
            # decides, with its typed error.
            try:
                raw = data.encode()
                if len(raw) > limit:
                    raise ValueError("too large")
                event = jiter.from_json(raw, allow_inf_nan=False)
            except ValueError:
                event = load_event(data, limit)
        else:
            event = load_event(data, limit)
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            raise StreamProtocolError(f"event is not an object with a type: {excerpt(data)}")
        return event  # pyright: ignore[reportUnknownVariableType]

    # -- feeding in batches ----------------------------------------------------------

    def feed_deltas(self, events: Sequence[Mapping[str, Any]], start: int = 0) -> int:
        """Feed the run of appending deltas at ``events[start:]``; return where it ends.

        An appending delta is a ``text_delta``, ``thinking_delta`` or
        ``input_json_delta`` (within the size limit) for the block the newest
        ``content_block_start`` opened, while it is open, as a plain ``dict``: what
        :attr:`feed` would take without completing anything or raising. The run stops
        at the first other event; its position is returned (``len(events)`` if there
        is none, *start* if the run is empty), for the caller to :attr:`feed` it.
        Feeding a batch this way gives exactly what feeding it event by event gives
        (the message, the statistics, every error at its event), without a call per
        delta::

            position, end = 0, len(events)
            while (position := acc.feed_deltas(events, position)) < end:
                for done in acc.feed(events[position]):
                    ...
                position += 1

        Raises:
            ValueError: *start* is negative.
        """
        if start < 0:
            raise ValueError(f"start must be >= 0, not {start}")
        block = self._state.hot
        if block is None:
            return start
        index, dtype, field, parts = block.index, block.hot_type, block.hot_field, block.parts
        append, before = parts.append, len(parts)
        # Every check of feed()'s hot path (see _hot_feed), per event; the run's length
        # is what it appended. Two loops, so that text pays nothing for the tool input
        # limit.
        if not block.counted:
            for event in islice(events, start, None):
                if type(event) is dict:
                    try:
                        if event["index"] is index and event["type"] == "content_block_delta":
                            delta = event["delta"]  # pyright: ignore[reportUnknownVariableType]
                            if type(delta) is dict and delta["type"] == dtype:
                                value = delta[field]  # pyright: ignore[reportUnknownVariableType]
                                if type(value) is str:
                                    append(value)  # counts the event (see Block)
                                    continue
                    except KeyError:
                        pass
                break
        else:
            room = block.room
            for event in islice(events, start, None):
                if type(event) is dict:
                    try:
                        if event["index"] is index and event["type"] == "content_block_delta":
                            delta = event["delta"]  # pyright: ignore[reportUnknownVariableType]
                            if type(delta) is dict and delta["type"] == dtype:
                                value = delta[field]  # pyright: ignore[reportUnknownVariableType]
                                if type(value) is str and (left := room - len(value)) >= 0:
                                    room = left
                                    append(value)
                                    continue
                    except KeyError:
                        pass
                break
            block.room = room
        return start + len(parts) - before


#: Never the index of an event: the hot path's index while no block is open.
_NO_INDEX = object()


def _hot_feed(
    state: _Accumulation,
) -> Callable[[Mapping[str, Any]], tuple[ContentBlock | AssistantMessage, ...]]:
    """``feed``: the open block's appending deltas in a closure, the rest to *state*.

    The open block's index, delta type and field, and its parts' append are cell
    variables, re-read from ``state.hot`` after every event the general path took
    (only those open or close a block). The closure refers to *state*, never to the accumulator,
    so that no reference cycle keeps an accumulator alive after its last use.
    """
    general = state.feed
    block = Block(index=-1, kind="fixed", start={})
    index: object = _NO_INDEX
    dtype, field = "", ""
    append = block.parts.append
    counted = False

    def feed(event: Mapping[str, Any]) -> tuple[ContentBlock | AssistantMessage, ...]:
        # A text / thinking / tool input delta appended to the open block: every check
        # of the general path, done cheaply. Anything else, or anything unusual, takes
        # the general path, which checks everything again: so no type test of the
        # event or its delta is needed here (a list, a str or a None raises TypeError
        # at the first subscript, any other Mapping answers as the general path reads
        # it), only of the appended value. ``index is ...``: JSON decoding shares the
        # int objects of small indexes, so identity is a cheap exact test (and
        # excludes True); a larger index just takes the general path.
        nonlocal block, index, dtype, field, append, counted
        try:
            if event["index"] is index and event["type"] == "content_block_delta":
                delta = event["delta"]
                if delta["type"] == dtype:
                    value = delta[field]
                    if type(value) is str:
                        if not counted:
                            append(value)  # counts the event (see Block)
                            return ()
                        room = block.room - len(value)
                        if room >= 0:
                            block.room = room
                            append(value)
                            return ()
        except Exception:
            pass  # the general path raises the typed error, if there is one
        try:
            return general(event)
        finally:
            hot = state.hot
            if hot is None:
                index = _NO_INDEX
            else:
                block, index, dtype, field = hot, hot.index, hot.hot_type, hot.hot_field
                append, counted = hot.parts.append, hot.counted

    return feed


class _Accumulation:
    """The state of one stream's accumulation, and the general path of ``feed``."""

    def __init__(self, limits: StreamLimits) -> None:
        self.limits = limits
        self._base: AssistantMessage | None = None
        self._stop_reason: str | None = None
        self._stop_sequence: str | None = None
        self._usage = Usage()
        self._extra: Mapping[str, Any] = {}
        self._tool_ids: set[str] = set()
        self._blocks: list[Block] = []
        self._stopped = False
        self._events = 0  # events fed, except the deltas counted as Block parts
        self._pings = 0
        self._ignored = 0
        # The block the newest content_block_start opened, while it is open: deltas
        # that only append to it take the hot path (_hot_feed, feed_deltas).
        self.hot: Block | None = None
        # The last message() read, valid while no event was fed since (_count()).
        self._snapshot: AssistantMessage | None = None
        self._snapshot_at = -1

    def describe(self) -> str:
        state = "stopped" if self._stopped else "started" if self._base else "new"
        return f"{state}, {len(self._blocks)} blocks, {self._count()} events"

    # -- reading ---------------------------------------------------------------------

    @property
    def started(self) -> bool:
        return self._base is not None

    @property
    def stopped(self) -> bool:
        return self._stopped

    def message(self) -> AssistantMessage:
        count = self._count()
        if self._snapshot is None or self._snapshot_at != count:
            self._snapshot = self.message_for(tuple(b.snapshot() for b in self._blocks))
            self._snapshot_at = count
        return self._snapshot

    def message_for(self, blocks: tuple[ContentBlock, ...]) -> AssistantMessage:
        if self._base is None:
            raise StreamProtocolError("no message_start was received yet")
        return attrs.evolve(
            self._base,
            content=blocks,
            stop_reason=self._stop_reason,
            stop_sequence=self._stop_sequence,
            usage=self._usage,
            extra=self._extra,
        )

    def statistics(self) -> AccumulatorStatistics:
        return AccumulatorStatistics(events=self._count(), pings=self._pings, ignored=self._ignored)

    def _count(self) -> int:
        return self._events + sum(b.folded + len(b.parts) for b in self._blocks)

    # -- feeding ---------------------------------------------------------------------

    def feed(self, event: Mapping[str, Any]) -> tuple[ContentBlock | AssistantMessage, ...]:
        if not isinstance(event, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise StreamProtocolError(f"an event must be a mapping: {excerpt(repr(event))}")
        self._events += 1
        try:
            etype = event.get("type")
        except Exception as exc:  # a hostile mapping: only typed errors leave
            raise StreamProtocolError(
                f"an event whose type cannot be read ({type(exc).__name__})"
            ) from exc
        if etype == "ping":
            self._pings += 1
            return ()
        if etype == "error":
            raise error_from_event(event)
        handler = self._HANDLERS.get(etype) if isinstance(etype, str) else None
        if handler is None:
            self._ignored += 1
            return ()
        if self._stopped:
            raise _violation(f"{etype} after message_stop", event)
        if etype != "message_start" and self._base is None:
            raise _violation(f"{etype} before message_start", event)
        try:
            return handler(self, event)
        except (StreamProtocolError, StreamLimitError):
            raise
        except Exception as exc:
            # A net under the checks above: whatever a hostile event does, only typed
            # errors leave (never TypeError, KeyError, RecursionError...).
            raise _violation(f"malformed ({type(exc).__name__})", event) from exc

    def _message_start(
        self, event: Mapping[str, Any]
    ) -> tuple[ContentBlock | AssistantMessage, ...]:
        if self._base is not None:
            raise _violation("a second message_start", event)
        data = event.get("message")
        if not isinstance(data, Mapping):
            raise _violation("message_start without a message object", event)
        base = _checked(event, AssistantMessage.from_api, data)
        for block in base.content:
            if isinstance(block, ToolUseBlock | ServerToolUseBlock):
                # A tool call must stream (content_block_start ... stop) to be run and
                # answered; one that arrives whole here would go unanswered.
                raise _violation(f"a {block.type} block in message_start content", event)
        for block in base.content:  # blocks already complete at the start (unusual)
            self._blocks.append(
                Block(index=len(self._blocks), kind="fixed", start={}, stopped=True, final=block)
            )
        self._stop_reason, self._stop_sequence, self._usage, self._extra = (
            base.stop_reason,
            base.stop_sequence,
            base.usage,
            base.extra,
        )
        # (No copy when the start holds no content, as it nearly always does.)
        self._base = attrs.evolve(base, content=()) if base.content else base
        return ()

    def _index(self, event: Mapping[str, Any]) -> int:
        index = event.get("index")
        if not isinstance(index, int) or isinstance(index, bool):
            raise _violation("an event without an integer index", event)
        return index

    def _open_block(self, event: Mapping[str, Any], what: str) -> Block:
        index = self._index(event)
        if not 0 <= index < len(self._blocks):
            raise _violation(f"{what} for unknown block index {index}", event)
        block = self._blocks[index]
        if block.stopped:
            raise _violation(f"{what} for block {index}, which already stopped", event)
        return block

    def _content_block_start(
        self, event: Mapping[str, Any]
    ) -> tuple[ContentBlock | AssistantMessage, ...]:
        index = self._index(event)
        if index != len(self._blocks):
            raise _violation(
                f"block index {index} out of order (expected {len(self._blocks)})", event
            )
        if len(self._blocks) >= self.limits.max_blocks:
            raise StreamLimitError(f"more than max_blocks={self.limits.max_blocks} content blocks")
        start = event.get("content_block")
        if not isinstance(start, Mapping) or not isinstance(start.get("type"), str):
            raise _violation("content_block_start without a typed content_block", event)
        start_: Mapping[str, Any] = start  # pyright: ignore[reportUnknownVariableType]
        btype = start_["type"]
        block = Block(index=index, kind="fixed", start=start_)
        # Validate the start now (every field), not at the stop. Text, thinking and
        # tool input start empty and grow only by deltas (as claude.ts does).
        if btype == "text":
            block.kind = "text"
            text = _checked(event, TextBlock.from_api, {"text": "", **start_})
            if text.citations is not None:
                block.citations = list(text.citations)
            block.extra = text.extra
        elif btype == "thinking":
            block.kind = "thinking"
            thinking = _checked(event, ThinkingBlock.from_api, {"thinking": "", **start_})
            block.signature = thinking.signature
            block.extra = thinking.extra
        elif btype in JSON_BLOCK_TYPES or ("input" in start_ and btype != "redacted_thinking"):
            block.kind = "json"
            block.room = self.limits.max_tool_input_bytes // 4
            block.counted = True
            block.template = _checked(event, block_from_api, {"input": {}, **start_})
            if isinstance(block.template, ToolUseBlock | ServerToolUseBlock):
                if block.template.id in self._tool_ids:
                    # Two calls with one id cannot both be answered: the API would
                    # refuse the next request.
                    raise _violation(f"a second tool call with id {block.template.id!r}", event)
                self._tool_ids.add(block.template.id)
        elif btype == "compaction":
            block.kind = "compaction"
            block.start = dict(start_)  # compaction_delta sets its fields
        else:
            block.final = _checked(event, block_from_api, start_)
            if btype == "fallback":
                self._relabel(start_)
        self._blocks.append(block)
        hot = HOT_DELTA.get(block.kind)
        if hot is not None:
            block.hot_type, block.hot_field = hot
            self.hot = block
        return ()

    def _relabel(self, fallback: Mapping[str, Any]) -> None:
        """A ``fallback`` block names the model that now serves the answer (as the
        non-streaming message says, and the SDK's accumulator does)."""
        to = fallback.get("to")
        model = to.get("model") if isinstance(to, Mapping) else None  # pyright: ignore[reportUnknownVariableType]
        if isinstance(model, str) and self._base is not None:
            self._base = attrs.evolve(self._base, model=model)

    def _content_block_delta(
        self, event: Mapping[str, Any]
    ) -> tuple[ContentBlock | AssistantMessage, ...]:
        block = self._open_block(event, "content_block_delta")
        delta = event.get("delta")
        if not isinstance(delta, Mapping) or not isinstance(delta.get("type"), str):
            raise _violation("content_block_delta without a typed delta", event)
        delta_: Mapping[str, Any] = delta  # pyright: ignore[reportUnknownVariableType]
        dtype = delta_["type"]
        kind = DELTA_KIND.get(dtype)
        if kind is None:
            self._ignored += 1
            return ()
        if kind != block.kind:
            raise _violation(
                f"{dtype} for a {block.start.get('type', 'fixed')} block {block.index}", event
            )
        if dtype == "citations_delta":
            citation = delta_.get("citation")
            if not isinstance(citation, Mapping):
                raise _violation("citations_delta without a citation object", event)
            if block.citations is None:
                block.citations = []
            block.citations.append(citation)
            return ()
        if dtype == "compaction_delta":
            # As the SDK does: each field the delta holds replaces the block's.
            for key in ("content", "encrypted_content"):
                _str_or_none(delta_, key, event)
            fields = {k: v for k, v in delta_.items() if k != "type"}
            block.start = {**block.start, **fields}
            return ()
        field = DELTA_FIELD[dtype]
        value = delta_.get(field)
        if not isinstance(value, str):
            raise _violation(f"{dtype} without a string {field!r}", event)
        if dtype == "signature_delta":
            block.signature = value
            return ()
        if dtype == "input_json_delta":
            room = block.room - len(value)
            if room >= 0:  # certainly within the limit (see Block.room)
                block.room = room
                block.parts.append(value)
                self._events -= 1  # counted as a part
                return ()
            if block.room >= 0:  # from now on, count the UTF-8 bytes exactly
                block.size = sum(utf8_len(part) for part in block.parts)
                block.room = -1
            block.size += utf8_len(value)
            if block.size > self.limits.max_tool_input_bytes:
                raise StreamLimitError(
                    f"tool input of block {block.index} exceeds "
                    f"max_tool_input_bytes={self.limits.max_tool_input_bytes}"
                )
        block.parts.append(value)
        self._events -= 1  # counted as a part
        return ()

    def _content_block_stop(
        self, event: Mapping[str, Any]
    ) -> tuple[ContentBlock | AssistantMessage, ...]:
        block = self._open_block(event, "content_block_stop")
        block.stopped = True
        if self.hot is block:
            self.hot = None
        if block.kind == "json":
            block.final = self._finish_json(block)
        else:
            block.final = block.snapshot()
        block.folded += len(block.parts)
        block.parts = []
        return (block.final,)

    def _finish_json(self, block: Block) -> ContentBlock:
        raw = "".join(block.parts)
        template = block.template
        parsed: Any
        if raw.strip():
            try:
                parsed = strict_loads(raw, f"tool input of block {block.index}")
            except ValueError:
                parsed = None
        else:  # no input deltas: the input is what the start held (as in the SDK)
            parsed = (
                template.input
                if isinstance(template, (ToolUseBlock, ServerToolUseBlock))
                else block.start.get("input", {})
            )
        if json_depth(parsed, self.limits.max_json_depth) > self.limits.max_json_depth:
            raise StreamLimitError(
                f"content_block_stop event: the input of block {block.index} is nested "
                f"deeper than max_json_depth={self.limits.max_json_depth}"
            )
        valid = isinstance(parsed, Mapping)
        if isinstance(template, ToolUseBlock):
            if valid:
                return attrs.evolve(template, input=parsed)
            return attrs.evolve(template, input={}, invalid_input=raw)
        if not valid:
            raise StreamProtocolError(
                f"content_block_stop event: {block.start['type']} block {block.index} "
                f"has invalid input JSON: {excerpt(raw)}"
            )
        if isinstance(template, ServerToolUseBlock):
            return attrs.evolve(template, input=parsed)
        return OpaqueBlock({**block.start, "input": parsed})

    def _message_delta(
        self, event: Mapping[str, Any]
    ) -> tuple[ContentBlock | AssistantMessage, ...]:
        delta = event.get("delta")
        if not isinstance(delta, Mapping):
            raise _violation("message_delta without a delta object", event)
        delta_: Mapping[str, Any] = delta  # pyright: ignore[reportUnknownVariableType]
        stop_reason = _str_or_none(delta_, "stop_reason", event)
        stop_sequence = _str_or_none(delta_, "stop_sequence", event)
        usage = event.get("usage")
        if usage is not None:
            if not isinstance(usage, Mapping):
                raise _violation("message_delta usage must be an object", event)
            self._usage = _checked(event, self._usage.merge_delta, usage)
        if "stop_reason" in delta_:
            self._stop_reason = stop_reason
        if "stop_sequence" in delta_:
            self._stop_sequence = stop_sequence
        # Nothing is dropped: every other field is kept verbatim on the message (a
        # null does not erase what an earlier event set, as in the SDK).
        extra = dict(self._extra)
        for fields, known in ((delta_, _DELTA_KEYS), (event, _EVENT_KEYS)):
            for key, value in fields.items():
                if key in known:
                    continue
                if key in _MESSAGE_KEYS:
                    raise _violation(f"message_delta may not set the message's {key!r}", event)
                if value is not None or key not in extra:
                    extra[key] = value
        if extra != self._extra:
            self._extra = extra
        return ()

    def _message_stop(
        self, event: Mapping[str, Any]
    ) -> tuple[ContentBlock | AssistantMessage, ...]:
        for block in self._blocks:
            if not block.stopped:
                raise _violation(f"message_stop while block {block.index} is still open", event)
        self._stopped = True
        return (self.message(),)

    _HANDLERS: ClassVar[Mapping[str, Any]] = {
        "message_start": _message_start,
        "content_block_start": _content_block_start,
        "content_block_delta": _content_block_delta,
        "content_block_stop": _content_block_stop,
        "message_delta": _message_delta,
        "message_stop": _message_stop,
    }
