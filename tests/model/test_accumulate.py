"""Unit tests for MessageAccumulator: each event, delta, violation and limit."""

from __future__ import annotations

import json
from typing import Any

import pytest

from trio_agent import (
    AssistantMessage,
    OpaqueBlock,
    OverloadedError,
    RedactedThinkingBlock,
    ServerToolUseBlock,
    StreamLimitError,
    StreamLimits,
    StreamProtocolError,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    Usage,
)
from trio_agent._model import _accumulate
from trio_agent.lowlevel import AccumulatorStatistics, MessageAccumulator
from trio_agent.testing import ScriptedAnswer


def start(**message: Any) -> dict[str, Any]:
    """A message_start as the scripted model renders it (message "msg_1" of model
    "claude-x", 10 input tokens), *message*'s keys put in its message."""
    event = ScriptedAnswer(blocks=[], message_id="msg_1", model="claude-x").events()[0]
    return {"type": "message_start", "message": {**event["message"], **message}}


def block_start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def delta(index: int, **d: Any) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": d}


def stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def message_delta(stop_reason: str = "end_turn", **usage: Any) -> dict[str, Any]:
    return {
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason, "stop_sequence": None},
        "usage": usage or {"output_tokens": 5},
    }


MESSAGE_STOP = {"type": "message_stop"}
TEXT = {"type": "text", "text": ""}
TOOL = {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}}


def feed_all(acc: MessageAccumulator, events: list[dict[str, Any]]) -> list[Any]:
    out: list[Any] = []
    for event in events:
        out.extend(acc.feed(event))
    return out


def test_full_message_with_every_block_kind() -> None:
    acc = MessageAccumulator()
    events = [
        start(),
        {"type": "ping"},
        block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
        delta(0, type="thinking_delta", thinking="Let me "),
        delta(0, type="thinking_delta", thinking="think."),
        delta(0, type="signature_delta", signature="sig=="),
        stop(0),
        block_start(1, TEXT),
        delta(1, type="text_delta", text="Hello"),
        delta(1, type="text_delta", text=", world"),
        stop(1),
        block_start(2, TOOL),
        delta(2, type="input_json_delta", partial_json='{"path": '),
        delta(2, type="input_json_delta", partial_json='"a.txt"}'),
        stop(2),
        block_start(3, {"type": "redacted_thinking", "data": "xyz"}),
        stop(3),
        message_delta("tool_use", output_tokens=42),
        MESSAGE_STOP,
    ]
    done = feed_all(acc, events)
    assert done[:4] == [
        ThinkingBlock("Let me think.", "sig=="),
        TextBlock("Hello, world"),
        ToolUseBlock("toolu_1", "Read", {"path": "a.txt"}),
        RedactedThinkingBlock("xyz"),
    ]
    final = done[4]
    assert isinstance(final, AssistantMessage)
    assert final == acc.message
    assert final.stop_reason == "tool_use"
    assert final.usage == Usage(input_tokens=10, output_tokens=42)
    assert final.to_api() == {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [
            {"type": "thinking", "thinking": "Let me think.", "signature": "sig=="},
            {"type": "text", "text": "Hello, world"},
            {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "a.txt"}},
            {"type": "redacted_thinking", "data": "xyz"},
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 42},
    }
    assert acc.statistics() == AccumulatorStatistics(events=19, pings=1, ignored=0)
    assert acc.stopped


def test_feed_returns_nothing_but_completions() -> None:
    acc = MessageAccumulator()
    assert acc.feed(start()) == ()
    assert acc.feed(block_start(0, TEXT)) == ()
    assert acc.feed(delta(0, type="text_delta", text="a")) == ()
    assert acc.feed(stop(0)) == (TextBlock("a"),)
    assert acc.feed(message_delta()) == ()


def test_text_starts_empty_and_grows_only_by_deltas() -> None:
    acc = MessageAccumulator()
    feed_all(acc, [start(), block_start(0, {"type": "text", "text": "ignored"})])
    assert acc.message.content == (TextBlock(""),)
    acc.feed(delta(0, type="text_delta", text="x"))
    assert acc.message.content == (TextBlock("x"),)


