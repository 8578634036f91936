"""OpenAIClient reads through the same path as AnthropicClient (``_http_stream``).

In the receiving task (no task spawned), idle timeout over a real socket by httpcore's
per-read timeout, a receive cancelled mid-read ends the stream, and an error inside
the stream carries the request id of the answer.
"""

from __future__ import annotations

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
    ScriptedAnswer,
    ScriptedModel,
    Timing,
    no_leaks,
    serve_scripted_model,
)

APIS = {"responses": "openai-responses", "chat": "openai-chat"}
TEXT = ScriptedAnswer(blocks=[ta.TextBlock("hello there, streaming world")])


def _stream(client: ta.OpenAIClient) -> Any:
    return client.stream(model="gpt-x", max_tokens=64, messages=[ta.UserMessage("hi")])


async def _collect_into(client: ta.OpenAIClient, received: list[Any]) -> None:
    async with _stream(client) as items:
        async for item in items:
            received.append(item)


@pytest.mark.parametrize("api", sorted(APIS))
async def test_the_stream_is_read_in_the_consumers_task(autojump_clock: Any, api: Any) -> None:
    model = ScriptedModel([TEXT], protocol=APIS[api])
    async with httpx.AsyncClient(transport=model.transport()) as http:
        client = ta.OpenAIClient(
            api_key="k", base_url="http://x/v1", http_client=http, api=api,
            retry=ta.RetryPolicy.never(),
        )  # fmt: skip
        with no_leaks(models=[model], http_clients=[http]) as check:
            async with _stream(client) as items:
                received = [item async for item in items]
        assert isinstance(received[-1], ta.lowlevel.StreamResult)
        assert received[-1].message.content == TEXT.blocks
        assert check.spawned == 0


@pytest.mark.parametrize("api", sorted(APIS))
async def test_idle_timeout_over_a_real_socket(api: Any) -> None:
    stalled = ScriptedAnswer(
        blocks=[ta.TextBlock("abcdefgh")], faults=Faults(stall_before_event=4, stall_seconds=30.0)
    )
    model = ScriptedModel([stalled], protocol=APIS[api])
    received: list[Any] = []
    async with serve_scripted_model(model) as base_url:
        client = ta.OpenAIClient(
            api_key="k", base_url=base_url + "/v1", api=api,
            retry=ta.RetryPolicy.never(), idle_timeout=3.0,  # the stall is 30 s
        )  # fmt: skip
        with trio.fail_after(20), pytest.raises(ta.StreamIdleTimeoutError, match="idle_timeout"):
            await _collect_into(client, received)
    assert received  # content came first, then the stall timed out
    assert model.open_streams == 0


async def test_a_receive_cancelled_mid_read_ends_the_stream(autojump_clock: Any) -> None:
    slow = ScriptedAnswer(blocks=[ta.TextBlock("abcdefgh")], timing=Timing(first_event_delay=1.0))
    model = ScriptedModel([slow], protocol="openai-responses")
    http = httpx.AsyncClient(transport=model.transport())
    client = ta.OpenAIClient(
        api_key="k", base_url="http://x/v1", http_client=http, retry=ta.RetryPolicy.never()
    )
    async with _stream(client) as items:
        with trio.move_on_after(0.5) as scope:
            await items.receive()
        assert scope.cancelled_caught
        with pytest.raises(ta.StreamTruncatedError, match="cancelled receive"):
            await items.receive()
    assert len(model.requests) == 1
    assert model.open_streams == 0


@settings(max_examples=15, deadline=None)
@given(api=st.sampled_from(sorted(APIS)), after=st.integers(min_value=3, max_value=6))
def test_an_error_in_the_stream_names_the_request(api: Any, after: int) -> None:
    answer = ScriptedAnswer(
        blocks=[ta.TextBlock("some text to stream in pieces")],
        faults=Faults(error_event_after=after),
    )
    model = ScriptedModel([answer], protocol=APIS[api])

    async def main() -> BaseException:
        async with httpx.AsyncClient(transport=model.transport()) as http:
            client = ta.OpenAIClient(
                api_key="k", base_url="http://x/v1", http_client=http, api=api,
                retry=ta.RetryPolicy.never(),
            )  # fmt: skip
            received: list[Any] = []
            with pytest.raises(ta.OverloadedError) as info:
                await _collect_into(client, received)
            return info.value

    error = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert isinstance(error, ta.APIStatusError)
    assert error.status_code is None
    assert error.request_id == "req_scripted_1"
