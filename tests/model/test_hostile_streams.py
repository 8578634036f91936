"""Hostile streams: mutate valid event streams anywhere; only typed errors come out.

Wrong JSON types at any path, missing keys, extra nesting, swapped / repeated /
dropped events. The accumulator (fast, many examples) and the real client over
ScriptedModel (under a leak check) must either give a message that round-trips
through ``to_api()`` / ``from_api()``, or raise a :class:`TrioAgentError` naming the
event; never ``TypeError`` / ``KeyError`` / ``AttributeError`` / ``RecursionError``.
"""

from __future__ import annotations

import json
import types
from collections.abc import Iterator, Mapping
from typing import Any, cast

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import (
    AnthropicClient,
    AssistantMessage,
    RetryPolicy,
    StreamProtocolError,
    TrioAgentError,
    Usage,
    UserMessage,
)
from trio_agent._messages import json_depth
from trio_agent.lowlevel import MessageAccumulator, StreamResult, message_from_api
from trio_agent.testing import (
    LeakCheck,
    RawAnswer,
    ScriptedAnswer,
    ScriptedModel,
    run_virtual,
    serve_scripted_model,
)
from trio_agent.testing import strategies as tst


def check_message(message: AssistantMessage) -> None:
    """The message is a valid history entry: JSON, and read back the same."""
    data = json.loads(json.dumps(message.to_api()))
    assert message_from_api(data).to_api() == data


@settings(max_examples=200, deadline=None)
@given(events=tst.mutated_event_streams())
def test_accumulator_raises_only_typed_errors(events: list[dict[str, Any]]) -> None:
    acc = MessageAccumulator()
    fed = 0
    try:
        for event in events:
            fed += 1
            done = acc.feed(event)
            for item in done:
                if isinstance(item, AssistantMessage):
                    check_message(item)
    except StreamProtocolError as exc:
        message = str(exc)
        assert "event" in message  # names the event
    except TrioAgentError:
        pass
    if acc.started:
        check_message(acc.message)  # the snapshot is valid, even after an error
    assert fed >= 1


async def _stream(raw: bytes) -> tuple[list[Any], BaseException | None]:
    model = ScriptedModel([RawAnswer(chunks=[(0.0, raw)])])
    items: list[Any] = []
    error: BaseException | None = None
    with LeakCheck(models=[model], processes=False, fds=False):
        try:
            async with model.client().stream(
                model="m", max_tokens=8, messages=[UserMessage("hi")]
            ) as channel:
                async for item in channel:
                    items.append(item)
        except TrioAgentError as exc:
            error = exc
    return items, error


@settings(max_examples=60, deadline=None)
@given(events=tst.mutated_event_streams())
def test_client_stream_raises_only_typed_errors_and_leaks_nothing(
    events: list[dict[str, Any]],
) -> None:
    raw = b"".join(b"event: e\ndata: " + json.dumps(e).encode() + b"\n\n" for e in events)
    items, error = run_virtual(lambda: _stream(raw))
    if error is None:
        result = items[-1]
        assert isinstance(result, StreamResult)
        check_message(result.message)
    else:
        assert isinstance(error, TrioAgentError)


async def _stream_loopback(raw: bytes) -> tuple[list[Any], BaseException | None]:
    model = ScriptedModel([RawAnswer(chunks=[(0.0, raw)])])
    items: list[Any] = []
    error: BaseException | None = None
    with LeakCheck(models=[model], processes=False, fds=False):
        async with serve_scripted_model(model) as base_url:
            client = AnthropicClient(
                api_key="test", base_url=base_url, retry=RetryPolicy(max_retries=0)
            )
            try:
                async with client.stream(
                    model="m", max_tokens=8, messages=[UserMessage("hi")]
                ) as channel:
                    async for item in channel:
                        items.append(item)
            except TrioAgentError as exc:
                error = exc
    return items, error


@settings(max_examples=15, deadline=None)
@given(events=tst.mutated_event_streams())
def test_loopback_server_stream_raises_only_typed_errors(events: list[Any]) -> None:
    """The same over a real HTTP/1.1 loopback socket (real time)."""
    raw = b"".join(b"event: e\ndata: " + json.dumps(e).encode() + b"\n\n" for e in events)
    items, error = trio.run(_stream_loopback, raw)
    if error is None:
        result = items[-1]
        assert isinstance(result, StreamResult)
        check_message(result.message)
    else:
        assert isinstance(error, TrioAgentError)


def _start(**message: Any) -> dict[str, Any]:
    """A message_start as the scripted model renders it (message "m" of model "x"),
    with *message*'s keys put in its message (the hostile values)."""
    start = ScriptedAnswer(blocks=[], message_id="m", model="x", usage=Usage(1, 1)).events()[0]
    return {"type": "message_start", "message": {**start["message"], **message}}


@pytest.mark.parametrize(
    ("key", "where"),
    [(k, "delta") for k in ("id", "type", "role", "model", "content")]
    + [(k, "event") for k in ("id", "role", "model", "content")],  # "type" is its own
)
def test_message_delta_may_not_overwrite_the_message(key: str, where: str) -> None:
    acc = MessageAccumulator()
    acc.feed(_start())
    event: dict[str, Any] = {"type": "message_delta", "delta": {}, "usage": {}}
    (event["delta"] if where == "delta" else event)[key] = 5
    with pytest.raises(StreamProtocolError, match=f"may not set the message's '{key}'"):
        acc.feed(event)


