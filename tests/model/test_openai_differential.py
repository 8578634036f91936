"""OpenAIClient against the official openai SDK's own stream accumulation.

The same bytes go to both: recorded Chat Completions streams from the SDK's test
suite (tests/model/fixtures/openai_chat, see its README) and generated streams of
both APIs. The SDK (``AsyncOpenAI(...).chat.completions.stream`` /
``.responses.stream``, run on Trio through anyio) accumulates its final
completion / response; the canonical message must say the same: text, calls
(id, name, arguments), stop reason and usage.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trio_agent as ta
from trio_agent.testing import ScriptedAnswer, Timing, render_openai_sse

FIXTURES = Path(__file__).parent / "fixtures" / "openai_chat"
RECORDED = sorted(p.name for p in FIXTURES.glob("*.sse"))
BASE_URL = "http://openai.test/v1"
CHAT_STOP = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}


def _transport(body: bytes) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, content=body, request=request
        )

    return httpx.MockTransport(handler)  # a real httpx transport answering in process


async def _ours(body: bytes, api: Any) -> ta.AssistantMessage:
    async with httpx.AsyncClient(transport=_transport(body)) as http:
        client = ta.OpenAIClient(api_key="sk-test", base_url=BASE_URL, http_client=http, api=api)
        result = None
        async with client.stream(
            model="gpt-4o", messages=[ta.UserMessage("hi")], max_tokens=64
        ) as items:
            async for item in items:
                if isinstance(item, ta.lowlevel.StreamResult):
                    result = item
    assert result is not None
    return result.message


def _sdk_chat(body: bytes) -> Any:
    # The SDK's sync client: its async one leaves its SSE generators unfinished at
    # [DONE], which Trio reports as a ResourceWarning. The accumulation is the same.
    with httpx.Client(transport=_transport(body)) as http:
        sdk = openai.OpenAI(api_key="sk-test", base_url=BASE_URL, http_client=http)
        with sdk.chat.completions.stream(
            model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
        ) as stream:
            for _ in stream:
                pass
            # The accumulated snapshot (get_final_completion() refuses a length stop).
            return stream.current_completion_snapshot


def _sdk_responses(body: bytes) -> Any:
    with httpx.Client(transport=_transport(body)) as http:
        sdk = openai.OpenAI(api_key="sk-test", base_url=BASE_URL, http_client=http)
        with sdk.responses.stream(model="gpt-4o", input="hi") as stream:
            incomplete = None
            for event in stream:
                if event.type == "response.incomplete":  # get_final_response() wants completed
                    incomplete = event.response
            return incomplete if incomplete is not None else stream.get_final_response()


def _check_chat(ours: ta.AssistantMessage, completion: Any) -> None:
    choice = completion.choices[0]
    message = choice.message
    assert ours.id == completion.id
    assert ours.model == completion.model
    if message.refusal:
        assert ours.text == message.refusal
        assert ours.stop_reason == "refusal"
    else:
        assert ours.text == (message.content or "")
        assert ours.stop_reason == CHAT_STOP[choice.finish_reason]
    calls = message.tool_calls or []
    assert [(u.id, u.name, dict(u.input)) for u in ours.tool_uses] == [
        (c.id, c.function.name, json.loads(c.function.arguments)) for c in calls
    ]
    usage = completion.usage
    cached = ours.usage.cache_read_input_tokens or 0
    assert ours.usage.input_tokens + cached == usage.prompt_tokens
    assert ours.usage.output_tokens == usage.completion_tokens


def _check_responses(ours: ta.AssistantMessage, response: Any) -> None:
    assert ours.id == response.id
    assert ours.model == response.model
    assert ours.text == response.output_text
    calls = [item for item in response.output if item.type == "function_call"]
    assert [(u.id, u.name, dict(u.input)) for u in ours.tool_uses] == [
        (c.call_id, c.name, json.loads(c.arguments)) for c in calls
    ]
    cached = ours.usage.cache_read_input_tokens or 0
    assert ours.usage.input_tokens + cached == response.usage.input_tokens
    assert ours.usage.output_tokens == response.usage.output_tokens
    expected = "tool_use" if calls else "end_turn"
    if response.status == "incomplete":
        expected = "max_tokens"
    assert ours.stop_reason == expected


def test_fixtures_are_present() -> None:
    assert {"text.sse", "two_tools.sse", "one_tool.sse", "length.sse", "refusal.sse"} <= set(
        RECORDED
    )


@pytest.mark.parametrize("name", RECORDED)
async def test_recorded_chat_stream_matches_sdk(name: str) -> None:
    body = (FIXTURES / name).read_bytes()
    ours = await _ours(body, "chat")
    completion = _sdk_chat(body)
    _check_chat(ours, completion)
    if name == "two_tools.sse":  # the recorded parallel calls both arrive
        assert len(ours.tool_uses) == 2


# -- generated streams -----------------------------------------------------------------

_texts = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=40)
_inputs = st.dictionaries(
    st.text(min_size=1, max_size=8),
    st.one_of(st.integers(-(10**6), 10**6), st.text(max_size=20), st.booleans(), st.none()),
    max_size=4,
)


@st.composite
def answers(draw: st.DrawFn) -> ScriptedAnswer:
    blocks: list[Any] = []
    if draw(st.booleans()):
        blocks.append(ta.TextBlock(draw(_texts)))
    for i in range(draw(st.integers(0, 3))):
        name = draw(st.sampled_from(["Read", "Glob", "Grep", "get_weather"]))
        blocks.append(ta.ToolUseBlock(f"call_{i}_{draw(st.integers(0, 999))}", name, draw(_inputs)))
    if not blocks:
        blocks.append(ta.TextBlock(draw(_texts)))
    usage = ta.Usage(
        input_tokens=draw(st.integers(0, 10_000)),
        output_tokens=draw(st.integers(0, 10_000)),
        cache_read_input_tokens=draw(st.one_of(st.none(), st.integers(0, 500))),
    )
    stop = draw(st.sampled_from([None, "max_tokens"]))
    timing = Timing(
        text_chunk_size=draw(st.integers(1, 8)), json_chunk_size=draw(st.integers(1, 16))
    )
    return ScriptedAnswer(
        blocks=blocks, usage=usage, stop_reason=stop, model="gpt-4o", timing=timing
    )


_SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(answer=answers())
def test_generated_chat_stream_matches_sdk(answer: ScriptedAnswer) -> None:
    body = render_openai_sse(answer, "chat")

    async def main() -> None:
        ours = await _ours(body, "chat")
        completion = _sdk_chat(body)
        _check_chat(ours, completion)
        assert ours.content == answer.blocks or (
            # Chat has one content string: only the blocks' text and calls survive
            ours.text == answer.message.text and ours.tool_uses == answer.message.tool_uses
        )

    trio.run(main)


@_SETTINGS
@given(answer=answers())
def test_generated_responses_stream_matches_sdk(answer: ScriptedAnswer) -> None:
    body = render_openai_sse(answer, "responses")

    async def main() -> None:
        ours = await _ours(body, "responses")
        response = _sdk_responses(body)
        _check_responses(ours, response)
        assert ours.content == answer.blocks

    trio.run(main)
