"""OpenAIClient serves the loop's recovery (issue 12) as AnthropicClient does:
``stream(on_retry=...)``, ``create(...)`` (one ``stream: false`` request, the answer's
final object translated by the streaming translator) and so the mid-stream retries,
the non-streaming last resort and the fallback after 3 overloaded answers work over
the Responses and Chat Completions APIs. Everything runs in virtual time against the
scripted model speaking OpenAI's wire formats."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import httpx
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

import trio_agent as ta
from trio_agent.testing import (
    Faults,
    HTTPErrorAnswer,
    RawAnswer,
    ScriptedAnswer,
    ScriptedModel,
    Timing,
    check_history,
    render_openai_sse,
)

PROTOCOL = {"responses": "openai-responses", "chat": "openai-chat"}
EXACT = ta.RetryPolicy(max_retries=2, jitter=(1.0, 1.0))
SLOW = Timing(token_delay=0.1, block_delay=0.1)
#: What OpenAI answers when it is overloaded (a 503), and Anthropic's 529.
OVERLOADED_503 = HTTPErrorAnswer(
    status=503,
    body={
        "error": {
            "message": "The engine is currently overloaded, please try again later.",
            "type": "server_error",
            "param": None,
            "code": None,
        }
    },
)
OVERLOADED = {"503": OVERLOADED_503, "529": HTTPErrorAnswer(status=529)}


def client_for(model: ScriptedModel, api: str, **kwargs: Any) -> ta.OpenAIClient:
    kwargs.setdefault("retry", EXACT)
    http = httpx.AsyncClient(transport=model.transport())
    return ta.OpenAIClient(
        api_key="sk-test", base_url="http://scripted/v1", http_client=http, api=api, **kwargs
    )


async def streamed(client: ta.OpenAIClient, **kwargs: Any) -> ta.lowlevel.StreamResult:
    async with client.stream(
        model="gpt-x", max_tokens=64, messages=[ta.UserMessage("hi")], **kwargs
    ) as items:
        results = [item async for item in items if isinstance(item, ta.lowlevel.StreamResult)]
    (result,) = results
    return result


async def created(client: ta.OpenAIClient, **kwargs: Any) -> ta.lowlevel.StreamResult:
    return await client.create(
        model="gpt-x", max_tokens=64, messages=[ta.UserMessage("hi")], **kwargs
    )


def act_tool(started: list[str]) -> ta.Tool:
    async def run(input: Mapping[str, Any], ctx: ta.ToolContext) -> str:
        started.append(ctx.tool_use_id)
        await trio.sleep(3)
        return "acted"

    return ta.Tool("Act", "A side effect.", {"type": "object"}, run)


def reset_after_text(tool_id: str) -> ScriptedAnswer:
    """Text then a tool call, the connection reset once the text item is done."""
    blocks = [ta.TextBlock("Working on it."), ta.ToolUseBlock(tool_id, "Act", {})]
    data = render_openai_sse(ScriptedAnswer(blocks=blocks, timing=SLOW), "responses")
    cut = data.index(b"\n\n", data.index(b"response.output_item.done")) + 2
    return ScriptedAnswer(blocks=blocks, timing=SLOW, faults=Faults(disconnect_after_byte=cut))


@pytest.mark.parametrize("api", sorted(PROTOCOL))
def test_an_openai_client_is_recoverable(api: str) -> None:
    client = ta.OpenAIClient(api_key="k", api=api)  # type: ignore[arg-type]
    assert isinstance(client, ta.lowlevel.RecoverableModelClient)


async def test_responses_reset_mid_stream_retried_then_answered_by_create(
    autojump_clock: Any,
) -> None:
    final = ScriptedAnswer(blocks=[ta.TextBlock("Acting."), ta.ToolUseBlock("a1", "Act", {})])
    done = ScriptedAnswer(blocks=[ta.TextBlock("Done.")])
    model = ScriptedModel(
        [*(reset_after_text(f"x{i}") for i in range(3)), final, done],
        protocol="openai-responses",
    )
    started: list[str] = []
    events: list[Any] = []
    async with ta.query(
        client_for(model, "responses", idle_timeout=20),
        [ta.UserMessage("go")],
        tools=[act_tool(started)],
        model="m",
        max_tokens=100,
    ) as stream:
        async for event in stream:
            events.append(event)
    end = events[-1]
    assert isinstance(end, ta.TurnEnd)
    assert end.reason is ta.TurnEndReason.COMPLETED
    check_history(end.messages, strict=True)
    transitions = [e.reason for e in events if isinstance(e, ta.Transition)]
    assert transitions == [
        ta.TransitionReason.STREAM_RETRY,
        ta.TransitionReason.STREAM_RETRY,
        ta.TransitionReason.NON_STREAMING_FALLBACK,
        ta.TransitionReason.NEXT_TURN,
    ]
    tombstones = [e for e in events if isinstance(e, ta.AttemptDiscarded)]
    assert [t.model_call for t in tombstones] == [1, 2, 3]
    assert all(isinstance(t.error, ta.StreamTruncatedError) for t in tombstones)
    # 3 streamed attempts (max_retries=2), then stream: false, then the next turn
    assert [r.body["stream"] for r in model.requests] == [True, True, True, False, True]
    assert [r.path for r in model.requests] == ["/v1/responses"] * 5
    # the non-streamed answer is the one kept, and its tool ran (only that one)
    assert started == ["a1"]
    answers = [m for m in end.messages if isinstance(m, ta.AssistantMessage)]
    assert [m.content for m in answers] == [final.message.content, done.message.content]
    assert answers[0].stop_reason == "tool_use"


@pytest.mark.parametrize("status", sorted(OVERLOADED))
async def test_on_retry_sees_three_overloaded_answers(autojump_clock: Any, status: str) -> None:
    answer = ScriptedAnswer(blocks=[ta.TextBlock("Hello")])
    model = ScriptedModel([OVERLOADED[status]] * 3 + [answer], protocol="openai-responses")
    seen: list[Exception] = []

    def on_retry(exc: Exception) -> bool:
        seen.append(exc)
        return True

    client = client_for(model, "responses", retry=ta.RetryPolicy(max_retries=3))
    result = await streamed(client, on_retry=on_retry)
    assert [type(e) for e in seen] == [ta.OverloadedError] * 3
    assert [e.status_code for e in seen] == [int(status)] * 3  # type: ignore[attr-defined]
    assert result.message.text == "Hello"
    assert len(model.requests) == 4


async def test_on_retry_false_raises_the_error(autojump_clock: Any) -> None:
    model = ScriptedModel([OVERLOADED_503, ScriptedAnswer(blocks=[ta.TextBlock("x")])])
    seen: list[Exception] = []

    def veto(exc: Exception) -> bool:
        seen.append(exc)
        return False

    with pytest.raises(ta.OverloadedError):
        await streamed(client_for(model, "chat"), on_retry=veto)
    assert len(seen) == 1
    assert len(model.requests) == 1


@pytest.mark.parametrize("api", sorted(PROTOCOL))
@pytest.mark.parametrize("status", sorted(OVERLOADED))
async def test_three_overloaded_then_the_fallback_model(
    autojump_clock: Any, api: str, status: str
) -> None:
    ok = ScriptedAnswer(blocks=[ta.TextBlock("From the fallback.")])
    model = ScriptedModel(
        [OVERLOADED[status]] * 3 + [ok] + [OVERLOADED[status]] * 5,
        protocol=PROTOCOL[api],  # type: ignore[arg-type]
    )
    events: list[Any] = []
    async with ta.query(
        client_for(model, api, retry=ta.RetryPolicy(jitter=(1.0, 1.0))),
        [ta.UserMessage("go")],
        tools=[],
        model="big",
        max_tokens=100,
        options=ta.TurnOptions(fallback_model="small"),
    ) as stream:
        async for event in stream:
            events.append(event)
    end = events[-1]
    assert isinstance(end, ta.TurnEnd)
    assert end.reason is ta.TurnEndReason.COMPLETED
    assert [r.body["model"] for r in model.requests] == ["big", "big", "big", "small"]
    (notice,) = [e for e in events if isinstance(e, ta.ModelFallback)]
    assert (notice.from_model, notice.to_model) == ("big", "small")
    assert end.messages[-1].text == "From the fallback."  # type: ignore[union-attr]


async def test_create_over_chat(autojump_clock: Any) -> None:
    answer = ScriptedAnswer(
        blocks=[ta.TextBlock("Let me look."), ta.ToolUseBlock("c1", "Read", {"path": "a é"})]
    )
    model = ScriptedModel([HTTPErrorAnswer(status=529), answer, answer], protocol="openai-chat")
    seen: list[Exception] = []
    client = client_for(model, "chat")
    result = await created(client, on_retry=lambda e: seen.append(e) is None)
    assert [type(e) for e in seen] == [ta.OverloadedError]
    assert result.statistics.retries == 1
    assert result.ttft is None
    assert result.request_id is not None
    body = model.requests[-1].body
    assert body["stream"] is False
    assert "stream_options" not in body
    assert model.requests[-1].path == "/v1/chat/completions"
    # the same message the stream gives for the same answer
    again = await streamed(client)
    assert result.message.content == again.message.content == answer.message.content
    assert result.message.stop_reason == again.message.stop_reason == "tool_use"
    assert result.message.usage == again.message.usage
    assert result.message.id == again.message.id


@pytest.mark.parametrize("api", sorted(PROTOCOL))
async def test_create_errors_are_typed(autojump_clock: Any, api: str) -> None:
    model = ScriptedModel(
        [
            HTTPErrorAnswer(status=400),
            RawAnswer(chunks=[(0.0, b'{"object": "nonsense"}')]),
            RawAnswer(chunks=[(0.0, b"not json")]),
        ],
        protocol=PROTOCOL[api],  # type: ignore[arg-type]
    )
    client = client_for(model, api)
    with pytest.raises(ta.InvalidRequestError):
        await created(client)
    for _ in range(2):
        with pytest.raises(ta.StreamProtocolError):
            await created(client)
    assert len(model.requests) == 3


async def test_create_of_a_failed_response_is_its_typed_error(autojump_clock: Any) -> None:
    failed = {
        "id": "resp_1",
        "object": "response",
        "status": "failed",
        "model": "gpt-x",
        "output": [],
        "error": {"code": "server_is_overloaded", "message": "busy"},
    }
    model = ScriptedModel(
        [RawAnswer(chunks=[(0.0, json.dumps(failed).encode())])], protocol="openai-responses"
    )
    with pytest.raises(ta.OverloadedError):
        await created(client_for(model, "responses", retry=ta.RetryPolicy.never()))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=10,
)
blocks = st.lists(
    st.one_of(
        st.text(min_size=1, max_size=30).map(ta.TextBlock),
        st.dictionaries(st.text(max_size=5), json_values, max_size=3).map(
            lambda d: ta.ToolUseBlock("call_x", "T", d)
        ),
    ),
    min_size=1,
    max_size=4,
)


@settings(max_examples=30, deadline=None)
@given(content=blocks, api=st.sampled_from(sorted(PROTOCOL)))
def test_create_gives_the_streamed_message(content: list[Any], api: str) -> None:
    content = [
        ta.ToolUseBlock(f"call_{i}", b.name, b.input) if isinstance(b, ta.ToolUseBlock) else b
        for i, b in enumerate(content)
    ]
    if api == "chat":  # Chat has one text before the calls
        texts = [b for b in content if isinstance(b, ta.TextBlock)]
        calls = [b for b in content if isinstance(b, ta.ToolUseBlock)]
        content = ([ta.TextBlock("".join(t.text for t in texts))] if texts else []) + calls
    answer = ScriptedAnswer(blocks=content)
    model = ScriptedModel([answer, answer], protocol=PROTOCOL[api])  # type: ignore[arg-type]

    async def main() -> None:
        client = client_for(model, api)
        once = await created(client)
        again = await streamed(client)
        assert once.message == again.message
        assert once.message.content == answer.message.content

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert [r.body["stream"] for r in model.requests] == [False, True]


@settings(max_examples=60, deadline=None)
@given(data=json_values, api=st.sampled_from(sorted(PROTOCOL)))
def test_create_of_any_json_is_a_message_or_a_typed_error(data: Any, api: str) -> None:
    model = ScriptedModel(
        [RawAnswer(chunks=[(0.0, json.dumps(data).encode())])],
        protocol=PROTOCOL[api],  # type: ignore[arg-type]
    )
    outcome: list[Any] = []

    async def main() -> None:
        try:
            outcome.append(await created(client_for(model, api)))
        except ta.TrioAgentError as exc:
            outcome.append(exc)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert len(outcome) == 1
    assert len(model.requests) == 1


items = st.lists(
    st.fixed_dictionaries(
        {"type": st.sampled_from(["message", "function_call", "reasoning", 3])},
        optional={
            "content": st.lists(
                st.fixed_dictionaries(
                    {"type": st.sampled_from(["output_text", "refusal", "x"])},
                    optional={"text": json_values, "refusal": json_values},
                ),
                max_size=2,
            ),
            "call_id": json_values,
            "name": json_values,
            "arguments": st.one_of(json_values, st.just('{"a": 1}')),
        },
    ),
    max_size=3,
)


@settings(max_examples=60, deadline=None)
@given(output=items, status=st.sampled_from(["completed", "incomplete", "failed", None]))
def test_create_of_a_broken_response_is_a_message_or_a_typed_error(
    output: list[Any], status: str | None
) -> None:
    response = {"id": "resp_1", "object": "response", "model": "m", "output": output}
    if status is not None:
        response["status"] = status
    model = ScriptedModel(
        [RawAnswer(chunks=[(0.0, json.dumps(response).encode())])], protocol="openai-responses"
    )
    outcome: list[Any] = []

    async def main() -> None:
        try:
            outcome.append(await created(client_for(model, "responses")))
        except ta.TrioAgentError as exc:
            outcome.append(exc)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    (result,) = outcome
    if isinstance(result, ta.lowlevel.StreamResult):
        check_history([ta.UserMessage("hi"), result.message], strict=False)
    assert len(model.requests) == 1
