"""Differential: the client's final message equals the official SDK's, field for field.

The same bytes go to trio_agent's AnthropicClient (over ScriptedModel, the real client
code, in virtual time, under a leak check) and to the ``anthropic`` SDK's own SSE
decoder and accumulator (``anthropic.lib.streaming._beta_messages.accumulate_event``,
the one that knows compaction and ``context_management``). ``to_api()`` must equal
the SDK's ``to_dict()``, nulls aside: resending the history loses nothing.

The recorded streams are the SDK's own test fixtures (see ``fixtures/README.md``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from anthropic._streaming import SSEDecoder
from anthropic.lib.streaming._beta_messages import accumulate_event
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import AnthropicClient, UserMessage
from trio_agent.lowlevel import StreamResult
from trio_agent.testing import LeakCheck, RawAnswer, ScriptedModel, render_events, run_virtual
from trio_agent.testing import strategies as tst

FIXTURES = Path(__file__).parent / "fixtures"
RECORDED = sorted(
    p.name
    for p in FIXTURES.iterdir()
    if p.suffix in {".txt", ".sse"} and p.name != "incomplete_partial_json_response.txt"
)


def without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, list):
        return [without_nulls(v) for v in value]  # pyright: ignore[reportUnknownVariableType]
    return value


def sdk_message(raw: bytes) -> dict[str, Any]:
    """What the SDK accumulates from *raw* (its own SSE decoder, its own accumulator)."""
    snapshot: Any = None
    json_bufs: dict[int, bytes] = {}
    for sse in SSEDecoder().iter_bytes(iter([raw])):
        event = json.loads(sse.data)
        snapshot = accumulate_event(
            event=event,
            current_snapshot=snapshot,
            json_bufs=json_bufs,
            request_headers=httpx.Headers(),
        )
    assert snapshot is not None
    return without_nulls(snapshot.to_dict(mode="json"))


async def ours(raw: bytes) -> dict[str, Any]:
    model = ScriptedModel([RawAnswer(chunks=[(0.0, raw)])])
    items: list[Any] = []
    with LeakCheck(models=[model], processes=False, fds=False):
        client: AnthropicClient = model.client()
        async with client.stream(model="m", max_tokens=64, messages=[UserMessage("hi")]) as channel:
            async for item in channel:
                items.append(item)
    result = items[-1]
    assert isinstance(result, StreamResult)
    return without_nulls(result.message.to_api())


def recorded(name: str) -> bytes:
    """A fixture's bytes as the SDK's tests serve them (``helpers.get_response``: each
    line with a LF), plus the blank line that dispatches the last event by the SSE spec
    (the fixture files end without one)."""
    text = (FIXTURES / name).read_text()
    return b"".join(line.encode() + b"\n" for line in text.splitlines()) + b"\n"


@pytest.mark.parametrize("name", RECORDED)
async def test_recorded_sdk_streams(autojump_clock: Any, name: str) -> None:
    raw = recorded(name)
    got = await ours(raw)
    assert got == sdk_message(raw)
    assert got["content"]  # the stream held something


async def test_recorded_streams_keep_what_was_dropped_before(autojump_clock: Any) -> None:
    """The fields this test exists for: stop_details, caller, compaction content."""
    refusal = await ours(recorded("refusal_response.txt"))
    assert refusal["stop_details"]["category"] == "cyber"
    tools = await ours(recorded("tool_use_response.txt"))
    assert tools["content"][1]["caller"] == {"type": "direct"}
    compaction = await ours(recorded("compaction_response.txt"))
    assert compaction["content"][0] == {
        "type": "compaction",
        "content": "Earlier conversation summarized.",
        "encrypted_content": "EpwBCioIDxgCEAEYASJALd_opaque_compaction_payload",
    }


# -- generated streams, with the fields the scripted renderer does not send ---------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | tst.texts(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(tst.texts(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)
json_objects = st.dictionaries(st.sampled_from(["a", "type", "x_1", "ß"]), json_values, max_size=3)


@st.composite
def rich_streams(draw: st.DrawFn) -> list[dict[str, Any]]:
    events = [json.loads(json.dumps(e)) for e in draw(tst.event_streams())]
    for event in events:
        block = event.get("content_block")
        if block is not None and draw(st.booleans()):
            block["x_future"] = draw(json_values)  # a field not known today
        if (
            event["type"] == "content_block_start"
            and block["type"] in {"tool_use", "server_tool_use"}
            and draw(st.booleans())
        ):
            block["caller"] = draw(
                st.sampled_from(
                    [{"type": "direct"}, {"type": "code_execution_20250825", "tool_id": "s1"}]
                )
            )
        if event["type"] == "message_delta":
            delta = event["delta"]
            if draw(st.booleans()):
                delta["stop_details"] = {"type": "refusal", **draw(json_objects)}
            if draw(st.booleans()):
                delta["container"] = {
                    "id": draw(tst.texts(min_size=1, max_size=8)),
                    "expires_at": "2026-01-01T00:00:00Z",
                }
            if draw(st.booleans()):
                event["context_management"] = {"applied_edits": []}
            if draw(st.booleans()):
                event["usage"]["server_tool_use"] = {"web_search_requests": draw(st.integers(0, 9))}
    if draw(st.booleans()):  # a compaction block first
        content = draw(tst.texts(max_size=20))
        shift = [
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "compaction", "content": None},
            },
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {
                    "type": "compaction_delta",
                    "content": content,
                    "encrypted_content": "enc",
                },
            },
            {"type": "content_block_stop", "index": 0},
        ]
        for event in events:
            if "index" in event:
                event["index"] += 1
        events[1:1] = shift
    return events


@settings(max_examples=60, deadline=None)
@given(events=rich_streams())
def test_generated_streams_equal_the_sdk(events: list[dict[str, Any]]) -> None:
    raw = render_events(events)
    got = run_virtual(lambda: ours(raw))
    assert got == sdk_message(raw)


async def test_scripted_answers_stream_caller_and_unknown_keys(autojump_clock: Any) -> None:
    """What a ScriptedAnswer holds comes back whole: caller and unknown block keys."""
    from trio_agent import AssistantMessage, ServerToolUseBlock, TextBlock, ToolUseBlock
    from trio_agent.testing import ScriptedAnswer

    blocks = [
        TextBlock("hi", extra={"x_future": [1, {"a": None}]}),
        ToolUseBlock("t1", "Read", {"p": 1}, caller={"type": "direct"}, extra={"toolset": "s"}),
        ServerToolUseBlock("s1", "web_search", {"q": "x"}, caller={"type": "direct"}),
    ]
    answer = ScriptedAnswer(blocks=blocks)
    model = ScriptedModel([answer])
    with LeakCheck(models=[model], processes=False, fds=False):
        async with model.client().stream(
            model="m", max_tokens=8, messages=[UserMessage("hi")]
        ) as channel:
            items = [item async for item in channel]
    message = items[-1].message
    assert isinstance(message, AssistantMessage)
    assert message.content == tuple(blocks)


async def test_recorded_unfinished_tool_block_is_a_typed_error_not_a_guess(
    autojump_clock: Any,
) -> None:
    """The SDK's own incomplete-JSON fixture: the tool_use block never stops (no
    ``content_block_stop``) and its input JSON is cut. The SDK accumulates a guess (a
    partial parse of the input); here it is a StreamProtocolError naming the event,
    after the finished text block was handed out (so a turn ends with an error and
    runs no tool on a guessed input)."""
    from trio_agent import AssistantMessage, StreamProtocolError, TextBlock

    raw = recorded("incomplete_partial_json_response.txt")
    sdk = sdk_message(raw)
    assert sdk["content"][1]["input"]["filename"] == "taxes.txt"  # the SDK's guess
    model = ScriptedModel([RawAnswer(chunks=[(0.0, raw)])])
    items: list[Any] = []
    with (
        LeakCheck(models=[model], processes=False, fds=False),
        pytest.raises(StreamProtocolError, match=r"message_stop event: .*still open"),
    ):
        await _collect(model.client(), items)
    (text,) = [i for i in items if isinstance(i, AssistantMessage)]
    assert text.content == (TextBlock(sdk["content"][0]["text"]),)


async def _collect(client: AnthropicClient, items: list[Any]) -> None:
    async with client.stream(model="m", max_tokens=64, messages=[UserMessage("hi")]) as channel:
        async for item in channel:
            items.append(item)
