"""The accumulator's hot path (plain-dict deltas appended to the newest open block)
must behave exactly like the general path: checked differentially and on its edges."""

from __future__ import annotations

import types
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import (
    StreamLimitError,
    StreamLimits,
    StreamProtocolError,
    TextBlock,
    ToolUseBlock,
    Usage,
)
from trio_agent.lowlevel import MessageAccumulator
from trio_agent.testing import ScriptedAnswer

#: A message_start as the scripted model renders it.
START: dict[str, Any] = ScriptedAnswer(
    blocks=[], message_id="msg_1", model="m", usage=Usage(1, 1)
).events()[0]
BLOCKS: dict[str, dict[str, Any]] = {
    "text": {"type": "text", "text": ""},
    "thinking": {"type": "thinking", "thinking": "", "signature": ""},
    "tool_use": {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}},
}


def block_start(index: Any, kind: str) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": BLOCKS[kind]}


def delta(index: Any, **d: Any) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": d}


def outcome(acc: MessageAccumulator, event: Mapping[str, Any]) -> Any:
    try:
        return ("ok", acc.feed(event))
    except (StreamProtocolError, StreamLimitError) as exc:
        # The general path's message quotes repr(event), which differs by type.
        return (type(exc).__name__, str(exc).partition(":")[0])


def state(acc: MessageAccumulator) -> Any:
    return (acc.message if acc.started else None, acc.statistics())


FIELD = {
    "text_delta": "text",
    "thinking_delta": "thinking",
    "input_json_delta": "partial_json",
    "signature_delta": "signature",
    "future_delta": "text",
}
ODD_INDEXES = [True, False, 300, "0", None, 1.0, -1]
values = st.one_of(st.text(max_size=6), st.text(max_size=6), st.integers(0, 3), st.none())


