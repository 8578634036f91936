"""Hypothesis strategies for messages, event streams and byte framings.

Needs the ``testing`` extra (hypothesis). Every strategy takes keyword-only arguments,
in hypothesis' house style.

Example::

    @given(message=assistant_messages(), framing=framings())
    def test_round_trip(message, framing):
        answer = ScriptedAnswer.from_message(message, faults=framing)
        ...
"""

from __future__ import annotations

import itertools
import json
import string
from collections.abc import Iterable, Sequence
from typing import Any, cast

try:
    from hypothesis import strategies as st
except ModuleNotFoundError as exc:  # a core-only install: say what to install
    raise ModuleNotFoundError(
        "No module named 'hypothesis': trio_agent.testing.strategies needs "
        "pip install 'trio-agent[testing]'",
        name=exc.name,
    ) from exc

from .._messages import (
    AssistantMessage,
    ContentBlock,
    RedactedThinkingBlock,
    ServerToolUseBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
    UserMessage,
    _plain,  # pyright: ignore[reportPrivateUsage]
)
from ._answers import Faults, LineEnding, ScriptedAnswer, Timing
from ._message_events import stream_events, tool_json

__all__ = [
    "assistant_messages",
    "chunkings",
    "event_streams",
    "framings",
    "histories",
    "json_objects",
    "line_endings",
    "mutated_event_streams",
    "scripted_answers",
    "texts",
    "timings",
]

# Characters that break naive decoders: line separators that str.splitlines() honours
# but SSE does not, multi-byte UTF-8, CR/LF inside JSON strings, NUL.
_TRICKY = '\u2028\u2029\u0085\r\n\x00\x0b\x1c"\\é漢😀\ufeff'
_BASE64 = string.ascii_letters + string.digits + "+/="
_TOOL_NAMES = ("Read", "Write", "Bash", "Grep", "Glob", "WebFetch", "mcp__srv__do_it")


def texts(*, min_size: int = 0, max_size: int = 60) -> st.SearchStrategy[str]:
    """Text with non-ASCII, U+2028/U+2029/U+0085, CR/LF and quotes mixed in."""
    return st.text(
        alphabet=st.one_of(st.characters(codec="utf-8"), st.sampled_from(_TRICKY)),
        min_size=min_size,
        max_size=max_size,
    )


def json_objects(*, max_leaves: int = 12) -> st.SearchStrategy[dict[str, Any]]:
    """JSON objects (tool inputs): nested lists and objects, finite floats, tricky text."""
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**63), max_value=2**63),
        st.floats(allow_nan=False, allow_infinity=False),
        texts(max_size=20),
    )
    values = st.recursive(
        scalars,
        lambda children: st.one_of(
            st.lists(children, max_size=4),
            st.dictionaries(texts(max_size=10), children, max_size=4),
        ),
        max_leaves=max_leaves,
    )
    return st.dictionaries(texts(max_size=10), values, max_size=5)


@st.composite
def _blocks(
    draw: st.DrawFn,
    index: int,
    tool_names: st.SearchStrategy[str],
    citations: bool,
) -> ContentBlock:
    kinds = ["text", "thinking", "redacted_thinking", "tool_use", "server_tool_use"]
    kind = draw(st.sampled_from(kinds))
    if kind == "text":
        cites: tuple[dict[str, Any], ...] | None = None
        if citations and draw(st.booleans()):
            cites = tuple(
                draw(
                    st.lists(
                        st.fixed_dictionaries(
                            {
                                "type": st.just("char_location"),
                                "cited_text": texts(max_size=10),
                                "document_index": st.integers(0, 3),
                                "start_char_index": st.integers(0, 100),
                                "end_char_index": st.integers(0, 100),
                            }
                        ),
                        max_size=2,
                    )
                )
            )
        return TextBlock(draw(texts()), cites)
    if kind == "thinking":
        return ThinkingBlock(draw(texts()), draw(st.text(_BASE64, min_size=1, max_size=40)))
    if kind == "redacted_thinking":
        return RedactedThinkingBlock(draw(st.text(_BASE64, min_size=1, max_size=60)))
    suffix = draw(st.text(string.ascii_letters + string.digits, max_size=12))
    if kind == "tool_use":
        return ToolUseBlock(f"toolu_{index:02d}{suffix}", draw(tool_names), draw(json_objects()))
    return ServerToolUseBlock(f"srvtoolu_{index:02d}{suffix}", "web_search", draw(json_objects()))


