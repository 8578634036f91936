"""Rendering scripted answers as Messages API SSE: exact bytes, exact round trips."""

from __future__ import annotations

import json
from typing import Any

import httpx
import httpx_sse
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from trio.testing import MockClock

from trio_agent import (
    OpaqueBlock,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    Usage,
)
from trio_agent.testing import (
    Faults,
    ScriptedAnswer,
    ScriptedModel,
    Timing,
    encode_event,
    plan_stream,
    render_events,
    render_sse,
)
from trio_agent.testing.strategies import assistant_messages, framings, timings

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_exact_bytes_of_a_small_answer() -> None:
    answer = ScriptedAnswer(
        blocks=[TextBlock("Hi é"), ToolUseBlock("toolu_1", "Read", {"p": 1})],
        usage=Usage(input_tokens=5, output_tokens=9),
        message_id="msg_1",
        timing=Timing(text_chunk_size=3, json_chunk_size=4),
    )
    assert render_sse(answer).decode() == (
        "event: message_start\n"
        'data: {"type":"message_start","message":{"id":"msg_1","type":"message",'
        '"role":"assistant","model":"claude-scripted","content":[],"stop_reason":null,'
        '"stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1}}}\n\n'
        "event: content_block_start\n"
        'data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n'
        "event: content_block_delta\n"
        'data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi "}}\n\n'
        "event: content_block_delta\n"
        'data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"é"}}\n\n'
        "event: content_block_stop\n"
        'data: {"type":"content_block_stop","index":0}\n\n'
        "event: content_block_start\n"
        'data: {"type":"content_block_start","index":1,"content_block":'
        '{"type":"tool_use","id":"toolu_1","name":"Read","input":{}}}\n\n'
        "event: content_block_delta\n"
        'data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\\"p\\""}}\n\n'
        "event: content_block_delta\n"
        'data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":":1}"}}\n\n'
        "event: content_block_stop\n"
        'data: {"type":"content_block_stop","index":1}\n\n'
        "event: message_delta\n"
        'data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},'
        '"usage":{"output_tokens":9}}\n\n'
        "event: message_stop\n"
        'data: {"type":"message_stop"}\n\n'
    )


def test_block_starts_and_deltas_per_block_type(reference: Any) -> None:
    answer = ScriptedAnswer(
        blocks=[
            ThinkingBlock("abcdef", "sig"),
            RedactedThinkingBlock("cmVk"),
            ToolUseBlock("toolu_1", "Ls", {}),
            OpaqueBlock({"type": "web_search_tool_result", "tool_use_id": "s", "content": []}),
        ],
        timing=Timing(text_chunk_size=4),
    )
    events = answer.events()
    starts = [e["content_block"] for e in events if e["type"] == "content_block_start"]
    assert starts == [
        {"type": "thinking", "thinking": "", "signature": ""},
        {"type": "redacted_thinking", "data": "cmVk"},
        {"type": "tool_use", "id": "toolu_1", "name": "Ls", "input": {}},
        {"type": "web_search_tool_result", "tool_use_id": "s", "content": []},
    ]
    deltas = [(e["index"], e["delta"]) for e in events if e["type"] == "content_block_delta"]
    assert deltas == [
        (0, {"type": "thinking_delta", "thinking": "abcd"}),
        (0, {"type": "thinking_delta", "thinking": "ef"}),
        (0, {"type": "signature_delta", "signature": "sig"}),
        (2, {"type": "input_json_delta", "partial_json": ""}),
    ]
    assert reference.accumulate(events) == answer.message.to_api()
    assert answer.resolved_stop_reason == "tool_use"


def test_invalid_tool_input_is_streamed_raw() -> None:
    block = ToolUseBlock("toolu_1", "Read", {}, invalid_input='{"path": ')
    events = ScriptedAnswer(blocks=[block], timing=Timing(json_chunk_size=100)).events()
    assert [e["delta"] for e in events if e["type"] == "content_block_delta"] == [
        {"type": "input_json_delta", "partial_json": '{"path": '}
    ]


def test_citations_stream_as_citations_deltas(reference: Any) -> None:
    citation = {"type": "char_location", "cited_text": "x", "document_index": 0}
    answer = ScriptedAnswer(blocks=[TextBlock("quoted", (citation,))])
    events = answer.events()
    assert events[1]["content_block"] == {"type": "text", "text": "", "citations": []}
    assert {"type": "citations_delta", "citation": citation} in [e.get("delta") for e in events]
    assert reference.accumulate(events) == answer.message.to_api()


def test_pings_every_n_events() -> None:
    answer = ScriptedAnswer(blocks=[TextBlock("abcdefgh")], timing=Timing(ping_every=2))
    kinds = [e["type"] for e in answer.events()]
    assert kinds == [
        "message_start",
        "content_block_start",
        "ping",
        "content_block_delta",
        "content_block_delta",
        "ping",
        "content_block_stop",
        "message_delta",
        "ping",
        "message_stop",
    ]