@st.composite
def streams(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Mostly well-formed block sequences (so the hot path is reached), with every
    kind of mistake mixed in."""
    events: list[dict[str, Any]] = []
    opened = 0
    for _ in range(draw(st.integers(0, 30))):
        recent = [max(opened - 1, 0)] * 4 + list(range(opened + 1))
        index = draw(st.sampled_from(recent + ODD_INDEXES))
        choice = draw(st.integers(0, 9))
        if choice < 6:
            dtype = draw(st.sampled_from(list(FIELD)))
            field = draw(st.sampled_from([FIELD[dtype]] * 3 + [*FIELD.values(), "other"]))
            events.append(delta(index, **{"type": dtype, field: draw(values)}))
        elif choice == 6:
            kind = draw(st.sampled_from(list(BLOCKS)))
            events.append(block_start(opened if draw(st.booleans()) else index, kind))
            opened += 1
        elif choice == 7:
            events.append({"type": "content_block_stop", "index": index})
        elif choice == 8:
            events.append({"type": "content_block_delta", "index": index, "delta": draw(values)})
        else:
            events.append({"type": "ping"})
    return events


def general(acc: MessageAccumulator, event: Mapping[str, Any]) -> Any:
    """*event* through the general path alone (the reference the hot path must match)."""
    try:
        return ("ok", acc._state.feed(event))  # pyright: ignore[reportPrivateUsage]
    except (StreamProtocolError, StreamLimitError) as exc:
        return (type(exc).__name__, str(exc).partition(":")[0])


@settings(max_examples=300, deadline=None)
@given(streams(), st.integers(4, 40))
def test_hot_path_matches_general_path(events: list[dict[str, Any]], limit: int) -> None:
    """Every event fed by ``feed`` as a dict and as a read-only mapping (both hot path
    eligible) gives what the general path alone gives: the same result or error, the
    same message and statistics."""
    limits = StreamLimits(max_tool_input_bytes=limit)
    fast, proxied, slow = (MessageAccumulator(limits) for _ in range(3))
    for event in [START, *events]:
        want = general(slow, event)
        assert outcome(fast, event) == want, event
        assert outcome(proxied, types.MappingProxyType(event)) == want, event
        # Errors leave them in the same state too: carry on, to reach deeper states.
        assert state(fast) == state(slow) == state(proxied)
    # The hot path ran: the deltas it appended are in the open blocks' parts.
    hot = fast._state.hot  # pyright: ignore[reportPrivateUsage]
    assert hot is None or hot.parts == slow._state.hot.parts  # pyright: ignore[reportPrivateUsage, reportOptionalMemberAccess]


class _Hostile(Mapping[str, Any]):
    """A mapping whose every lookup of *key* raises *error* (and counts it)."""

    def __init__(self, data: dict[str, Any], key: str, error: Exception) -> None:
        self.data, self.key, self.error, self.lookups = data, key, error, 0

    def __getitem__(self, key: str) -> Any:
        if key == self.key:
            self.lookups += 1
            raise self.error
        return self.data[key]

    def __iter__(self) -> Any:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)


@pytest.mark.parametrize(
    "bad_delta", [[1, 2], "text_delta", None, 7, {"type": ["text_delta"], "text": "a"}]
)
def test_an_odd_delta_on_the_hot_path_is_a_typed_error(bad_delta: Any) -> None:
    acc = MessageAccumulator()
    acc.feed(START)
    acc.feed(block_start(0, "text"))
    acc.feed(delta(0, type="text_delta", text="a"))
    with pytest.raises(StreamProtocolError):
        acc.feed({"type": "content_block_delta", "index": 0, "delta": bad_delta})
    assert acc.feed(delta(0, type="text_delta", text="b")) == ()
    assert acc.message.content == (TextBlock("ab"),)


@pytest.mark.parametrize("key", ["index", "type", "delta"])
def test_a_mapping_that_raises_takes_the_general_path(key: str) -> None:
    """Whatever a hostile mapping raises on the hot path, the general path decides
    (typed error or not): nothing untyped leaves ``feed``."""
    acc = MessageAccumulator()
    acc.feed(START)
    acc.feed(block_start(0, "text"))
    event = _Hostile(delta(0, type="text_delta", text="a"), key, ValueError("boom"))
    with pytest.raises(StreamProtocolError):
        acc.feed(event)
    assert event.lookups >= 1  # the hot path (or the general one) did look
    assert acc.feed(delta(0, type="text_delta", text="b")) == ()
    assert acc.message.content == (TextBlock("b"),)


def test_boolean_index_is_not_block_one() -> None:
    acc = MessageAccumulator()
    for event in [START, block_start(0, "text"), block_start(1, "text")]:
        acc.feed(event)
    with pytest.raises(StreamProtocolError, match="integer index"):
        acc.feed(delta(True, type="text_delta", text="x"))


def test_large_indexes_and_older_open_blocks() -> None:
    acc = MessageAccumulator(StreamLimits(max_blocks=400))
    acc.feed(START)
    for i in range(300):
        acc.feed(block_start(i, "text"))
    for i in (299, 0, 299, 150):  # large (not shared) ints, and blocks left open earlier
        acc.feed(delta(int(str(i)), type="text_delta", text=f"<{i}>"))
    content = acc.message.content
    assert content[299] == TextBlock("<299><299>")
    assert content[0] == TextBlock("<0>")
    assert content[150] == TextBlock("<150>")
    assert acc.statistics().events == 305


def test_message_snapshot_follows_every_delta() -> None:
    acc = MessageAccumulator()
    acc.feed(START)
    acc.feed(block_start(0, "text"))
    seen = []
    for part in ["a", "b", "c"]:
        acc.feed(delta(0, type="text_delta", text=part))
        seen.append(acc.message.text)
        assert acc.message is acc.message  # cached until the next event
    assert seen == ["a", "ab", "abc"]
    (block,) = acc.feed({"type": "content_block_stop", "index": 0})
    assert block == TextBlock("abc")


def test_tool_input_limit_counts_utf8_bytes_on_the_hot_path() -> None:
    acc = MessageAccumulator(StreamLimits(max_tool_input_bytes=12))
    acc.feed(START)
    acc.feed(block_start(0, "tool_use"))
    for part in ['{"a"', ':"', "éé"]:  # 4 + 2 + 4 = 10 bytes, 8 characters
        acc.feed(delta(0, type="input_json_delta", partial_json=part))
    with pytest.raises(StreamLimitError, match="max_tool_input_bytes=12"):
        acc.feed(delta(0, type="input_json_delta", partial_json='é"'))  # 13 bytes


def test_tool_input_at_the_limit_is_accepted() -> None:
    acc = MessageAccumulator(StreamLimits(max_tool_input_bytes=12))
    acc.feed(START)
    acc.feed(block_start(0, "tool_use"))
    for part in ['{"a"', ':"', "é", 'é"', "}"]:  # 4 + 2 + 2 + 3 + 1 = 12 bytes
        acc.feed(delta(0, type="input_json_delta", partial_json=part))
    (block,) = acc.feed({"type": "content_block_stop", "index": 0})
    assert block == ToolUseBlock("toolu_1", "Read", {"a": "éé"})