@st.composite
def _assistant_messages(
    draw: st.DrawFn,
    max_blocks: int,
    tool_names: st.SearchStrategy[str],
    citations: bool,
) -> AssistantMessage:
    count = draw(st.integers(0, max_blocks))
    content = [draw(_blocks(i, tool_names, citations)) for i in range(count)]
    if any(isinstance(b, ToolUseBlock) for b in content):
        stop_reason = "tool_use"
    else:
        stop_reason = draw(st.sampled_from(["end_turn", "max_tokens", "stop_sequence"]))
    stop_sequence = draw(texts(min_size=1, max_size=5)) if stop_reason == "stop_sequence" else None
    cache = st.none() | st.integers(0, 10_000)
    usage = Usage(
        input_tokens=draw(st.integers(0, 100_000)),
        output_tokens=draw(st.integers(0, 10_000)),
        cache_creation_input_tokens=draw(cache),
        cache_read_input_tokens=draw(cache),
    )
    return AssistantMessage(
        id="msg_" + draw(st.text(string.ascii_letters + string.digits, min_size=1, max_size=24)),
        model=draw(st.sampled_from(["claude-scripted", "claude-sonnet-4-5", "claude-opus-4-1"])),
        content=content,
        stop_reason=stop_reason,
        stop_sequence=stop_sequence,
        usage=usage,
    )


def assistant_messages(
    *,
    max_blocks: int = 5,
    tool_names: st.SearchStrategy[str] | Sequence[str] = _TOOL_NAMES,
    citations: bool = False,
) -> st.SearchStrategy[AssistantMessage]:
    """Complete assistant messages as the API would return them.

    Blocks: text (non-ASCII, U+2028/U+2029/U+0085 inside), thinking with a signature,
    redacted thinking, ``tool_use`` with JSON inputs and unique ids, ``server_tool_use``.
    The stop reason is ``tool_use`` exactly when a block is a tool use.

    Args:
        max_blocks: At most this many content blocks (possibly none).
        tool_names: Tool names to use, as a strategy or a sequence.
        citations: Also generate text blocks with citations (``citations_delta``).
    """
    if not isinstance(tool_names, st.SearchStrategy):
        tool_names = st.sampled_from(tuple(tool_names))
    return _assistant_messages(max_blocks, tool_names, citations)


@st.composite
def _histories(draw: st.DrawFn, max_exchanges: int, max_blocks: int) -> list[Any]:
    history: list[Any] = [UserMessage(draw(texts(min_size=1)))]
    for _ in range(draw(st.integers(0, max_exchanges))):
        answer = draw(assistant_messages(max_blocks=max_blocks))
        history.append(answer)
        if answer.tool_uses:
            history.append(
                UserMessage(
                    tuple(
                        ToolResultBlock(use.id, draw(texts()), is_error=draw(st.booleans()))
                        for use in answer.tool_uses
                    )
                )
            )
        elif draw(st.booleans()):
            history.append(UserMessage(draw(texts(min_size=1))))
        else:
            history.append(UserMessage((TextBlock(draw(texts(min_size=1))),)))
    return history


def histories(
    *, max_exchanges: int = 6, max_blocks: int = 4
) -> st.SearchStrategy[list[UserMessage | AssistantMessage]]:
    """Conversation histories as a session holds them: a prompt, then answers (any
    blocks, see :func:`assistant_messages`), each followed by the results of its tool
    uses, or by a next prompt (a string or text blocks). It ends with a user message.

    Args:
        max_exchanges: At most this many answers.
        max_blocks: At most this many blocks per answer.
    """
    return _histories(max_exchanges, max_blocks)


def timings(*, max_delay: float = 1.0) -> st.SearchStrategy[Timing]:
    """Timings with delays in ``[0, max_delay]``, chunk sizes from 1, optional pings."""
    delays = st.floats(min_value=0.0, max_value=max_delay, allow_nan=False)
    return st.builds(
        Timing,
        first_event_delay=delays,
        token_delay=delays,
        block_delay=delays,
        json_chunk_size=st.integers(1, 32),
        text_chunk_size=st.integers(1, 16),
        ping_every=st.none() | st.integers(1, 6),
    )


