"""The hypothesis strategies of trio_agent.testing produce what they promise."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import AssistantMessage, ToolUseBlock
from trio_agent.testing import Faults, ScriptedAnswer, render_events, render_sse
from trio_agent.testing.strategies import (
    assistant_messages,
    chunkings,
    event_streams,
    framings,
    json_objects,
    line_endings,
    scripted_answers,
    texts,
)

SETTINGS = settings(max_examples=60, deadline=None)


@SETTINGS
@given(message=assistant_messages(max_blocks=4, tool_names=st.just("Bash")))
def test_assistant_messages_are_consistent(message: AssistantMessage) -> None:
    assert len(message.content) <= 4
    assert (message.stop_reason == "tool_use") == bool(message.tool_uses)
    assert all(t.name == "Bash" for t in message.tool_uses)
    ids = [b.id for b in message.tool_uses]
    assert len(ids) == len(set(ids))
    assert (message.stop_sequence is not None) == (message.stop_reason == "stop_sequence")
    assert AssistantMessage.from_api(message.to_api()) == message


@SETTINGS
@given(data=st.data())
def test_event_streams_accumulate_to_their_message(data: st.DataObject, reference: Any) -> None:
    message = data.draw(assistant_messages(citations=True))
    events = data.draw(event_streams(messages=st.just(message)))
    assert events[0]["type"] == "message_start"
    assert events[-1]["type"] == "message_stop"
    assert events[-2]["type"] in ("message_delta", "ping")
    indexes = [e["index"] for e in events if e["type"] == "content_block_start"]
    assert indexes == list(range(len(message.content)))
    assert reference.accumulate(events) == message.to_api()
    # and survive SSE encoding with any line ending
    ending = data.draw(line_endings())
    assert [d for _, d in reference.decode_sse(render_events(events, line_ending=ending))] == events


@SETTINGS
@given(events=event_streams())
def test_event_streams_without_a_message_are_valid(
    events: list[dict[str, Any]], reference: Any
) -> None:
    message = reference.accumulate(events)
    assert AssistantMessage.from_api(message).to_api() == message


@SETTINGS
@given(data=st.data(), length=st.integers(0, 300))
def test_chunkings_lie_inside_the_data(data: st.DataObject, length: int) -> None:
    cuts = data.draw(chunkings(length=length))
    assert list(cuts) == sorted(set(cuts))
    assert all(0 < c < length for c in cuts)
    unbounded = data.draw(chunkings(max_splits=5))
    assert len(unbounded) <= 5


def test_chunkings_can_split_at_every_byte() -> None:
    seen: set[tuple[int, ...]] = set()

    @settings(max_examples=200, deadline=None)
    @given(cuts=chunkings(length=5))
    def collect(cuts: tuple[int, ...]) -> None:
        seen.add(cuts)

    collect()
    assert (1, 2, 3, 4) in seen


@SETTINGS
@given(answer=scripted_answers(faults=framings()))
def test_scripted_answers_stream_their_message(answer: ScriptedAnswer, reference: Any) -> None:
    decoded = [d for _, d in reference.decode_sse(render_sse(answer))]
    assert reference.accumulate(decoded) == answer.message.to_api()


@SETTINGS
@given(framing=framings())
def test_framings_only_change_framing(framing: Faults) -> None:
    assert framing.stall_before_event is None
    assert framing.disconnect_after_byte is None
    assert not framing.truncate
    assert framing.error_event_after is None


@SETTINGS
@given(value=json_objects(), text=texts())
def test_json_objects_and_texts_encode(value: dict[str, Any], text: str) -> None:
    block = ToolUseBlock("toolu_1", "Read", value)
    assert ToolUseBlock.from_api(block.to_api()) == block
    text.encode("utf-8")  # never a lone surrogate
