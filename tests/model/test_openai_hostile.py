"""Hostile OpenAI streams: whatever the server sends, only typed errors come out."""

from __future__ import annotations

import json
from typing import Any

import httpx
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

import trio_agent as ta
from trio_agent.testing import RawAnswer, ScriptedModel

_TYPES = [
    "response.created",
    "response.output_item.added",
    "response.content_part.added",
    "response.output_text.delta",
    "response.refusal.delta",
    "response.content_part.done",
    "response.function_call_arguments.delta",
    "response.output_item.done",
    "response.completed",
    "response.incomplete",
    "response.failed",
    "error",
]
_KEYS = [
    "type",
    "id",
    "model",
    "item",
    "part",
    "output_index",
    "content_index",
    "delta",
    "call_id",
    "name",
    "arguments",
    "response",
    "usage",
    "status",
    "choices",
    "index",
    "tool_calls",
    "function",
    "content",
    "finish_reason",
    "error",
    "code",
    "message",
]
_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-2, 3), st.text(max_size=5), st.just("function_call")
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(_KEYS), inner, max_size=4)
    ),
    max_leaves=8,
)


@st.composite
def events(draw: st.DrawFn) -> Any:
    event = draw(st.dictionaries(st.sampled_from(_KEYS), _values, max_size=6))
    if draw(st.booleans()):
        event["type"] = draw(st.sampled_from(_TYPES))
    return event


@settings(max_examples=150, deadline=None)
@given(
    api=st.sampled_from(["responses", "chat"]),
    stream=st.lists(st.one_of(events(), _values, st.just("[DONE]")), max_size=8),
)
def test_any_stream_gives_a_message_or_a_typed_error(api: Any, stream: list[Any]) -> None:
    body = b"".join(
        b"data: " + (e if isinstance(e, str) else json.dumps(e)).encode() + b"\n\n" for e in stream
    )

    model = ScriptedModel([RawAnswer(chunks=[(0.0, body)])])

    async def main() -> None:
        http = httpx.AsyncClient(transport=model.transport())
        client = ta.OpenAIClient(
            api_key="k",
            base_url="http://x/v1",
            http_client=http,
            api=api,
            retry=ta.RetryPolicy.never(),
        )
        try:
            async with client.stream(
                model="m", max_tokens=9, messages=[ta.UserMessage("hi")]
            ) as items:
                async for item in items:
                    if isinstance(item, ta.lowlevel.StreamResult):
                        assert isinstance(item.message, ta.AssistantMessage)
        except ta.TrioAgentError:
            pass

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert len(model.requests) == 1  # the stream was really asked for and read
    assert model.open_streams == 0