def line_endings() -> st.SearchStrategy[LineEnding]:
    """``"\\n"``, ``"\\r\\n"`` or ``"\\r"``."""
    return st.sampled_from(["\n", "\r\n", "\r"])


def chunkings(
    *, length: int | None = None, max_splits: int = 32
) -> st.SearchStrategy[tuple[int, ...]]:
    """Sorted, distinct byte positions to cut a stream at (for ``Faults(split_at=...)``).

    With *length*, positions lie strictly inside ``range(length)`` and "every byte" is
    one of the cases; without it, positions go up to 4096 (those past the end of a
    stream are ignored).
    """
    upper = 4096 if length is None else length - 1
    if upper < 1:
        return st.just(())
    some = st.lists(st.integers(1, upper), max_size=max_splits, unique=True).map(
        lambda cuts: tuple(sorted(cuts))
    )
    if length is None or length > 4096:
        return some
    return st.one_of(some, st.just(tuple(range(1, length))))


def framings(*, max_splits: int = 32) -> st.SearchStrategy[Faults]:
    """Faults that must not change what a correct client decodes.

    Byte splits (anywhere, including inside UTF-8 sequences and between CR and LF),
    a fixed chunk size, the line ending and a BOM.
    """
    return st.builds(
        Faults,
        split_at=chunkings(max_splits=max_splits) | chunkings(length=600, max_splits=max_splits),
        chunk_size=st.none() | st.integers(1, 64),
        line_ending=line_endings(),
        bom=st.booleans(),
    )


def scripted_answers(
    *,
    messages: st.SearchStrategy[AssistantMessage] | None = None,
    timings: st.SearchStrategy[Timing] | None = None,
    faults: st.SearchStrategy[Faults] | None = None,
) -> st.SearchStrategy[ScriptedAnswer]:
    """Answers streaming a generated message; by default clean, with random timing.

    Args:
        messages: The messages to stream (default :func:`assistant_messages`).
        timings: Their timing (default :func:`timings`).
        faults: Their faults (default none; :func:`framings` for harmless ones).
    """
    return st.builds(
        ScriptedAnswer.from_message,
        messages if messages is not None else assistant_messages(),
        timing=timings if timings is not None else _default_timings(),
        faults=faults if faults is not None else st.just(Faults()),
    )


def _default_timings() -> st.SearchStrategy[Timing]:
    return timings()


def _pieces(draw: st.DrawFn, text: str) -> list[str]:
    """*text* cut at random points (code points), sometimes with empty pieces."""
    if not text:
        return []
    cuts = draw(st.lists(st.integers(0, len(text)), max_size=min(8, len(text) + 1)))
    bounds = [0, *sorted(cuts), len(text)]
    pieces = [text[a:b] for a, b in itertools.pairwise(bounds)]
    return [p for p in pieces if p] if not draw(st.booleans()) else pieces


def _deltas(draw: st.DrawFn, block: ContentBlock) -> list[dict[str, Any]]:
    if isinstance(block, TextBlock):
        deltas: list[dict[str, Any]] = [
            {"type": "text_delta", "text": p} for p in _pieces(draw, block.text)
        ]
        # Citations go anywhere among the text deltas, in their own order.
        citations = list(block.citations or ())
        positions = sorted(draw(st.integers(0, len(deltas))) for _ in citations)
        for shift, (position, citation) in enumerate(zip(positions, citations, strict=True)):
            deltas.insert(
                position + shift, {"type": "citations_delta", "citation": _plain(citation)}
            )
        return deltas
    if isinstance(block, ThinkingBlock):
        deltas = [{"type": "thinking_delta", "thinking": p} for p in _pieces(draw, block.thinking)]
        if block.signature:
            deltas.append({"type": "signature_delta", "signature": block.signature})
        return deltas
    if isinstance(block, ToolUseBlock | ServerToolUseBlock):
        pieces = _pieces(draw, tool_json(block))
        if not pieces or draw(st.booleans()):
            pieces.insert(0, "")  # the API often opens with an empty partial_json
        return [{"type": "input_json_delta", "partial_json": p} for p in pieces]
    return []


