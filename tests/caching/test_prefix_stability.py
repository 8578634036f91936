"""The cached prefix is byte-stable: the same history is the same bytes, and a longer
history starts with the bytes of the shorter one (the marks aside, which the API
leaves out of the cache's key).

The bytes are those the scripted model received (``ScriptedModel.requests[i].content``),
sent by the real client over its in-process transport, in virtual time.
"""

from __future__ import annotations

import json
from typing import Any

import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trio_agent import AssistantMessage, TextBlock, ToolResultBlock, UserMessage, tool
from trio_agent._model._anthropic import MAX_CACHE_BREAKPOINTS
from trio_agent.testing import ScriptedAnswer, ScriptedModel
from trio_agent.testing.strategies import assistant_messages, histories

MARKS = (
    ',"cache_control":{"type":"ephemeral"}',
    ',"cache_control":{"type":"ephemeral","ttl":"1h"}',
)


@tool
async def read(path: str) -> str:
    """Read a file."""
    return path


def sent(history: list[Any], *, times: int = 1, cache: Any = "5m") -> list[bytes]:
    """The request bodies of *times* streams of *history*, as the client sent them."""
    model = ScriptedModel([ScriptedAnswer(blocks=[TextBlock("ok")])] * times)

    async def main() -> None:
        client = model.client()
        for _ in range(times):
            async with client.stream(
                model="m",
                messages=history,
                max_tokens=10,
                system="Be brief.",
                tools=[read],
                cache=cache,
            ) as items:
                async for _ in items:
                    pass

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return [r.content for r in model.requests]


def unmarked(content: bytes) -> str:
    text = content.decode()
    for mark in MARKS:
        text = text.replace(mark, "")
    return text


def split(text: str) -> tuple[str, str, str]:
    """The body as (before the messages, the messages array, after it)."""
    start = text.index('"messages":') + len('"messages":')
    _, end = json.JSONDecoder().raw_decode(text, start)
    return text[:start], text[start:end], text[end:]


def mark_count(content: bytes) -> int:
    return content.decode().count('"cache_control":')


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories())
def test_the_same_history_is_the_same_bytes(history: list[Any]) -> None:
    first, second = sent(history, times=2)
    assert first == second
    assert mark_count(first) <= MAX_CACHE_BREAKPOINTS


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(), assistant_messages(max_blocks=4), st.data())
def test_appending_keeps_every_byte_before(
    history: list[Any], answer: AssistantMessage, data: st.DataObject
) -> None:
    if answer.tool_uses:
        results = UserMessage(tuple(ToolResultBlock(u.id, "done") for u in answer.tool_uses))
    else:
        results = UserMessage(data.draw(st.sampled_from(["next", (TextBlock("next"),)])))
    [before] = sent(history)
    [after] = sent([*history, answer, results])
    head_a, messages_a, tail_a = split(unmarked(before))
    head_b, messages_b, tail_b = split(unmarked(after))
    assert (head_a, tail_a) == (head_b, tail_b)  # model, tools, system, stream
    assert messages_b.startswith(messages_a[:-1] + ",")  # every message, byte for byte
    assert mark_count(after) <= MAX_CACHE_BREAKPOINTS


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories())
def test_off_is_the_body_of_before(history: list[Any]) -> None:
    [off] = sent(history, cache=None)
    assert mark_count(off) == 0
    [on] = sent(history)
    head_on, messages_on, _ = split(unmarked(on))
    head_off, messages_off, _ = split(off.decode())
    # The messages are the same bytes, marked or not (a string system prompt is one
    # text block when caching, so the tail differs).
    assert (head_on, messages_on) == (head_off, messages_off)
