"""Chat Completions may send a tool call's function name in pieces (``get_`` then
``weather``); the pieces are joined, as the official SDK's stream accumulation does,
whatever the cutting, over a real loopback server."""

from __future__ import annotations

import json
from typing import Any

import trio
from hypothesis import given, settings
from hypothesis import strategies as st

import trio_agent as ta
from trio_agent.testing import RawAnswer, ScriptedModel, serve_scripted_model


def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": "gpt-x",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def cut(text: str, points: list[int]) -> list[str]:
    """*text* in pieces at *points* (each piece non-empty)."""
    marks = sorted({p for p in points if 0 < p < len(text)})
    return [text[a:b] for a, b in zip([0, *marks], [*marks, len(text)], strict=True)]


calls = st.lists(
    st.tuples(
        st.from_regex(r"[a-z][a-z_]{0,20}", fullmatch=True),
        st.dictionaries(st.sampled_from(["city", "n", "q"]), st.integers(0, 9), max_size=3),
        st.lists(st.integers(1, 20), max_size=4),
        st.lists(st.integers(1, 30), max_size=4),
    ),
    min_size=1,
    max_size=3,
)


def stream(spec: list[tuple[str, dict[str, int], list[int], list[int]]]) -> bytes:
    parts = [chunk({"role": "assistant", "content": None})]
    for position, (name, args, name_cuts, arg_cuts) in enumerate(spec):
        names = cut(name, name_cuts)
        for i, piece in enumerate(names):
            call: dict[str, Any] = {"index": position, "function": {"name": piece}}
            if i == 0:
                call |= {"id": f"call_{position}", "type": "function"}
                call["function"]["arguments"] = ""
            parts.append(chunk({"tool_calls": [call]}))
        for piece in cut(json.dumps(args), arg_cuts):
            parts.append(
                chunk({"tool_calls": [{"index": position, "function": {"arguments": piece}}]})
            )
    parts.append(chunk({}, finish="tool_calls"))
    return b"".join(parts) + b"data: [DONE]\n\n"


async def stream_once(
    data: bytes, **client_kw: Any
) -> ta.lowlevel.StreamResult | ta.StreamProtocolError:
    """The stream's result, or the protocol error it raised (caught inside the
    server's nursery, so it is not wrapped in a group)."""
    model = ScriptedModel([RawAnswer(chunks=[(0.0, data)])], protocol="openai-chat")
    async with serve_scripted_model(model) as base_url:
        client = ta.OpenAIClient(
            api_key="sk-test",
            base_url=base_url + "/v1",
            api="chat",
            retry=ta.RetryPolicy.never(),
            **client_kw,
        )
        try:
            async with client.stream(
                model="gpt-x", messages=[ta.UserMessage("hi")], max_tokens=64
            ) as items:
                results = [i async for i in items if isinstance(i, ta.lowlevel.StreamResult)]
        except ta.StreamProtocolError as exc:
            return exc
    (result,) = results
    return result


@settings(max_examples=25, deadline=None)
@given(spec=calls, early=st.booleans())
def test_a_name_in_pieces_is_one_name(
    spec: list[tuple[str, dict[str, int], list[int], list[int]]], early: bool
) -> None:
    result = trio.run(lambda: stream_once(stream(spec), early_tool_start=early))
    assert isinstance(result, ta.lowlevel.StreamResult), result
    uses = result.message.tool_uses
    assert [(u.id, u.name, dict(u.input)) for u in uses] == [
        (f"call_{i}", name, args) for i, (name, args, _, _) in enumerate(spec)
    ]


def test_the_issues_example() -> None:
    data = (
        chunk({"role": "assistant"})
        + chunk(
            {
                "tool_calls": [
                    {"index": 0, "id": "c1", "type": "function", "function": {"name": "get_"}}
                ]
            }
        )
        + chunk({"tool_calls": [{"index": 0, "function": {"name": "weather"}}]})
        + chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": "Lyon"}'}}]})
        + chunk({}, finish="tool_calls")
        + b"data: [DONE]\n\n"
    )
    result = trio.run(stream_once, data)
    assert isinstance(result, ta.lowlevel.StreamResult), result
    (use,) = result.message.tool_uses
    assert (use.name, dict(use.input)) == ("get_weather", {"city": "Lyon"})


def test_a_name_piece_after_the_arguments_is_a_protocol_error() -> None:
    data = (
        chunk({"role": "assistant"})
        + chunk(
            {
                "tool_calls": [
                    {"index": 0, "id": "c1", "function": {"name": "get", "arguments": "{"}}
                ]
            }
        )
        + chunk({"tool_calls": [{"index": 0, "function": {"name": "_more"}}]})
        + chunk({}, finish="tool_calls")
        + b"data: [DONE]\n\n"
    )
    error = trio.run(stream_once, data)
    assert isinstance(error, ta.StreamProtocolError)
    assert "name goes on after its arguments" in str(error)
