"""OpenAIClient against the scripted OpenAI streams: values, hand-over, faults, errors."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

import trio_agent as ta
from trio_agent.testing import (
    DroppedConnection,
    Faults,
    HTTPErrorAnswer,
    RawAnswer,
    ScriptedAnswer,
    ScriptedModel,
    Timing,
    render_openai_sse,
    serve_scripted_model,
    strategies,
)

EXACT = ta.RetryPolicy(jitter=(1.0, 1.0))
PROTOCOL = {"responses": "openai-responses", "chat": "openai-chat"}


def scripted(api: str, answers: list[Any]) -> ScriptedModel:
    return ScriptedModel(answers, protocol=PROTOCOL[api])  # type: ignore[arg-type]


def client_for(model: ScriptedModel, api: str, **kwargs: Any) -> ta.OpenAIClient:
    kwargs.setdefault("retry", EXACT)
    http = httpx.AsyncClient(transport=model.transport())
    return ta.OpenAIClient(
        api_key="sk-test", base_url="http://scripted/v1", http_client=http, api=api, **kwargs
    )


@pytest.fixture(scope="module")
def timed_collect(collect: Any) -> Callable[..., Awaitable[list[tuple[float, Any]]]]:
    """``items = await timed_collect(client, **stream_kw)``: ``collect`` for model
    "gpt-x", each item with the (virtual) time it arrived: ``[(time, item), ...]``."""

    async def timed_collect(client: ta.OpenAIClient, **kwargs: Any) -> list[tuple[float, Any]]:
        times: list[float] = []
        items = await collect(
            client, model="gpt-x", on_item=lambda _: times.append(trio.current_time()), **kwargs
        )
        return list(zip(times, items, strict=True))

    return timed_collect


def result_of(items: list[tuple[float, Any]]) -> ta.lowlevel.StreamResult:
    last = items[-1][1]
    assert isinstance(last, ta.lowlevel.StreamResult)
    return last


def blocks_of(items: list[tuple[float, Any]]) -> list[tuple[float, Any]]:
    return [(t, b) for t, m in items if isinstance(m, ta.AssistantMessage) for b in m.content]


_inputs = st.dictionaries(
    st.text(min_size=1, max_size=6), st.one_of(st.integers(), st.text(max_size=12)), max_size=3
)


@st.composite
def answer_blocks(draw: st.DrawFn) -> list[Any]:
    blocks: list[Any] = []
    if draw(st.booleans()):
        blocks.append(ta.TextBlock(draw(st.text(min_size=1, max_size=30))))
    for i in range(draw(st.integers(0, 3))):
        blocks.append(ta.ToolUseBlock(f"call_{i}", draw(st.sampled_from("ABC")), draw(_inputs)))
    return blocks or [ta.TextBlock("ok")]


@settings(max_examples=40, deadline=None)
@given(
    api=st.sampled_from(["responses", "chat"]),
    blocks=answer_blocks(),
    timing=strategies.timings(max_delay=0.5),
    framing=strategies.framings(),
)
def test_any_answer_any_framing_gives_the_canonical_message(
    api: str, blocks: list[Any], timing: Timing, framing: Faults, timed_collect: Any
) -> None:
    answer = ScriptedAnswer(blocks=blocks, timing=timing, faults=framing)
    model = scripted(api, [answer])

    async def main() -> None:
        result = result_of(await timed_collect(client_for(model, api)))
        message = result.message
        assert message.content == answer.message.content
        assert message.stop_reason == answer.resolved_stop_reason
        assert message.usage.input_tokens == answer.resolved_usage.input_tokens
        assert message.usage.output_tokens == answer.resolved_usage.output_tokens
        assert message.id == answer.resolved_id
        assert model.open_streams == 0

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def _three_calls() -> ScriptedAnswer:
    return ScriptedAnswer(
        blocks=[
            ta.ToolUseBlock("call_a", "Read", {"path": "a"}),
            ta.ToolUseBlock("call_b", "Read", {"path": "b"}),
            ta.TextBlock("and some text after the calls"),
        ],
        timing=Timing(token_delay=1.0, json_chunk_size=4, text_chunk_size=4),
    )


async def test_responses_hands_each_call_over_at_its_output_item_done(
    autojump_clock: Any, timed_collect: Any
) -> None:
    answer = _three_calls()
    model = scripted("responses", [answer])
    items = await timed_collect(client_for(model, "responses"))
    events = [i for _, i in items if isinstance(i, ta.lowlevel.StreamEvent)]
    blocks = blocks_of(items)
    end = items[-1][0]
    # Each call arrives right after its content_block_stop, well before the end.
    assert [type(b).__name__ for _, b in blocks] == ["ToolUseBlock", "ToolUseBlock", "TextBlock"]
    assert blocks[0][0] < blocks[1][0] < blocks[2][0] <= end
    # Its stop event is the last event read before the block: nothing further was read.
    position = [i for _, i in items].index(
        next(m for _, m in items if isinstance(m, ta.AssistantMessage))
    )
    assert isinstance(items[position - 1][1], ta.lowlevel.StreamEvent)
    assert items[position - 1][1].type == "content_block_stop"
    assert sum(1 for e in events if e.type == "content_block_stop") == 3
    # Each call's JSON (3 deltas of 1 s each) is done long before the text ends.
    assert blocks[0][0] == pytest.approx(3.0)
    assert blocks[1][0] == pytest.approx(6.0)


async def test_chat_completes_calls_at_finish_reason(
    autojump_clock: Any, timed_collect: Any
) -> None:
    answer = ScriptedAnswer(
        blocks=[
            ta.ToolUseBlock("call_a", "Read", {"path": "a"}),
            ta.ToolUseBlock("call_b", "Read", {"path": "b"}),
        ],
        timing=Timing(token_delay=1.0, json_chunk_size=4),
    )
    items = await timed_collect(client_for(scripted("chat", [answer]), "chat"))
    times = [t for t, _ in blocks_of(items)]
    assert len(times) == 2
    assert times[0] == times[1] == pytest.approx(6.0)  # both at finish_reason


async def test_chat_early_tool_start_ends_a_call_at_the_next_index(
    autojump_clock: Any, timed_collect: Any
) -> None:
    answer = ScriptedAnswer(
        blocks=[
            ta.ToolUseBlock("call_a", "Read", {"path": "a"}),
            ta.ToolUseBlock("call_b", "Read", {"path": "b"}),
        ],
        timing=Timing(token_delay=1.0, json_chunk_size=4),
    )
    client = client_for(scripted("chat", [answer]), "chat", early_tool_start=True)
    items = await timed_collect(client)
    times = [t for t, _ in blocks_of(items)]
    assert times == [pytest.approx(3.0), pytest.approx(6.0)]
    assert result_of(items).message.stop_reason == "tool_use"


@pytest.mark.parametrize("api", ["responses", "chat"])
@pytest.mark.parametrize(
    ("stop", "expected"), [("max_tokens", "max_tokens"), ("refusal", "refusal")]
)
async def test_stop_reasons_are_mapped(
    autojump_clock: Any, api: str, stop: str, expected: str, timed_collect: Any
) -> None:
    answer = ScriptedAnswer(blocks=[ta.TextBlock("I can't help with that.")], stop_reason=stop)
    result = result_of(await timed_collect(client_for(scripted(api, [answer]), api)))
    assert result.message.stop_reason == expected
    assert result.message.text == "I can't help with that."


async def test_reasoning_items_are_opaque_blocks_that_round_trip(
    autojump_clock: Any, timed_collect: Any
) -> None:
    reasoning = ta.OpaqueBlock(
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "Think first."}],
            "encrypted_content": "gAAAA-opaque",
        }
    )
    call = ta.ToolUseBlock("call_1", "Read", {"path": "x"})
    answer = ScriptedAnswer(blocks=[reasoning, call])
    model = scripted("responses", [answer, ScriptedAnswer(blocks=[ta.TextBlock("done")])])
    client = client_for(model, "responses")
    message = result_of(await timed_collect(client)).message
    assert message.content == (reasoning, call)
    history = [
        ta.UserMessage("hi"),
        message,
        ta.UserMessage([ta.ToolResultBlock("call_1", "contents of x")]),
    ]
    await timed_collect(client, messages=history)
    sent = model.requests[1].body["input"]
    assert sent == [
        {"role": "user", "content": "hi"},
        reasoning.to_api(),
        {"type": "function_call", "call_id": "call_1", "name": "Read", "arguments": '{"path":"x"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "contents of x"},
    ]


def _history() -> list[Any]:
    return [
        ta.UserMessage("list files"),
        ta.AssistantMessage(
            id="msg_1",
            model="claude",
            content=(
                ta.ThinkingBlock("hmm", "sig-anthropic"),
                ta.TextBlock("Looking."),
                ta.ToolUseBlock("toolu_1", "Glob", {"pattern": "*"}),
            ),
        ),
        ta.UserMessage(
            [
                ta.ToolResultBlock("toolu_1", [ta.TextBlock("a.py")], is_error=False),
                ta.TextBlock("thanks"),
            ]
        ),
    ]


async def test_chat_request_converts_history_and_tools(
    autojump_clock: Any, timed_collect: Any
) -> None:
    model = scripted("chat", [ScriptedAnswer(blocks=[ta.TextBlock("ok")])])
    tool = ta.Tool(
        name="Glob",
        description="find files",
        input_schema={"type": "object", "properties": {"pattern": {"type": "string"}}},
        run=_never,
    )
    await timed_collect(
        client_for(model, "chat"), messages=_history(), system="be brief", tools=[tool]
    )
    request = model.requests[0]
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test"
    body = request.body
    assert body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "list files"},
        {
            "role": "assistant",
            "content": "Looking.",
            "tool_calls": [
                {
                    "id": "toolu_1",
                    "type": "function",
                    "function": {"name": "Glob", "arguments": '{"pattern":"*"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "toolu_1", "content": "a.py"},
        {"role": "user", "content": [{"type": "text", "text": "thanks"}]},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "Glob",
                "parameters": tool.input_schema,
                "description": "find files",
            },
        }
    ]
    assert body["max_completion_tokens"] == 64
    assert body["stream_options"] == {"include_usage": True}


async def test_responses_request_converts_history(autojump_clock: Any, timed_collect: Any) -> None:
    model = scripted("responses", [ScriptedAnswer(blocks=[ta.TextBlock("ok")])])
    await timed_collect(client_for(model, "responses"), messages=_history(), system="be brief")
    body = model.requests[0].body
    assert model.requests[0].path == "/v1/responses"
    assert body["instructions"] == "be brief"
    assert body["max_output_tokens"] == 64
    assert body["input"] == [
        {"role": "user", "content": "list files"},
        {"role": "assistant", "content": "Looking."},
        {
            "type": "function_call",
            "call_id": "toolu_1",
            "name": "Glob",
            "arguments": '{"pattern":"*"}',
        },
        {"type": "function_call_output", "call_id": "toolu_1", "output": "a.py"},
        {"role": "user", "content": [{"type": "input_text", "text": "thanks"}]},
    ]


@pytest.mark.parametrize("api", ["responses", "chat"])
async def test_unconvertible_history_is_refused_before_any_request(
    api: str, timed_collect: Any
) -> None:
    model = scripted(api, [ScriptedAnswer(blocks=[ta.TextBlock("ok")])])
    image = ta.OpaqueBlock({"type": "image", "source": {"type": "base64", "data": "AAAA"}})
    with pytest.raises(ta.InvalidRequestError, match="cannot be sent to the OpenAI"):
        await timed_collect(client_for(model, api), messages=[ta.UserMessage([image])])
    assert model.requests == []


async def _never(input: Any, ctx: Any) -> str:  # pragma: no cover - never run
    raise AssertionError


def test_no_key_is_a_typed_error_before_any_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ta.AuthenticationError, match="OPENAI_API_KEY"):
        ta.OpenAIClient()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-secret")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:8000/v1/")
    client = ta.OpenAIClient(api="chat")
    assert client.url == "http://localhost:8000/v1/chat/completions"
    assert "sk-env-secret" not in repr(client)
    with pytest.raises(ValueError, match="api"):
        ta.OpenAIClient(api_key="k", api="completions")  # type: ignore[arg-type]


def _openai_error(status: int, etype: str, code: str | None, message: str) -> HTTPErrorAnswer:
    return HTTPErrorAnswer(
        status=status,
        body={"error": {"message": message, "type": etype, "param": None, "code": code}},
    )


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (
            _openai_error(401, "invalid_request_error", "invalid_api_key", "Incorrect API key"),
            ta.AuthenticationError,
        ),
        (
            _openai_error(404, "invalid_request_error", "model_not_found", "no such model"),
            ta.NotFoundError,
        ),
        (
            _openai_error(
                400,
                "invalid_request_error",
                "context_length_exceeded",
                "maximum context length is 128000 tokens",
            ),
            ta.PromptTooLongError,
        ),
        (_openai_error(403, "invalid_request_error", None, "forbidden"), ta.PermissionDeniedError),
    ],
)
async def test_http_errors_are_typed_by_status(
    autojump_clock: Any, answer: HTTPErrorAnswer, error: type[Exception], timed_collect: Any
) -> None:
    model = scripted("responses", [answer])
    with pytest.raises(error) as info:
        await timed_collect(client_for(model, "responses"))
    assert len(model.requests) == 1  # not retried
    assert info.value.status_code == answer.status  # type: ignore[attr-defined]


async def test_429_with_retry_after_then_5xx_then_success(
    autojump_clock: Any, timed_collect: Any
) -> None:
    model = scripted(
        "chat",
        [
            HTTPErrorAnswer(status=429, headers={"retry-after": "3"}),
            _openai_error(500, "server_error", None, "boom"),
            DroppedConnection(),
            ScriptedAnswer(blocks=[ta.TextBlock("fine")]),
        ],
    )
    start = trio.current_time()
    result = result_of(
        await timed_collect(
            client_for(model, "chat", retry=ta.RetryPolicy(max_retries=3, jitter=(1.0, 1.0)))
        )
    )
    assert result.message.text == "fine"
    assert result.statistics.retries == 3
    assert trio.current_time() - start == pytest.approx(3 + 1.0 + 2.0)


@pytest.mark.parametrize("api", ["responses", "chat"])
async def test_error_event_before_content_is_retried(
    autojump_clock: Any, api: str, timed_collect: Any
) -> None:
    model = scripted(
        api,
        [
            ScriptedAnswer(blocks=[ta.TextBlock("x")], faults=Faults(error_event_after=0)),
            ScriptedAnswer(blocks=[ta.TextBlock("second")]),
        ],
    )
    result = result_of(await timed_collect(client_for(model, api)))
    assert result.message.text == "second"
    assert result.statistics.retries == 1


@pytest.mark.parametrize("api", ["responses", "chat"])
@pytest.mark.parametrize(
    ("faults", "error"),
    [
        (Faults(truncate=True), ta.StreamTruncatedError),
        (None, ta.StreamTruncatedError),  # a disconnect 80% into the stream
        (Faults(error_event_after=5), ta.OverloadedError),
        (Faults(error_event_after=5, error_type="rate_limit_error"), ta.RateLimitError),
        (Faults(stall_before_event=6, stall_seconds=200), ta.StreamIdleTimeoutError),
    ],
)
async def test_faults_after_content_raise_typed_errors(
    autojump_clock: Any, api: str, faults: Faults | None, error: type[Exception]
) -> None:
    answer = ScriptedAnswer(blocks=[ta.TextBlock("some longer text to stream " * 4)])
    if faults is None:
        faults = Faults(disconnect_after_byte=len(render_openai_sse(answer, api)) * 4 // 5)  # type: ignore[arg-type]
    answer = ScriptedAnswer(blocks=answer.blocks, faults=faults)
    model = scripted(api, [answer])
    items: list[Any] = []

    async def consume() -> None:
        async with client_for(model, api).stream(
            model="m", max_tokens=9, messages=[ta.UserMessage("hi")]
        ) as channel:
            async for item in channel:
                items.append(item)

    with pytest.raises(error):
        await consume()
    # content came first
    assert any(isinstance(i, ta.lowlevel.StreamEvent) and i.text_delta for i in items)
    assert len(model.requests) == 1  # never retried after content
    assert model.open_streams == 0


async def test_pings_during_a_stall_keep_it_alive_but_count_as_stall(
    autojump_clock: Any, timed_collect: Any
) -> None:
    faults = Faults(stall_before_event=4, stall_seconds=100, pings_only_for=10)
    model = scripted("responses", [ScriptedAnswer(blocks=[ta.TextBlock("hello")], faults=faults)])
    result = result_of(await timed_collect(client_for(model, "responses")))
    assert result.message.text == "hello"
    assert result.statistics.stalls == 1
    assert result.statistics.stall_time == pytest.approx(100)


@pytest.mark.parametrize("api", ["responses", "chat"])
async def test_consumer_leaving_early_closes_the_stream(autojump_clock: Any, api: str) -> None:
    answer = ScriptedAnswer(blocks=[ta.TextBlock("a" * 200)], timing=Timing(token_delay=0.1))
    model = scripted(api, [answer])
    async with client_for(model, api).stream(
        model="m", max_tokens=9, messages=[ta.UserMessage("hi")]
    ) as channel:
        async for item in channel:
            if isinstance(item, ta.lowlevel.StreamEvent) and item.text_delta:
                break
    assert model.open_streams == 0


@pytest.mark.parametrize(
    "data",
    [
        b'data: {"type":"response.output_text.delta","delta":"x"}\n\n',  # before created
        b'data: {"type":"response.created","response":{"id":"r","model":"m"}}\n\n'
        b'data: {"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"x"}\n\n',
        b'data: {"type":"response.created","response":{"id":"r","model":"m"}}\n\n'
        b'data: {"type":"response.function_call_arguments.delta","output_index":3,"delta":"{"}\n\n',
        b'data: {"type":"response.created","response":{"id":"r","model":"m"}}\n\n'
        b'data: {"type":"response.output_item.added","output_index":0,"item":{"type":"function_call","call_id":7,"name":"x"}}\n\n',
        b"data: [1, 2]\n\n",
        b"data: {nope\n\n",
    ],
)
async def test_protocol_violations_are_typed(
    autojump_clock: Any, data: bytes, timed_collect: Any
) -> None:
    model = scripted("responses", [RawAnswer(chunks=[(0.0, data)])])
    with pytest.raises(ta.StreamProtocolError):
        await timed_collect(client_for(model, "responses", retry=ta.RetryPolicy.never()))
    assert len(model.requests) == 1
    assert model.open_streams == 0


async def test_real_socket_integration(timed_collect: Any) -> None:
    answer = _three_calls()
    answer = ScriptedAnswer(blocks=answer.blocks, timing=Timing(token_delay=0.001))
    model = ScriptedModel([answer], protocol="openai-responses")
    async with serve_scripted_model(model) as base_url:
        client = ta.OpenAIClient(api_key="sk-test", base_url=base_url + "/v1")
        result = result_of(await timed_collect(client))
    assert result.message.content == answer.blocks
    assert result.request_id == "req_scripted_1"