@pytest.mark.parametrize(
    ("events", "match"),
    [
        ([_start(content=5)], "content must be a list"),
        ([_start(usage={"input_tokens": "5"})], "input_tokens must be a int"),
        ([_start(usage={"input_tokens": [1]})], "input_tokens must be a int"),
        ([_start(usage={"output_tokens": True})], "output_tokens must be a int"),
        ([_start(usage=3)], "usage must be a Mapping"),
        ([_start(stop_reason=3)], "stop_reason must be a str"),
        ([_start(content=[{"type": ["text"]}])], "string type"),
        (
            [_start(content=[{"type": "tool_result", "tool_use_id": "t", "content": 5}])],
            "content must be a string or a list",
        ),
        (
            [
                _start(),
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": "", "citations": ["a"]},
                },
            ],
            "citations must be a list of objects",
        ),
        (
            [
                _start(),
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": "", "citations": 5},
                },
            ],
            "citations must be a list",
        ),
        (
            [
                _start(),
                {"type": "message_delta", "delta": {"stop_reason": 5}, "usage": {}},
            ],
            "stop_reason must be a string",
        ),
        (
            [
                _start(),
                {"type": "message_delta", "delta": {}, "usage": {"output_tokens": "9"}},
            ],
            "output_tokens must be a int",
        ),
        (
            [
                _start(),
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {
                        "type": "tool_use",
                        "id": "t",
                        "name": "n",
                        "input": {},
                        "caller": 3,
                    },
                },
            ],
            "caller must be a Mapping",
        ),
    ],
)
def test_wrong_types_name_the_event(events: list[dict[str, Any]], match: str) -> None:
    acc = MessageAccumulator()
    for event in events[:-1]:
        acc.feed(event)
    with pytest.raises(StreamProtocolError, match=match) as info:
        acc.feed(events[-1])
    assert str(info.value).startswith(f"{events[-1]['type']} event: ")


def _tool_start(index: int, tool_id: str, kind: str = "tool_use") -> dict[str, Any]:
    return {
        "type": "content_block_start",
        "index": index,
        "content_block": {"type": kind, "id": tool_id, "name": "Read", "input": {}},
    }


@pytest.mark.parametrize("kind", ["tool_use", "server_tool_use"])
def test_tool_use_in_message_start_content_is_a_protocol_error(kind: str) -> None:
    event = _start(content=[{"type": kind, "id": "t", "name": "Read", "input": {}}])
    with pytest.raises(StreamProtocolError, match=f"a {kind} block in message_start"):
        MessageAccumulator().feed(event)


@pytest.mark.parametrize("kind", ["tool_use", "server_tool_use"])
def test_duplicate_tool_use_ids_are_a_protocol_error(kind: str) -> None:
    acc = MessageAccumulator()
    for event in [_start(), _tool_start(0, "t1", kind), {"type": "content_block_stop", "index": 0}]:
        acc.feed(event)
    with pytest.raises(StreamProtocolError, match="a second tool call with id 't1'"):
        acc.feed(_tool_start(1, "t1"))


@given(depth=st.integers(1, 5000))
@settings(max_examples=30, deadline=None)
def test_deep_tool_input_is_a_limit_error_never_a_recursion_error(depth: int) -> None:
    from trio_agent import StreamLimitError, StreamLimits

    acc = MessageAccumulator(StreamLimits(max_json_depth=50))
    for event in [_start(), _tool_start(0, "t")]:
        acc.feed(event)
    raw = '{"a":' + "[" * depth + "]" * depth + "}"
    acc.feed(
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": raw},
        }
    )
    if depth + 1 > 50:
        with pytest.raises(StreamLimitError, match="nested"):
            acc.feed({"type": "content_block_stop", "index": 0})
    else:
        (block,) = acc.feed({"type": "content_block_stop", "index": 0})
        assert block.input["a"] == json.loads(raw)["a"]


class _OwnMapping(Mapping[str, Any]):
    """A Mapping that is neither a dict nor a mappingproxy (the general path)."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


@settings(max_examples=150, deadline=None)
@given(value=tst.json_objects(max_leaves=30), limit=st.integers(0, 6))
def test_json_depth_is_the_same_whatever_the_mapping_type(value: Any, limit: int) -> None:
    def convert(item: Any, wrap: Any) -> Any:
        if isinstance(item, dict):
            fields = cast("dict[str, Any]", item)
            return wrap({k: convert(v, wrap) for k, v in fields.items()})
        if isinstance(item, list):
            return tuple(convert(v, wrap) for v in cast("list[Any]", item))
        return item

    def reference(item: Any) -> int:  # recursive, unbounded
        if isinstance(item, Mapping):
            values = cast("Mapping[str, Any]", item).values()
            return 1 + max((reference(v) for v in values), default=0)
        if isinstance(item, list | tuple):
            return 1 + max((reference(v) for v in cast("list[Any]", item)), default=0)
        return 0

    expected = min(reference(value), limit + 1)
    for wrap in (dict, types.MappingProxyType, _OwnMapping):
        assert json_depth(convert(value, wrap), limit) == expected
