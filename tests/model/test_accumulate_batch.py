"""feed_deltas (a run of appending deltas fed at once) must give exactly what feeding
the same events one by one gives: the result or error of every event, the message and
the statistics; and ``feed`` holds no reference cycle."""

from __future__ import annotations

import gc
import itertools
import types
import weakref
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import StreamLimitError, StreamLimits, TextBlock, ToolUseBlock, TrioAgentError
from trio_agent.lowlevel import MessageAccumulator
from trio_agent.testing import ScriptedAnswer
from trio_agent.testing import strategies as tst

#: A message_start as the scripted model sends it.
START: dict[str, Any] = ScriptedAnswer(blocks=[TextBlock("")]).events()[0]
TEXT: dict[str, Any] = {"type": "text", "text": ""}
TOOL: dict[str, Any] = {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}}


def block_start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def delta(index: Any, **d: Any) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": d}


def stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def outcome(acc: MessageAccumulator, event: Any) -> Any:
    try:
        return ("ok", acc.feed(event))
    except TrioAgentError as exc:
        return (type(exc).__name__, str(exc))


def state(acc: MessageAccumulator) -> Any:
    return (acc.message if acc.started else None, acc.statistics(), acc.stopped)


def one_by_one(events: Sequence[Any], limits: StreamLimits, cuts: list[int]) -> Any:
    """Each event's outcome, and the state at every cut (errors do not stop it)."""
    acc = MessageAccumulator(limits)
    outcomes: list[Any] = []
    states: list[Any] = []
    for position, event in enumerate(events):
        if position in cuts:
            states.append(state(acc))
        outcomes.append(outcome(acc, event))
    return outcomes, states, state(acc)


def batched(events: Sequence[Any], limits: StreamLimits, cuts: list[int]) -> Any:
    """The same, fed in batches cut at *cuts*: feed_deltas, then feed() where it stops.
    Also returns how many events feed_deltas took."""
    acc = MessageAccumulator(limits)
    outcomes: list[Any] = []
    states: list[Any] = []
    taken = 0
    for begin, end in itertools.pairwise(sorted({0, len(events), *cuts})):
        if begin in cuts:
            states.append(state(acc))  # also reads (folds) the open block mid-stream
        batch = events[begin:end]
        position = 0
        while (after := acc.feed_deltas(batch, position)) < len(batch):
            taken += after - position
            outcomes += [("ok", ())] * (after - position)
            outcomes.append(outcome(acc, batch[after]))
            position = after + 1
        taken += after - position
        outcomes += [("ok", ())] * (after - position)
    return (outcomes, states, state(acc)), taken


def read_only(draw: st.DrawFn, events: list[Any]) -> list[Any]:
    """Some events, or their deltas, as read-only mappings (never a plain dict)."""
    out: list[Any] = []
    for event in events:
        how = draw(st.sampled_from(["keep"] * 8 + ["event", "delta"]))
        if how == "event" and isinstance(event, dict):
            event = types.MappingProxyType(event)
        elif how == "delta" and isinstance(event, dict) and isinstance(event.get("delta"), dict):
            event = {**event, "delta": types.MappingProxyType(event["delta"])}
        out.append(event)
    return out


@st.composite
def batches(draw: st.DrawFn, streams: st.SearchStrategy[list[Any]]) -> Any:
    events = read_only(draw, draw(streams))
    cuts = draw(st.lists(st.integers(0, max(len(events) - 1, 0)), max_size=6))
    limit = draw(st.sampled_from([32 * 1024 * 1024, 64, 12]))
    return events, StreamLimits(max_tool_input_bytes=limit), cuts


@settings(max_examples=200, deadline=None)
@given(batches(tst.event_streams()))
def test_batches_of_valid_streams_match_one_by_one(case: Any) -> None:
    events, limits, cuts = case
    got, taken = batched(events, limits, cuts)
    assert got == one_by_one(events, limits, cuts)
    # Every text and thinking delta of a valid stream, as a plain dict, is an append.
    appends = sum(
        1
        for e in events
        if type(e) is dict
        and e["type"] == "content_block_delta"
        and type(e["delta"]) is dict
        and e["delta"]["type"] in ("text_delta", "thinking_delta")
    )
    assert taken >= appends


@settings(max_examples=300, deadline=None)
@given(batches(tst.mutated_event_streams()))
def test_batches_of_hostile_streams_match_one_by_one(case: Any) -> None:
    """Errors come at the same events, with the same messages; each later event is
    fed all the same, to reach the states an error leaves behind."""
    events, limits, cuts = case
    assert batched(events, limits, cuts)[0] == one_by_one(events, limits, cuts)


