"""The client's read path: the stream is read in the receiving task.

Idle timeout over a real socket (httpcore's per-read timeout), the consumer's own time
never counted, and the channel's edges: a receive cancelled mid-read, two receivers at
once, receiving after the end or after closing.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import trio
import trio.testing

from trio_agent import (
    AnthropicClient,
    RetryPolicy,
    StreamIdleTimeoutError,
    StreamTruncatedError,
    TextBlock,
    UserMessage,
)
from trio_agent.lowlevel import StreamResult
from trio_agent.testing import Faults, ScriptedAnswer, ScriptedModel, Timing, serve_scripted_model

TEXT = ScriptedAnswer(blocks=[TextBlock("hello there, streaming world")])


def _stream(client: AnthropicClient) -> Any:
    return client.stream(model="claude-x", max_tokens=64, messages=[UserMessage("hi")])


def _scripted(model: ScriptedModel, **kwargs: Any) -> AnthropicClient:
    http = httpx.AsyncClient(transport=model.transport())
    return AnthropicClient(
        api_key="k",
        base_url="http://scripted",
        http_client=http,
        retry=RetryPolicy.never(),
        **kwargs,
    )


async def _collect_into(client: AnthropicClient, received: list[Any]) -> None:
    async with _stream(client) as items:
        async for item in items:
            received.append(item)


async def test_idle_timeout_over_a_real_socket() -> None:
    stalled = ScriptedAnswer(
        blocks=[TextBlock("abcdefgh")], faults=Faults(stall_before_event=4, stall_seconds=30.0)
    )
    model = ScriptedModel([stalled])
    received: list[Any] = []
    async with serve_scripted_model(model) as base_url:
        client = AnthropicClient(
            api_key="k", base_url=base_url, retry=RetryPolicy.never(), idle_timeout=0.3
        )
        with trio.fail_after(20), pytest.raises(StreamIdleTimeoutError, match="idle_timeout"):
            await _collect_into(client, received)
    assert received  # content came first, then the stall timed out
    assert model.open_streams == 0


async def test_consumer_time_is_not_idle_time_over_a_real_socket() -> None:
    model = ScriptedModel([TEXT])
    count = 0
    async with serve_scripted_model(model) as base_url:
        client = AnthropicClient(
            api_key="k", base_url=base_url, retry=RetryPolicy.never(), idle_timeout=0.2
        )
        with trio.fail_after(30):
            async with _stream(client) as items:
                async for item in items:
                    count += 1
                    if count <= 3:
                        await trio.sleep(0.3)  # longer than idle_timeout, between reads
                    last = item
    assert isinstance(last, StreamResult)
    assert last.message.content == TEXT.blocks


async def test_a_receive_cancelled_mid_read_ends_the_stream(autojump_clock: Any) -> None:
    slow = ScriptedAnswer(blocks=[TextBlock("abcdefgh")], timing=Timing(first_event_delay=1.0))
    model = ScriptedModel([slow])
    client = _scripted(model, idle_timeout=30.0)
    async with _stream(client) as items:
        with trio.move_on_after(0.5) as scope:
            await items.receive()  # the headers came; the first event is 1 s away
        assert scope.cancelled_caught
        with pytest.raises(StreamTruncatedError, match="cancelled receive"):
            await items.receive()
    assert len(model.requests) == 1
    assert model.open_streams == 0


async def test_two_receivers_at_once_is_an_error(autojump_clock: Any) -> None:
    slow = ScriptedAnswer(blocks=[TextBlock("abcd")], timing=Timing(first_event_delay=1.0))
    model = ScriptedModel([slow])
    client = _scripted(model)
    async with _stream(client) as items, trio.open_nursery() as nursery:
        nursery.start_soon(items.receive)
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(trio.BusyResourceError):
            await items.receive()
    assert model.open_streams == 0


async def test_receive_after_the_end_and_after_close(autojump_clock: Any) -> None:
    model = ScriptedModel([TEXT])
    client = _scripted(model)
    async with _stream(client) as items:
        seen = [item async for item in items]
        assert isinstance(seen[-1], StreamResult)
        with pytest.raises(trio.EndOfChannel):
            await items.receive()
        await items.aclose()
        with pytest.raises(trio.ClosedResourceError):
            await items.receive()
    assert model.open_streams == 0