@st.composite
def _event_streams(
    draw: st.DrawFn, messages: st.SearchStrategy[AssistantMessage]
) -> list[dict[str, Any]]:
    message = draw(messages)
    usage = message.usage.to_api()
    start = message.to_api()
    start.update(
        content=[],
        stop_reason=None,
        stop_sequence=None,
        usage={**usage, "output_tokens": draw(st.integers(0, message.usage.output_tokens))},
    )
    events = stream_events(start, message, lambda block: _deltas(draw, block))
    # Pings may come anywhere after message_start and before message_stop.
    pings = draw(st.lists(st.integers(1, len(events) - 1), max_size=4))
    for position in sorted(pings, reverse=True):
        events.insert(position, {"type": "ping"})
    return events


def event_streams(
    *, messages: st.SearchStrategy[AssistantMessage] | None = None
) -> st.SearchStrategy[list[dict[str, Any]]]:
    """Valid Messages API event sequences (raw dicts) that accumulate to a message.

    Text, thinking and tool JSON are cut at random points (empty pieces included),
    pings are interleaved. To know the message, draw it first and pass
    ``messages=st.just(message)``.
    """
    return _event_streams(messages if messages is not None else assistant_messages())


#: Values of the wrong JSON type for almost any field of an event.
_HOSTILE = st.one_of(
    st.integers(-3, 3),
    st.just(2**70),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=5),
    st.lists(st.text(max_size=3), max_size=3),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.just({"type": ["text"]}),
    st.just([{"type": "text"}]),
    st.just({"type": "text", "text": 1}),
    st.just({"type": "tool_result", "tool_use_id": "t", "content": 5}),
)


def _children(prefix: tuple[Any, ...], node: Any) -> list[tuple[tuple[Any, ...], Any]]:
    items: Iterable[tuple[Any, Any]] = ()
    if isinstance(node, dict):
        items = cast("dict[Any, Any]", node).items()
    elif isinstance(node, list):
        items = enumerate(cast("list[Any]", node))
    return [((*prefix, key), inner) for key, inner in items]


def _paths(value: Any) -> list[tuple[Any, ...]]:
    """Every path to a value inside *value* (dict keys and list indexes), in pre-order;
    iterative, so a drawing never depends on how much stack is left."""
    out: list[tuple[Any, ...]] = []
    stack = _children((), value)[::-1]
    while stack:
        path, node = stack.pop()
        out.append(path)
        stack.extend(_children(path, node)[::-1])
    return out


def _mutate(draw: st.DrawFn, events: list[Any]) -> None:
    how = draw(st.sampled_from(["replace", "delete", "nest", "swap", "repeat", "drop"]))
    i = draw(st.integers(0, len(events) - 1))
    if how == "swap":
        j = draw(st.integers(0, len(events) - 1))
        events[i], events[j] = events[j], events[i]
    elif how == "repeat":
        events.insert(i, json.loads(json.dumps(events[i])))
    elif how == "drop":
        if len(events) > 1:
            del events[i]
    else:
        targets = _paths(events[i])
        if not targets:
            return
        path = draw(st.sampled_from(targets))
        parent: Any = events[i]
        for step in path[:-1]:
            parent = parent[step]
        key = path[-1]
        if how == "replace":
            parent[key] = draw(_HOSTILE)
        elif how == "nest":
            parent[key] = draw(st.sampled_from([[parent[key]], {"v": parent[key]}]))
        else:
            del parent[key]


@st.composite
def _mutated_event_streams(
    draw: st.DrawFn, streams: st.SearchStrategy[list[dict[str, Any]]], max_mutations: int
) -> list[Any]:
    events: list[Any] = json.loads(json.dumps(draw(streams)))
    for _ in range(draw(st.integers(1, max_mutations))):
        _mutate(draw, events)
    return events


def mutated_event_streams(
    *, streams: st.SearchStrategy[list[dict[str, Any]]] | None = None, max_mutations: int = 3
) -> st.SearchStrategy[list[Any]]:
    """Valid event streams (:func:`event_streams`) broken in 1 to *max_mutations* ways.

    Each mutation is one of: a value anywhere replaced by one of the wrong JSON type
    (an int for a list, a list of strings for citations, strings for usage counts, a
    list as a block ``type``...), a key deleted, a value nested one level deeper,
    two events swapped, an event repeated, an event dropped. Some results are still
    valid streams; most are not. For proving that only typed errors come out.
    """
    return _mutated_event_streams(
        streams if streams is not None else event_streams(), max_mutations
    )