def test_extra_message_keys_and_stop_sequence(reference: Any) -> None:
    answer = ScriptedAnswer(
        blocks=[TextBlock("a")],
        stop_reason="stop_sequence",
        stop_sequence="\n\nHuman:",
        extra={"container": None},
    )
    message = reference.accumulate(answer.events())
    assert message == answer.message.to_api()
    assert message["container"] is None
    assert message["stop_sequence"] == "\n\nHuman:"


def test_render_events_and_encode_event() -> None:
    events = [{"type": "ping"}, {"type": "message_stop"}]
    assert render_events(events, line_ending="\r\n", bom=True) == (
        b'\xef\xbb\xbfevent: ping\r\ndata: {"type":"ping"}\r\n\r\n'
        b'event: message_stop\r\ndata: {"type":"message_stop"}\r\n\r\n'
    )
    assert (
        encode_event({"type": "x", "t": "\u2028"})
        == 'event: x\ndata: {"type":"x","t":"\u2028"}\n\n'.encode()
    )


def _expected_cuts(answer: ScriptedAnswer, length: int) -> set[int]:
    """Chunk boundaries computed independently of plan_stream."""
    timing, faults = answer.timing, answer.faults
    delay_of = {
        "message_start": timing.first_event_delay,
        "content_block_start": timing.block_delay,
        "content_block_delta": timing.token_delay,
    }
    explicit = bool(faults.split_at) or faults.chunk_size is not None
    cuts: set[int] = set(faults.split_at)
    if faults.chunk_size:
        cuts.update(range(0, length, faults.chunk_size))
    offset = 3 if faults.bom else 0
    for i, event in enumerate(answer.events()):
        if not explicit or delay_of.get(event["type"], 0.0) > 0:
            cuts.add(0 if i == 0 else offset)
        offset += len(encode_event(event, faults.line_ending))
    return {c for c in cuts if 0 < c < length}


@SETTINGS
@given(message=assistant_messages(citations=True), timing=timings(), framing=framings())
def test_any_message_renders_and_decodes_back_exactly(
    message: Any, timing: Timing, framing: Faults, reference: Any
) -> None:
    answer = ScriptedAnswer.from_message(message, timing=timing, faults=framing)
    events = answer.events()
    assert reference.accumulate(events) == message.to_api()
    assert answer.message == message
    data = render_sse(answer)
    assert data.startswith(b"\xef\xbb\xbf") == framing.bom
    # JSON escapes CR and LF inside strings, so every raw CR / LF is a line ending.
    if framing.line_ending == "\n":
        assert b"\r" not in data
    elif framing.line_ending == "\r":
        assert b"\n" not in data
    else:
        assert data.count(b"\r") == data.count(b"\n") == data.count(b"\r\n")
    assert reference.decode_sse(data) == [(e["type"], e) for e in events]
    plan = plan_stream(answer)
    assert plan.data == data
    assert all(chunk for _, chunk in plan.chunks)
    bounds: set[int] = set()
    offset = 0
    for _, chunk in plan.chunks[:-1]:
        offset += len(chunk)
        bounds.add(offset)
    assert bounds == _expected_cuts(answer, len(data))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    message=assistant_messages(),
    timing=timings(),
    framing=framings(),
    rest=st.sampled_from([None, 0.0, 0.5]),
)
def test_the_transport_delivers_the_plan_on_schedule(
    message: Any, timing: Timing, framing: Faults, rest: float | None
) -> None:
    answer = ScriptedAnswer.from_message(message, timing=timing, faults=framing)
    plan = plan_stream(answer)

    async def main() -> None:
        model = ScriptedModel([answer, answer])
        async with httpx.AsyncClient(transport=model.transport()) as client:
            async with client.stream("POST", "https://x/v1/messages", json={}) as response:
                start = trio.current_time()
                received: list[tuple[float, bytes]] = []
                async for chunk in response.aiter_raw():
                    received.append((trio.current_time() - start, chunk))
                    if rest is not None:
                        await trio.sleep(rest)  # a slow reader gets what was sent meanwhile
            if rest is None:
                assert received == plan.schedule()
            assert b"".join(c for _, c in received) == plan.data
            # httpx-sse over the same transport sees the same event data.
            async with httpx_sse.aconnect_sse(client, "POST", "https://x/v1/messages") as source:
                decoded = [json.loads(sse.data) async for sse in source.aiter_sse()]
            assert decoded == answer.events()
        assert model.open_streams == 0

    trio.run(main, clock=MockClock(autojump_threshold=0))


def test_encode_event_needs_a_type() -> None:
    with pytest.raises(ValueError, match="string 'type'"):
        encode_event({"data": 1})


def test_error_event_and_unsigned_thinking() -> None:
    from trio_agent.testing import error_event

    assert error_event("api_error", "boom") == {
        "type": "error",
        "error": {"type": "api_error", "message": "boom"},
    }
    assert error_event("weird_error")["error"]["message"] == "Weird error"
    events = ScriptedAnswer(blocks=[ThinkingBlock("t", "")]).events()
    assert [e["delta"]["type"] for e in events if e["type"] == "content_block_delta"] == [
        "thinking_delta"
    ]