def test_snapshot_shows_tool_input_empty_until_stop() -> None:
    acc = MessageAccumulator()
    feed_all(
        acc, [start(), block_start(0, TOOL), delta(0, type="input_json_delta", partial_json='{"a"')]
    )
    assert acc.message.content == (ToolUseBlock("toolu_1", "Read", {}),)


@pytest.mark.parametrize("raw", ["", "  "])
def test_empty_tool_input_is_empty_object(raw: str) -> None:
    acc = MessageAccumulator()
    events = [start(), block_start(0, TOOL)]
    if raw:
        events.append(delta(0, type="input_json_delta", partial_json=raw))
    feed_all(acc, events)
    (block,) = acc.feed(stop(0))
    assert block == ToolUseBlock("toolu_1", "Read", {})
    assert isinstance(block, ToolUseBlock)
    assert block.is_valid


@pytest.mark.parametrize("raw", ['{"a": ', "[1, 2]", '"text"', "nul"])
def test_invalid_tool_input_marks_block_invalid(raw: str) -> None:
    acc = MessageAccumulator()
    feed_all(
        acc, [start(), block_start(0, TOOL), delta(0, type="input_json_delta", partial_json=raw)]
    )
    (block,) = acc.feed(stop(0))
    assert isinstance(block, ToolUseBlock)
    assert not block.is_valid
    assert block.input == {}
    assert block.invalid_input == raw


def test_server_tool_use_and_unknown_input_blocks() -> None:
    acc = MessageAccumulator()
    server = {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {}}
    mcp = {"type": "mcp_tool_use", "id": "m1", "name": "x", "server_name": "s", "input": {}}
    result = {"type": "web_search_tool_result", "tool_use_id": "srv_1", "content": []}
    done = feed_all(
        acc,
        [
            start(),
            block_start(0, server),
            delta(0, type="input_json_delta", partial_json='{"query": "trio"}'),
            stop(0),
            block_start(1, result),
            stop(1),
            block_start(2, mcp),
            delta(2, type="input_json_delta", partial_json='{"k": 1}'),
            stop(2),
        ],
    )
    assert done == [
        ServerToolUseBlock("srv_1", "web_search", {"query": "trio"}),
        OpaqueBlock(result),
        OpaqueBlock({**mcp, "input": {"k": 1}}),
    ]


def test_invalid_server_tool_input_is_a_protocol_error() -> None:
    acc = MessageAccumulator()
    server = {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {}}
    feed_all(
        acc, [start(), block_start(0, server), delta(0, type="input_json_delta", partial_json="{")]
    )
    with pytest.raises(StreamProtocolError, match="invalid input JSON"):
        acc.feed(stop(0))


def test_citations() -> None:
    acc = MessageAccumulator()
    cite = {"type": "char_location", "cited_text": "x", "document_index": 0}
    done = feed_all(
        acc,
        [
            start(),
            block_start(0, {"type": "text", "text": "", "citations": []}),
            delta(0, type="citations_delta", citation=cite),
            delta(0, type="text_delta", text="cited"),
            stop(0),
            block_start(1, TEXT),
            delta(1, type="citations_delta", citation=cite),
            stop(1),
            block_start(2, TEXT),
            stop(2),
        ],
    )
    assert done[0].to_api() == {"type": "text", "text": "cited", "citations": [cite]}
    assert done[1].to_api() == {"type": "text", "text": "", "citations": [cite]}
    assert done[2].to_api() == {"type": "text", "text": ""}


def test_message_delta_writes_stop_fields_and_cumulative_usage() -> None:
    acc = MessageAccumulator()
    feed_all(
        acc, [start(usage={"input_tokens": 7, "output_tokens": 1, "cache_read_input_tokens": 3})]
    )
    acc.feed(
        {
            "type": "message_delta",
            "delta": {"stop_reason": "stop_sequence", "stop_sequence": "END"},
            "usage": {"output_tokens": 9},
        }
    )
    acc.feed({"type": "message_delta", "delta": {}, "usage": {"output_tokens": 12}})
    message = acc.message
    assert (message.stop_reason, message.stop_sequence) == ("stop_sequence", "END")
    assert message.usage == Usage(input_tokens=7, output_tokens=12, cache_read_input_tokens=3)