def test_a_valid_stream_is_fed_in_few_calls() -> None:
    """The text and tool input deltas of a stream go through feed_deltas: feed() is
    left the events around them (the subject of this API really runs)."""
    events = [
        START,
        block_start(0, TEXT),
        *(delta(0, type="text_delta", text=c) for c in "hello"),
        stop(0),
        block_start(1, TOOL),
        *(delta(1, type="input_json_delta", partial_json=p) for p in ['{"a"', ": 1", "}"]),
        stop(1),
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}},
        {"type": "message_stop"},
    ]
    acc = MessageAccumulator()
    fed: list[int] = []
    runs: list[tuple[int, int]] = []
    position = 0
    while (after := acc.feed_deltas(events, position)) < len(events):
        if after > position:
            runs.append((position, after))
        acc.feed(events[after])
        fed.append(after)
        position = after + 1
    assert runs == [(2, 7), (9, 12)]
    assert fed == [0, 1, 7, 8, 12, 13, 14]
    assert acc.message.content == (TextBlock("hello"), ToolUseBlock("toolu_1", "Read", {"a": 1}))
    assert acc.statistics().events == len(events)


def test_feed_deltas_without_an_open_block_feeds_nothing() -> None:
    acc = MessageAccumulator()
    events = [delta(0, type="text_delta", text="a")]
    assert acc.feed_deltas(events) == 0
    acc.feed(START)
    assert acc.feed_deltas(events) == 0
    acc.feed(block_start(0, TEXT))
    assert acc.feed_deltas(events) == 1
    acc.feed(stop(0))
    assert acc.feed_deltas(events) == 0
    assert acc.statistics().events == 4


@pytest.mark.parametrize(
    "other",
    [
        delta(0, type="citations_delta", citation={"type": "char_location"}),
        delta(1, type="text_delta", text="b"),
        delta(True, type="text_delta", text="b"),
        delta(0, type="text_delta", text=None),
        delta(0, type="thinking_delta", thinking="b"),
        {"type": "content_block_delta", "index": 0, "delta": "b"},
        {"type": "content_block_delta", "index": 0},
        stop(0),
        {"type": "ping"},
        types.MappingProxyType(delta(0, type="text_delta", text="b")),
    ],
)
def test_feed_deltas_stops_at_any_other_event(other: Mapping[str, Any]) -> None:
    acc = MessageAccumulator()
    acc.feed(START)
    acc.feed(block_start(0, TEXT))
    a = delta(0, type="text_delta", text="a")
    assert acc.feed_deltas([a, a, other, a], 0) == 2
    assert acc.feed_deltas([a, a, other, a], 1) == 2
    assert acc.feed_deltas([a, a, other, a], 3) == 4
    assert acc.feed_deltas([a, a, other, a], 4) == 4
    assert acc.feed_deltas([a], 7) == 7
    assert acc.message.text == "aaaa"
    assert acc.statistics().events == 6


def test_feed_deltas_leaves_the_tool_input_limit_to_feed() -> None:
    """Past what is certainly within the limit, feed() counts the bytes exactly and
    raises at the event one by one raises at."""
    acc = MessageAccumulator(StreamLimits(max_tool_input_bytes=12))
    acc.feed(START)
    acc.feed(block_start(0, TOOL))
    parts = ['{"', "a", '":"', "é", 'é"', "}"]  # 2 + 1 + 3 + 2 + 3 + 1 = 12 bytes
    events = [delta(0, type="input_json_delta", partial_json=p) for p in parts]
    assert acc.feed_deltas(events) == 2  # 12 // 4 characters are certainly within
    for event in events[2:]:
        assert acc.feed_deltas([event]) == 0
        assert acc.feed(event) == ()
    with pytest.raises(StreamLimitError, match="max_tool_input_bytes=12"):
        acc.feed(delta(0, type="input_json_delta", partial_json=" "))
    (block,) = acc.feed(stop(0))
    assert block == ToolUseBlock("toolu_1", "Read", {"a": "éé"})


def test_feed_deltas_refuses_a_negative_start() -> None:
    acc = MessageAccumulator()
    with pytest.raises(ValueError, match="start"):
        acc.feed_deltas([], -1)


def test_reading_the_message_between_deltas_keeps_feeding_the_open_block() -> None:
    """A snapshot joins the open block's parts (in place: feed holds on to them)."""
    acc = MessageAccumulator()
    feed = acc.feed
    feed(START)
    feed(block_start(0, TEXT))
    seen: list[str] = []
    for part in "abc":
        feed(delta(0, type="text_delta", text=part))
        acc.feed_deltas([delta(0, type="text_delta", text=part.upper())])
        seen.append(acc.message.text)
    assert seen == ["aA", "aAbB", "aAbBcC"]
    assert feed(stop(0)) == (TextBlock("aAbBcC"),)
    assert acc.statistics().events == 9


@contextmanager
def no_cycle_collector() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def test_feed_holds_no_reference_cycle() -> None:
    """feed is a closure over the accumulator's state, never over the accumulator:
    reference counting frees both, and feed outlives the accumulator it came from."""
    with no_cycle_collector():
        acc = MessageAccumulator()
        feed = acc.feed
        for event in (START, block_start(0, TEXT), delta(0, type="text_delta", text="a")):
            feed(event)
        acc_ref, feed_ref = weakref.ref(acc), weakref.ref(feed)
        del acc
        assert acc_ref() is None
        assert feed(delta(0, type="text_delta", text="b")) == ()
        assert feed(stop(0)) == (TextBlock("ab"),)
        del feed
        assert feed_ref() is None
