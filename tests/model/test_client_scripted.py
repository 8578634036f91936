"""AnthropicClient against the scripted model: properties, faults, and a real socket."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import (
    AnthropicClient,
    AssistantMessage,
    OverloadedError,
    RetryPolicy,
    StreamIdleTimeoutError,
    StreamProtocolError,
    StreamTruncatedError,
    TextBlock,
    ToolUseBlock,
)
from trio_agent.lowlevel import StreamEvent, StreamResult
from trio_agent.testing import (
    Faults,
    HTTPErrorAnswer,
    ScriptedAnswer,
    ScriptedModel,
    Timing,
    serve_scripted_model,
    strategies,
)

EXACT = RetryPolicy(jitter=(1.0, 1.0))


def client_for(model: ScriptedModel, **kwargs: Any) -> AnthropicClient:
    kwargs.setdefault("retry", EXACT)
    http = httpx.AsyncClient(transport=model.transport())
    return AnthropicClient(
        api_key="test-key", base_url="http://scripted", http_client=http, **kwargs
    )


def events_of(items: list[Any]) -> list[dict[str, Any]]:
    return [i.data for i in items if isinstance(i, StreamEvent)]


@settings(max_examples=150, deadline=None)
@given(
    message=strategies.assistant_messages(citations=True),
    timing=strategies.timings(max_delay=0.5),
    framing=strategies.framings(),
)
def test_any_message_any_framing_streams_exactly(
    message: AssistantMessage, timing: Timing, framing: Faults, collect: Any
) -> None:
    async def main() -> None:
        model = ScriptedModel(
            [
                ScriptedAnswer.from_message(message, timing=timing),
                ScriptedAnswer.from_message(message, timing=timing, faults=framing),
            ]
        )
        client = client_for(model)
        plain = await collect(client)
        framed = await collect(client)
        for items in (plain, framed):
            result = items[-1]
            assert isinstance(result, StreamResult)
            assert result.message.to_api() == message.to_api()
            blocks = [i.content[0] for i in items if isinstance(i, AssistantMessage)]
            assert [b.to_api() for b in blocks] == [b.to_api() for b in message.content]
        assert events_of(framed) == events_of(plain)
        assert model.open_streams == 0

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


DEMO = ScriptedAnswer(
    blocks=[
        TextBlock("Let me look."),
        ToolUseBlock("toolu_1", "Read", {"path": "a.txt"}),
    ],
    timing=Timing(token_delay=0.01),
)


def faulted(**faults: Any) -> ScriptedAnswer:
    return ScriptedAnswer(blocks=DEMO.blocks, timing=DEMO.timing, faults=Faults(**faults))


@pytest.mark.parametrize(
    ("faults", "error"),
    [
        ({"truncate": True}, StreamTruncatedError),
        ({"disconnect_after_byte": 700}, StreamTruncatedError),
        ({"error_event_after": 4}, OverloadedError),
        ({"stall_before_event": 5, "stall_seconds": 200.0}, StreamIdleTimeoutError),
    ],
)
async def test_faults_after_content_raise_typed_errors(
    autojump_clock: Any, faults: dict[str, Any], error: type[Exception], collect: Any
) -> None:
    model = ScriptedModel([faulted(**faults), DEMO])
    with pytest.raises(error):
        await collect(client_for(model, idle_timeout=30.0))
    assert len(model.requests) == 1  # content was handed out: no retry
    assert model.open_streams == 0


async def test_error_event_before_content_is_retried(autojump_clock: Any, collect: Any) -> None:
    model = ScriptedModel([faulted(error_event_after=0), DEMO])
    items = await collect(client_for(model))
    assert items[-1].message.content == DEMO.blocks
    assert items[-1].statistics.retries == 1
    assert events_of(items)[0]["type"] == "message_start"
    assert [e["type"] for e in events_of(items)].count("message_start") == 1
    assert model.open_streams == 0


async def test_http_errors_then_success_exact_schedule(autojump_clock: Any, collect: Any) -> None:
    model = ScriptedModel(
        [
            HTTPErrorAnswer(status=529),
            HTTPErrorAnswer(status=429, headers={"retry-after": "7"}),
            DEMO,
        ]
    )
    start = trio.current_time()
    items = await collect(client_for(model))
    assert items[-1].statistics.retries == 2
    # 0.5 s back-off after the 529, then the 7 s retry-after; the answer itself
    # takes its token delays.
    first_byte = items[-1].ttft
    assert first_byte is not None
    assert first_byte >= 7.5
    assert trio.current_time() - start >= 7.5
    assert model.open_streams == 0


async def test_non_sse_200(autojump_clock: Any, collect: Any) -> None:
    model = ScriptedModel([HTTPErrorAnswer(status=200, body={"id": "x"})])
    with pytest.raises(StreamProtocolError, match="text/event-stream"):
        await collect(client_for(model))


async def test_pings_during_a_stall_keep_it_alive_but_count_as_stall(
    autojump_clock: Any, collect: Any
) -> None:
    model = ScriptedModel([faulted(stall_before_event=3, stall_seconds=100.0, pings_only_for=5.0)])
    items = await collect(client_for(model, idle_timeout=20.0, stall_timeout=30.0))
    stats = items[-1].statistics
    assert stats.stalls == 1
    assert stats.stall_time >= 100.0
    assert stats.pings > 0


async def test_cancel_closes_the_scripted_stream(autojump_clock: Any, collect: Any) -> None:
    model = ScriptedModel([faulted(stall_before_event=5, stall_seconds=50.0, pings_only_for=2.0)])
    with trio.move_on_after(10):
        await collect(client_for(model))
    assert model.open_streams == 0


@settings(max_examples=60, deadline=None)
@given(message=strategies.assistant_messages(), status=st.sampled_from([429, 500, 503, 529]))
def test_every_retryable_status_then_the_message(
    message: AssistantMessage, status: int, collect: Any
) -> None:
    async def main() -> None:
        model = ScriptedModel(
            [
                HTTPErrorAnswer(status=status),
                HTTPErrorAnswer(status=status),
                ScriptedAnswer.from_message(message),
            ]
        )
        items = await collect(client_for(model))
        assert items[-1].message.to_api() == message.to_api()
        assert items[-1].statistics.retries == 2
        assert model.open_streams == 0

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


async def test_real_socket_integration(collect: Any) -> None:
    model = ScriptedModel([DEMO, faulted(disconnect_after_byte=500)])
    async with serve_scripted_model(model) as base_url:
        client = AnthropicClient(api_key="test-key", base_url=base_url, retry=RetryPolicy.never())
        with trio.fail_after(20):
            items = await collect(client)
            assert items[-1].message.content == DEMO.blocks
            assert items[-1].request_id is not None
            with pytest.raises(StreamTruncatedError):
                await collect(client)
    assert model.requests[0].headers["x-api-key"] == "test-key"
    assert model.open_streams == 0
