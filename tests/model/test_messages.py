"""The wire values of trio_agent._messages: exact JSON round trips."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import (
    AssistantMessage,
    OpaqueBlock,
    RedactedThinkingBlock,
    ServerToolUseBlock,
    StreamProtocolError,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
    UserMessage,
)
from trio_agent.lowlevel import block_from_api, message_from_api
from trio_agent.testing.strategies import assistant_messages

BLOCKS: list[dict[str, Any]] = [
    {"type": "text", "text": "hi"},
    {"type": "text", "text": "quoted", "citations": [{"type": "char_location", "cited_text": "q"}]},
    {"type": "thinking", "thinking": "hmm", "signature": "sig"},
    {"type": "redacted_thinking", "data": "cmVk"},
    {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "Read",
        "input": {"path": "a", "n": [1, {"x": None}]},
    },
    {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}},
    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok", "is_error": False},
    {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": [{"type": "text", "text": "a"}],
        "is_error": True,
    },
    {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": [{"a": [1, 2]}]},
    {"type": "something_new", "payload": {"nested": ["x"]}},
]


@pytest.mark.parametrize("data", BLOCKS, ids=lambda d: d["type"])
def test_blocks_round_trip_exactly(data: dict[str, Any]) -> None:
    block = block_from_api(data)
    assert block.to_api() == data
    assert type(block).from_api(data) == block
    assert block.type == data["type"]


def test_unknown_blocks_are_opaque_and_unchanged() -> None:
    data = {"type": "something_new", "payload": {"nested": ["x"]}}
    block = block_from_api(data)
    assert isinstance(block, OpaqueBlock)
    out = block.to_api()
    assert out == data
    out["payload"]["nested"].append("y")  # to_api() is a copy
    assert block.to_api() == data


def test_block_types() -> None:
    assert isinstance(block_from_api(BLOCKS[0]), TextBlock)
    assert isinstance(block_from_api(BLOCKS[2]), ThinkingBlock)
    assert isinstance(block_from_api(BLOCKS[3]), RedactedThinkingBlock)
    assert isinstance(block_from_api(BLOCKS[4]), ToolUseBlock)
    assert isinstance(block_from_api(BLOCKS[5]), ServerToolUseBlock)
    assert isinstance(block_from_api(BLOCKS[6]), ToolResultBlock)


def test_thinking_without_signature_defaults_to_empty() -> None:
    assert ThinkingBlock.from_api({"type": "thinking", "thinking": "x"}).signature == ""


def test_invalid_tool_input_is_kept_raw() -> None:
    block = ToolUseBlock("toolu_1", "Read", {}, invalid_input='{"pa')
    assert not block.is_valid
    assert block.to_api()["input"] == {}
    assert ToolUseBlock("toolu_1", "Read", {"a": 1}).is_valid


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ({"type": "text"}, "missing 'text'"),
        ({"type": "text", "text": 3}, "wrong type"),
        ({"type": "tool_use", "id": "t", "name": "n", "input": "not an object"}, "wrong type"),
        ({"type": "redacted_thinking"}, "missing 'data'"),
    ],
)
def test_malformed_blocks_raise_protocol_errors(data: dict[str, Any], match: str) -> None:
    with pytest.raises(StreamProtocolError, match=match):
        block_from_api(data)


def test_a_block_must_be_an_object() -> None:
    with pytest.raises(StreamProtocolError, match="must be an object"):
        block_from_api(["text"])  # type: ignore[arg-type]


def test_usage_round_trip_keeps_unknown_and_null_keys() -> None:
    data = {
        "input_tokens": 10,
        "output_tokens": 2,
        "cache_creation_input_tokens": None,
        "cache_read_input_tokens": 5,
        "service_tier": "standard",
        "server_tool_use": {"web_search_requests": 1},
    }
    usage = Usage.from_api(data)
    assert usage.cache_read_input_tokens == 5
    assert usage.cache_creation_input_tokens is None
    assert usage.to_api() == data


def test_usage_merge_delta_overwrites_cumulative_counts() -> None:
    start = Usage.from_api({"input_tokens": 10, "output_tokens": 1, "service_tier": "standard"})
    merged = start.merge_delta({"output_tokens": 42, "cache_read_input_tokens": None})
    assert merged.output_tokens == 42
    assert merged.input_tokens == 10
    assert merged.cache_read_input_tokens is None
    assert merged.extra == {"service_tier": "standard"}
    assert start.merge_delta({}) is start
    assert start.merge_delta({"input_tokens": 12, "new_key": 1}).to_api() == {
        "input_tokens": 12,
        "output_tokens": 1,
        "service_tier": "standard",
        "new_key": 1,
    }


def test_usage_addition() -> None:
    total = Usage(1, 2, cache_read_input_tokens=3) + Usage(10, 20, cache_creation_input_tokens=4)
    assert total == Usage(11, 22, cache_creation_input_tokens=4, cache_read_input_tokens=3)
    assert (Usage(1, 1) + Usage(1, 1)).cache_read_input_tokens is None


MESSAGE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-x",
    "content": BLOCKS[:6],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {"input_tokens": 3, "output_tokens": 4},
    "container": None,
}


def test_assistant_message_round_trip_and_views() -> None:
    message = AssistantMessage.from_api(MESSAGE)
    assert message.to_api() == MESSAGE
    assert message.extra == {"container": None}
    assert message.text == "hiquoted"
    assert [t.id for t in message.tool_uses] == ["toolu_1"]
    assert message.to_param() == {"role": "assistant", "content": BLOCKS[:6]}
    assert message_from_api(MESSAGE) == message


def test_assistant_message_requires_id_and_model() -> None:
    with pytest.raises(StreamProtocolError, match="missing 'id'"):
        AssistantMessage.from_api({"model": "m"})


def test_request_param_messages() -> None:
    assistant = message_from_api({"role": "assistant", "content": [{"type": "text", "text": "a"}]})
    assert isinstance(assistant, AssistantMessage)
    assert assistant.to_param() == {"role": "assistant", "content": [{"type": "text", "text": "a"}]}
    user = message_from_api({"role": "user", "content": [BLOCKS[6]]})
    assert isinstance(user, UserMessage)
    assert user.tool_results == (block_from_api(BLOCKS[6]),)
    assert user.to_param() == {"role": "user", "content": [BLOCKS[6]]}
    prompt = UserMessage.from_api({"role": "user", "content": "hello"})
    assert prompt.to_api() == {"role": "user", "content": "hello"}
    assert prompt.tool_results == ()


def test_values_are_frozen() -> None:
    import attrs

    block = TextBlock("a")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        block.text = "b"  # type: ignore[misc]
    tool = ToolUseBlock("t", "n", {"a": 1})
    with pytest.raises(TypeError):
        tool.input["a"] = 2  # type: ignore[index]


@settings(max_examples=60, deadline=None)
@given(message=assistant_messages(citations=True))
def test_any_message_round_trips(message: AssistantMessage) -> None:
    data = message.to_api()
    assert AssistantMessage.from_api(data) == message
    assert AssistantMessage.from_api(data).to_api() == data
    assert message_from_api(data) == message


@given(
    extra=st.dictionaries(
        st.sampled_from(["cache_control", "x_future", "citations_meta"]),
        st.one_of(st.none(), st.integers(), st.text(max_size=3), st.just({"type": "ephemeral"})),
        max_size=3,
    ),
    kind=st.sampled_from(["text", "thinking", "redacted_thinking", "tool_use", "tool_result"]),
)
def test_unknown_keys_of_known_blocks_round_trip(extra: dict[str, Any], kind: str) -> None:
    """Nothing is dropped: a known block's unknown keys come back from to_api()."""
    from trio_agent.lowlevel import block_from_api

    base: dict[str, Any] = {
        "text": {"type": "text", "text": "t"},
        "thinking": {"type": "thinking", "thinking": "t", "signature": "s"},
        "redacted_thinking": {"type": "redacted_thinking", "data": "d"},
        "tool_use": {"type": "tool_use", "id": "t", "name": "n", "input": {}},
        "tool_result": {
            "type": "tool_result",
            "tool_use_id": "t",
            "content": "c",
            "is_error": False,
        },
    }[kind]
    data = {**base, **extra}
    assert block_from_api(data).to_api() == data
