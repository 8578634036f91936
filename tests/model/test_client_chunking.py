"""The client's items do not depend on how the body is cut into reads.

The read path decodes a read's events, then feeds them in runs (``feed_deltas``
for appending deltas, ``feed`` for the rest; a read of one event by ``feed``
alone). Whatever the cutting (an event per read, the whole body at once, or cuts
anywhere: mid-event, mid-line, mid-UTF-8 character), valid and hostile streams give
the same items, the same final result and the same error.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import AssistantMessage, OpenAIClient, RetryPolicy, TrioAgentError, UserMessage
from trio_agent.lowlevel import StreamEvent, StreamResult
from trio_agent.testing import LeakCheck, RawAnswer, ScriptedModel, run_virtual
from trio_agent.testing import strategies as tst


def encode(event: Any) -> bytes:
    return b"event: e\ndata: " + json.dumps(event, ensure_ascii=False).encode() + b"\n\n"


def summary(item: Any) -> Any:
    if isinstance(item, StreamEvent):
        return ("event", item.type, json.dumps(item.data, sort_keys=True))
    if isinstance(item, StreamResult):
        return ("result", item.message, item.statistics, item.ttft)
    return ("message", item)


async def read(chunks: list[bytes]) -> tuple[list[Any], tuple[str, str] | None]:
    model = ScriptedModel([RawAnswer(chunks=[(0.0, c) for c in chunks])])
    items: list[Any] = []
    error: tuple[str, str] | None = None
    with LeakCheck(models=[model], processes=False, fds=False):
        try:
            async with model.client(retry=RetryPolicy.never()).stream(
                model="m", max_tokens=8, messages=[UserMessage("hi")]
            ) as stream:
                async for item in stream:
                    items.append(summary(item))
        except TrioAgentError as exc:
            error = (type(exc).__name__, str(exc))
    assert len(model.requests) == 1  # the stream was read
    return items, error


@st.composite
def cuts(draw: st.DrawFn, size: int) -> list[int]:
    return sorted(draw(st.sets(st.integers(1, max(1, size - 1)), max_size=40)))


def cut(data: bytes, at: list[int]) -> list[bytes]:
    bounds = [0, *at, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds) if b > a]


@settings(max_examples=120, deadline=None)
@given(events=tst.event_streams() | tst.mutated_event_streams(), data=st.data())
def test_any_cutting_gives_the_same_items(events: list[Any], data: st.DataObject) -> None:
    per_event = [encode(e) for e in events]
    body = b"".join(per_event)
    reference = run_virtual(lambda: read(per_event))
    assert reference[0] or reference[1]  # something came out: items or an error
    assert run_virtual(lambda: read([body])) == reference
    anywhere = cut(body, data.draw(cuts(len(body))))
    assert run_virtual(lambda: read(anywhere)) == reference


# -- the same over OpenAI's two wire formats --------------------------------------------


#: Messages both OpenAI formats can carry: text and tool calls.
openai_messages = tst.assistant_messages().filter(
    lambda m: all(b.type in ("text", "tool_use") for b in m.content)
)


def openai_body(answer: Any, protocol: Any) -> list[bytes]:
    """The answer's SSE body as ScriptedModel streams it, one chunk per write."""
    served = ScriptedModel([answer], protocol=protocol).respond(
        "POST", "/v1/any", (), b'{"stream": true}'
    )
    return [data for _, data in served.plan.schedule() if data]


async def read_openai(chunks: list[bytes], api: Any) -> tuple[list[Any], tuple[str, str] | None]:
    model = ScriptedModel([RawAnswer(chunks=[(0.0, c) for c in chunks])])
    items: list[Any] = []
    error: tuple[str, str] | None = None
    with LeakCheck(models=[model], processes=False, fds=False):
        async with httpx.AsyncClient(transport=model.transport()) as http:
            client = OpenAIClient(
                api_key="sk-test", http_client=http, api=api, retry=RetryPolicy.never()
            )
            try:
                async with client.stream(
                    model="m", max_tokens=8, messages=[UserMessage("hi")]
                ) as stream:
                    async for item in stream:
                        items.append(summary(item))
            except TrioAgentError as exc:
                error = (type(exc).__name__, str(exc))
    assert len(model.requests) == 1
    return items, error


@pytest.mark.parametrize(
    ("api", "protocol"), [("chat", "openai-chat"), ("responses", "openai-responses")]
)
@settings(max_examples=40, deadline=None)
@given(answer=tst.scripted_answers(messages=openai_messages), data=st.data())
def test_any_cutting_gives_the_same_items_over_openai(
    api: str, protocol: str, answer: Any, data: st.DataObject
) -> None:
    per_write = openai_body(answer, protocol)
    body = b"".join(per_write)
    reference = run_virtual(lambda: read_openai(per_write, api))
    assert reference[1] is None
    assert isinstance(reference[0][-1][1], AssistantMessage)
    assert run_virtual(lambda: read_openai([body], api)) == reference
    anywhere = cut(body, data.draw(cuts(len(body))))
    assert run_virtual(lambda: read_openai(anywhere, api)) == reference