def test_unknown_events_and_deltas_are_ignored_and_counted() -> None:
    acc = MessageAccumulator()
    feed_all(
        acc,
        [
            {"type": "future_event"},
            start(),
            {"type": "ping"},
            block_start(0, TEXT),
            delta(0, type="future_delta", whatever=1),
            delta(0, type="text_delta", text="ok"),
            stop(0),
            {"type": "another_future_event", "x": 1},
            message_delta(),
            MESSAGE_STOP,
            {"type": "ping"},
        ],
    )
    assert acc.message.text == "ok"
    assert acc.statistics() == AccumulatorStatistics(events=11, pings=2, ignored=3)


def test_message_start_keeps_unknown_keys_and_initial_content() -> None:
    acc = MessageAccumulator()
    acc.feed(start(container={"id": "c1"}, content=[{"type": "text", "text": "pre"}]))
    acc.feed(block_start(1, TEXT))
    acc.feed(stop(1))
    message = acc.message
    assert message.extra == {"container": {"id": "c1"}}
    assert message.content == (TextBlock("pre"), TextBlock(""))


def test_error_event_raises_its_typed_error() -> None:
    acc = MessageAccumulator()
    acc.feed(start())
    with pytest.raises(OverloadedError, match="Overloaded") as info:
        acc.feed({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    assert info.value.error_type == "overloaded_error"
    assert info.value.status_code is None


def test_message_before_start_raises() -> None:
    with pytest.raises(StreamProtocolError, match="no message_start"):
        _ = MessageAccumulator().message


VIOLATIONS: list[tuple[str, list[dict[str, Any]]]] = [
    ("before message_start", [block_start(0, TEXT)]),
    ("before message_start", [message_delta()]),
    ("before message_start", [MESSAGE_STOP]),
    ("second message_start", [start(), start()]),
    ("without a message object", [{"type": "message_start", "message": "x"}]),
    ("unknown block index 0", [start(), delta(0, type="text_delta", text="a")]),
    ("unknown block index 3", [start(), block_start(0, TEXT), stop(3)]),
    ("out of order", [start(), block_start(1, TEXT)]),
    ("out of order", [start(), block_start(0, TEXT), block_start(0, TEXT)]),
    (
        "already stopped",
        [start(), block_start(0, TEXT), stop(0), delta(0, type="text_delta", text="a")],
    ),
    ("already stopped", [start(), block_start(0, TEXT), stop(0), stop(0)]),
    (
        "integer index",
        [start(), {"type": "content_block_start", "index": "0", "content_block": TEXT}],
    ),
    ("integer index", [start(), {"type": "content_block_stop", "index": True}]),
    (
        "typed content_block",
        [start(), {"type": "content_block_start", "index": 0, "content_block": {}}],
    ),
    (
        "input_json_delta for a text block",
        [start(), block_start(0, TEXT), delta(0, type="input_json_delta", partial_json="{")],
    ),
    (
        "text_delta for a tool_use block",
        [start(), block_start(0, TOOL), delta(0, type="text_delta", text="a")],
    ),
    (
        "thinking_delta for a redacted_thinking",
        [
            start(),
            block_start(0, {"type": "redacted_thinking", "data": "d"}),
            delta(0, type="thinking_delta", thinking="a"),
        ],
    ),
    (
        "without a string 'text'",
        [start(), block_start(0, TEXT), delta(0, type="text_delta", text=3)],
    ),
    (
        "typed delta",
        [start(), block_start(0, TEXT), {"type": "content_block_delta", "index": 0, "delta": None}],
    ),
    (
        "without a citation object",
        [start(), block_start(0, TEXT), delta(0, type="citations_delta")],
    ),
    (
        "citations must be a list",
        [start(), block_start(0, {"type": "text", "text": "", "citations": "x"})],
    ),
    ("still open", [start(), block_start(0, TEXT), MESSAGE_STOP]),
    ("after message_stop", [start(), MESSAGE_STOP, message_delta()]),
    ("without a delta object", [start(), {"type": "message_delta"}]),
    ("usage must be an object", [start(), {"type": "message_delta", "delta": {}, "usage": 5}]),
    ("missing 'id'", [start(), block_start(0, {"type": "tool_use", "name": "x", "input": {}})]),
    ("must be a mapping", [["not", "a", "mapping"]]),  # type: ignore[list-item]
]


@pytest.mark.parametrize(("match", "events"), VIOLATIONS)
def test_protocol_violations(match: str, events: list[dict[str, Any]]) -> None:
    acc = MessageAccumulator()
    with pytest.raises(StreamProtocolError, match=match):
        feed_all(acc, events)


def test_violation_excerpt_is_bounded() -> None:
    acc = MessageAccumulator()
    acc.feed(start())
    with pytest.raises(StreamProtocolError) as info:
        acc.feed(delta(5, type="text_delta", text="x" * 1_000_000))
    assert len(str(info.value)) < 400


def test_decode() -> None:
    acc = MessageAccumulator(limits=StreamLimits(max_event_bytes=20))
    assert acc.decode('{"type": "ping"}') == {"type": "ping"}
    assert acc.decode(b'{"type":"ping"}') == {"type": "ping"}
    with pytest.raises(StreamLimitError, match="max_event_bytes=20"):
        acc.decode('{"type": "ping", "x": 12345}')
    with pytest.raises(StreamLimitError):  # counted in UTF-8 bytes, not characters
        acc.decode('{"type": "ééééééé"}')
    with pytest.raises(StreamProtocolError, match="not JSON"):
        acc.decode("{nope")
    with pytest.raises(StreamProtocolError, match="object with a type"):
        acc.decode("[1]")
    with pytest.raises(StreamProtocolError, match="object with a type"):
        acc.decode('{"type": 1}')


def test_tool_input_limit() -> None:
    acc = MessageAccumulator(limits=StreamLimits(max_tool_input_bytes=10))
    feed_all(
        acc,
        [start(), block_start(0, TOOL), delta(0, type="input_json_delta", partial_json='{"a": 1}')],
    )
    acc.feed(delta(0, type="input_json_delta", partial_json="  "))  # exactly 10
    with pytest.raises(StreamLimitError, match="max_tool_input_bytes=10"):
        acc.feed(delta(0, type="input_json_delta", partial_json=" "))


def test_block_limit() -> None:
    acc = MessageAccumulator(limits=StreamLimits(max_blocks=2))
    feed_all(acc, [start(), block_start(0, TEXT), stop(0), block_start(1, TEXT), stop(1)])
    with pytest.raises(StreamLimitError, match="max_blocks=2"):
        acc.feed(block_start(2, TEXT))


def test_tool_input_parsed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Linearity: input JSON is joined and parsed once per block, not per delta."""
    calls: list[int] = []
    real_loads = _accumulate.strict_loads

    def counting_loads(data: str | bytes, what: str) -> Any:
        calls.append(len(data))
        return real_loads(data, what)

    monkeypatch.setattr(_accumulate, "strict_loads", counting_loads)
    payload = json.dumps({"items": list(range(2000))})
    acc = MessageAccumulator()
    feed_all(acc, [start(), block_start(0, TOOL)])
    for i in range(0, len(payload), 3):
        acc.feed(delta(0, type="input_json_delta", partial_json=payload[i : i + 3]))
    (block,) = acc.feed(stop(0))
    assert calls == [len(payload)]
    assert isinstance(block, ToolUseBlock)
    assert block.input == {"items": list(range(2000))}


def test_repr() -> None:
    acc = MessageAccumulator()
    assert "new" in repr(acc)
    acc.feed(start())
    assert "started" in repr(acc)
    assert acc.started
    assert not acc.stopped


def test_snapshot_of_an_open_tool_use_whose_start_had_no_input() -> None:
    """The start's missing input reads as {} (as at the stop), also mid-block."""
    acc = MessageAccumulator()
    feed_all(acc, [start(), block_start(0, {"type": "tool_use", "id": "t1", "name": "Read"})])
    assert acc.message.content == (ToolUseBlock("t1", "Read", {}),)
    acc.feed(delta(0, type="input_json_delta", partial_json='{"a": 1}'))
    assert acc.message.content == (ToolUseBlock("t1", "Read", {}),)
    assert acc.feed(stop(0)) == (ToolUseBlock("t1", "Read", {"a": 1}),)
