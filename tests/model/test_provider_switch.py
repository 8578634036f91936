"""Switching provider mid-conversation, OpenAI → Anthropic.

A history :class:`OpenAIClient` wrote (real Responses streams) goes on with
:class:`AnthropicClient`: OpenAI ``reasoning`` items (``OpaqueBlock``) are left out of
the Messages API request, everything else is sent as it was, an assistant message
that held only reasoning is left out, and an unknown Anthropic block still
round-trips verbatim.
"""

from __future__ import annotations

from typing import Any

import httpx
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

import trio_agent as ta
from trio_agent.testing import ScriptedAnswer, ScriptedModel


def _reasoning(n: int) -> ta.OpaqueBlock:
    return ta.OpaqueBlock(
        {
            "type": "reasoning",
            "id": f"rs_{n}",
            "summary": [{"type": "summary_text", "text": f"thought {n}"}],
            "encrypted_content": f"gAAAA-{n}",
        }
    )


@st.composite
def openai_answers(draw: st.DrawFn) -> list[list[Any]]:
    """Answers' blocks: reasoning items, text and calls in any order; some answers hold
    only reasoning."""
    answers: list[list[Any]] = []
    n = 0
    for _ in range(draw(st.integers(1, 4))):
        blocks: list[Any] = []
        for kind in draw(st.lists(st.sampled_from(["reasoning", "text", "call"]), max_size=5)):
            n += 1
            if kind == "reasoning":
                blocks.append(_reasoning(n))
            elif kind == "text":
                blocks.append(ta.TextBlock(f"text {n}"))
            else:
                blocks.append(ta.ToolUseBlock(f"call_{n}", "Read", {"path": f"f{n}"}))
        answers.append(blocks or [_reasoning(n + 1)])
        n += 1
    # At least one reasoning item, anywhere.
    where = answers[draw(st.integers(0, len(answers) - 1))]
    where.insert(draw(st.integers(0, len(where))), _reasoning(n + 1))
    return answers


async def _stream(client: Any, history: list[Any]) -> ta.lowlevel.StreamResult:
    async with client.stream(model="m", max_tokens=64, messages=history) as items:
        results = [item async for item in items if isinstance(item, ta.lowlevel.StreamResult)]
    assert len(results) == 1
    return results[0]


async def _openai_history(answers: list[list[Any]]) -> list[Any]:
    """The history an OpenAI model writes, one real Responses stream per answer."""
    model = ScriptedModel(
        [ScriptedAnswer(blocks=blocks) for blocks in answers], protocol="openai-responses"
    )
    history: list[Any] = [ta.UserMessage("start")]
    async with httpx.AsyncClient(transport=model.transport()) as http:
        client = ta.OpenAIClient(api_key="k", base_url="http://x/v1", http_client=http)
        for _ in answers:
            message = (await _stream(client, history)).message
            history.append(message)
            results = [ta.ToolResultBlock(b.id, "ok") for b in message.tool_uses]
            history.append(ta.UserMessage(results or "go on"))
    assert len(model.requests) == len(answers)
    return history


async def _anthropic_request(history: list[Any]) -> dict[str, Any]:
    model = ScriptedModel([ScriptedAnswer(blocks=[ta.TextBlock("fine")])])
    async with httpx.AsyncClient(transport=model.transport()) as http:
        client = ta.AnthropicClient(api_key="k", http_client=http)
        result = await _stream(client, history)
    assert result.message.text == "fine"
    (request,) = model.requests
    return request.body


@settings(max_examples=25, deadline=None)
@given(answers=openai_answers())
def test_openai_reasoning_is_left_out_when_switching_to_anthropic(
    answers: list[list[Any]],
) -> None:
    history = trio.run(_openai_history, answers)
    assert any(
        isinstance(b, ta.OpaqueBlock)
        for m in history
        if isinstance(m, ta.AssistantMessage)
        for b in m.content
    )
    body = trio.run(_anthropic_request, history)
    expected: list[dict[str, Any]] = []
    for message in history:
        if isinstance(message, ta.AssistantMessage):
            kept = [b for b in message.content if not isinstance(b, ta.OpaqueBlock)]
            if kept:
                expected.append({"role": "assistant", "content": [b.to_api() for b in kept]})
        else:
            expected.append(message.to_param())
    assert body["messages"] == expected
    sent_types = {b["type"] for m in body["messages"] for b in m["content"] if isinstance(b, dict)}
    assert "reasoning" not in sent_types
    assert all(m["content"] for m in body["messages"])


def test_an_unknown_anthropic_block_still_round_trips() -> None:
    container = ta.OpaqueBlock({"type": "container_upload", "file_id": "file_1"})
    message = ta.AssistantMessage("msg_1", "claude", [ta.TextBlock("hi"), container])
    body = ta.AnthropicClient(api_key="k").build_request_body(
        model="m", max_tokens=8, messages=[ta.UserMessage("a"), message, ta.UserMessage("b")]
    )
    assert body["messages"][1]["content"] == [
        {"type": "text", "text": "hi"},
        {"type": "container_upload", "file_id": "file_1"},
    ]


def test_the_history_itself_is_not_changed() -> None:
    reasoning = _reasoning(1)
    message = ta.AssistantMessage("resp_1", "gpt", [reasoning, ta.TextBlock("answer")])
    body = ta.AnthropicClient(api_key="k").build_request_body(
        model="m", max_tokens=8, messages=[ta.UserMessage("a"), message, ta.UserMessage("b")]
    )
    assert body["messages"][1]["content"] == [{"type": "text", "text": "answer"}]
    assert message.content == (reasoning, ta.TextBlock("answer"))  # canonical, untouched
