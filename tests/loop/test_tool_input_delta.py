"""ToolInputDelta: each streaming tool call's input, partially parsed with jiter,
coalesced to linear time; the tool still gets the strictly parsed input."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import httpx
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import (
    BlockFinished,
    OpenAIClient,
    TextBlock,
    Tool,
    ToolContext,
    ToolInputDelta,
    ToolUseBlock,
    TurnEnd,
    TurnEndReason,
    TurnOptions,
)
from trio_agent._loop._tool_input import GROWTH, MIN_STEP, PartialInputs
from trio_agent._model import StreamEvent
from trio_agent.testing import ScriptedAnswer, ScriptedModel, Timing
from trio_agent.testing.strategies import json_objects


def echo_tool(seen: list[Mapping[str, Any]]) -> Tool:
    async def run(input: Mapping[str, Any], ctx: ToolContext) -> str:
        seen.append(input)
        return "ok"

    return Tool("Write", "Write a file.", {"type": "object"}, run)


@settings(max_examples=40, deadline=None)
@given(json_objects(), st.integers(1, 40), st.integers(0, 2))
def test_partial_inputs_never_change_the_final_input(
    turn: Any, value: dict[str, Any], chunk: int, position: int
) -> None:
    """Any input, any chunking: the deltas come before the block ends, grow, show
    only keys of the final input (strings as prefixes), and the tool gets exactly
    the input the model sent."""
    seen: list[Mapping[str, Any]] = []
    call = ToolUseBlock("t1", "Write", value)
    blocks: list[Any] = [TextBlock("Writing."), TextBlock("More.")]
    blocks.insert(position, call)
    answers = [
        ScriptedAnswer(blocks=blocks, timing=Timing(token_delay=0.01, json_chunk_size=chunk)),
        ScriptedAnswer(blocks=[TextBlock("done")]),
    ]

    async def main() -> tuple[list[Any], TurnEnd]:
        return await turn(ScriptedModel(answers).client(), tools=[echo_tool(seen)], max_tokens=None)

    events, end = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert end.reason is TurnEndReason.COMPLETED
    assert seen == [value]  # the strictly parsed input, untouched
    assert end.messages[1].tool_uses[0].input == value
    deltas = [e for e in events if isinstance(e, ToolInputDelta)]
    finished = next(
        i for i, e in enumerate(events) if isinstance(e, BlockFinished) and e.block == call
    )
    size = len(json.dumps(value).encode())
    assert all(events.index(d) < finished for d in deltas)
    assert [d.received for d in deltas] == sorted({d.received for d in deltas})
    for d in deltas:
        assert (d.index, d.tool_use_id, d.name) == (position, "t1", "Write")
        assert d.received <= size
        assert set(d.partial_input) <= set(value)
        for key, part in d.partial_input.items():
            if isinstance(value[key], str):
                assert value[key].startswith(part)
    if value:  # a non-empty input always shows at least once
        assert deltas


async def test_no_deltas_when_turned_off(autojump_clock: trio.testing.MockClock, turn: Any) -> None:
    seen: list[Mapping[str, Any]] = []
    answers = [
        ScriptedAnswer(blocks=[ToolUseBlock("t1", "Write", {"content": "x" * 500})]),
        ScriptedAnswer(blocks=[TextBlock("done")]),
    ]
    on, _ = await turn(ScriptedModel(answers).client(), tools=[echo_tool(seen)], max_tokens=None)
    assert any(isinstance(e, ToolInputDelta) for e in on)
    off, end = await turn(
        ScriptedModel(answers).client(),
        tools=[echo_tool(seen)],
        max_tokens=None,
        options=TurnOptions(tool_input_deltas=False),
    )
    assert not any(isinstance(e, ToolInputDelta) for e in off)
    assert end.reason is TurnEndReason.COMPLETED


def _events(index: int, pieces: list[str]) -> list[StreamEvent]:
    start = {
        "type": "content_block_start",
        "index": index,
        "content_block": {"type": "tool_use", "id": "t1", "name": "Write", "input": {}},
    }
    out = [StreamEvent("content_block_start", start)]
    for p in pieces:
        data = {
            "type": "content_block_delta",
            "index": index,
            "delta": {"type": "input_json_delta", "partial_json": p},
        }
        out.append(StreamEvent("content_block_delta", data))
    out.append(StreamEvent("content_block_stop", {"type": "content_block_stop", "index": index}))
    return out


@given(st.integers(100_000, 400_000), st.integers(1, 64))
@settings(max_examples=10, deadline=None)
def test_parsing_is_coalesced_to_linear_work(length: int, chunk: int) -> None:
    text = json.dumps({"path": "big.txt", "content": "y" * length})
    pieces = [text[i : i + chunk] for i in range(0, len(text), chunk)]
    inputs = PartialInputs()
    deltas = [d for e in _events(0, pieces) if (d := inputs.feed(e)) is not None]
    size = len(text)
    # the geometric series of parse sizes, plus the MIN_STEP start
    assert inputs.parsed_bytes <= size * (1 + 1 / GROWTH) + 8 * MIN_STEP
    assert inputs.parses == len(deltas)
    assert len(pieces) > 10 * inputs.parses  # far fewer parses than deltas
    assert deltas[-1].partial_input["content"] == "y" * len(deltas[-1].partial_input["content"])
    assert deltas[-1].received >= size / (1 + GROWTH) - MIN_STEP


def test_bad_json_deep_nesting_and_non_objects_give_no_delta() -> None:
    for pieces in (
        ['{"a": ]', "}"],
        ["[" * 3000],
        ["[1, 2", "]"],
        ['"just a string'],
        ['{"n": NaN'],
    ):
        inputs = PartialInputs()
        assert [e for e in _events(3, pieces) if inputs.feed(e) is not None] == []
        assert inputs.parses >= 1  # it did try
    # deltas of a block never started, or not a tool_use, or after its stop: ignored
    inputs = PartialInputs()
    assert inputs.feed(_events(0, ['{"a": 1}'])[1]) is None
    text_start = StreamEvent(
        "content_block_start",
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
    )
    assert inputs.feed(text_start) is None
    assert inputs.feed(_events(0, ['{"a": 1}'])[1]) is None
    assert inputs.parses == 0
    # and a malformed event is ignored, never raised
    for data in ({"index": 0}, {"index": 0, "delta": 5}, {"index": 0, "delta": {"type": "x"}}):
        fresh = PartialInputs()
        fresh.feed(_events(0, [])[0])
        assert fresh.feed(StreamEvent("content_block_delta", data)) is None


@pytest.mark.parametrize(
    ("protocol", "api"), [("openai-responses", "responses"), ("openai-chat", "chat")]
)
async def test_openai_streams_give_deltas_too(
    autojump_clock: trio.testing.MockClock, protocol: str, api: str, turn: Any
) -> None:
    seen: list[Mapping[str, Any]] = []
    value = {"path": "notes.md", "content": "z" * 300}
    model = ScriptedModel(
        [
            ScriptedAnswer(blocks=[ToolUseBlock("call_1", "Write", value)]),
            ScriptedAnswer(blocks=[TextBlock("done")]),
        ],
        protocol=protocol,  # pyright: ignore[reportArgumentType]
    )
    http = httpx.AsyncClient(transport=model.transport())
    client = OpenAIClient(
        api=api, api_key="sk-test", base_url="http://scripted/v1", http_client=http
    )  # pyright: ignore[reportArgumentType]
    events, end = await turn(client, tools=[echo_tool(seen)], model="gpt-x", max_tokens=64)
    deltas = [e for e in events if isinstance(e, ToolInputDelta)]
    assert deltas
    assert all(d.name == "Write" and d.tool_use_id == "call_1" for d in deltas)
    assert all(value["content"].startswith(d.partial_input.get("content", "")) for d in deltas)
    assert seen == [value]
    assert end.reason is TurnEndReason.COMPLETED
