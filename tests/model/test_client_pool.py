"""The model clients' lifetime: ``async with client:`` shares one connection pool,
``aclose()`` closes it, a closed client refuses requests, a passed ``http_client``
is never closed. Over a real loopback server, with the connections counted on the
server's side and every file descriptor checked at the end."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import (
    AnthropicClient,
    ClientClosedError,
    OpenAIClient,
    RetryPolicy,
    TextBlock,
    UserMessage,
)
from trio_agent.lowlevel import StreamResult
from trio_agent.testing import ScriptedAnswer, ScriptedModel, no_leaks, serve_scripted_model

HELLO = ScriptedAnswer(blocks=[TextBlock("hello there")])
NEVER = RetryPolicy.never()


def _kwargs() -> dict[str, Any]:
    return {"model": "claude-x", "max_tokens": 64, "messages": [UserMessage("hi")]}


async def _stream(client: AnthropicClient | OpenAIClient, *, stop_after: int | None = None) -> Any:
    """The stream's result, or None when the consumer left after *stop_after* items."""
    async with client.stream(**_kwargs()) as items:
        count = 0
        async for item in items:
            count += 1
            if isinstance(item, StreamResult):
                return item
            if stop_after is not None and count >= stop_after:
                return None
    raise AssertionError("the stream ended without a result")


async def test_an_entered_client_reuses_one_connection() -> None:
    model = ScriptedModel([HELLO, HELLO, HELLO])
    with no_leaks(models=[model]):
        async with serve_scripted_model(model) as base_url:
            async with AnthropicClient(api_key="k", base_url=base_url, retry=NEVER) as client:
                first = await _stream(client)
                second = await _stream(client)
                created = await client.create(**_kwargs())
            assert client.closed
    assert first.message.content == second.message.content == HELLO.blocks
    assert created.message.content == HELLO.blocks
    assert len(model.requests) == 3
    assert model.connections == 1


async def test_without_async_with_each_request_has_its_own_connection() -> None:
    model = ScriptedModel([HELLO, HELLO, HELLO])
    with no_leaks(models=[model]):
        async with serve_scripted_model(model) as base_url:
            client = AnthropicClient(api_key="k", base_url=base_url, retry=NEVER)
            await _stream(client)
            await _stream(client)
            await client.create(**_kwargs())
            assert not client.closed
    assert len(model.requests) == 3
    assert model.connections == 3  # and none left open (no_leaks checks the fds)


async def test_the_openai_client_shares_its_pool_too() -> None:
    model = ScriptedModel([HELLO, HELLO], protocol="openai-responses")
    with no_leaks(models=[model]):
        async with (
            serve_scripted_model(model) as base_url,
            OpenAIClient(api_key="k", base_url=base_url, retry=NEVER) as client,
        ):
            results = [await _stream(client), await _stream(client)]
    assert [r.message.content for r in results] == [HELLO.blocks, HELLO.blocks]
    assert model.connections == 1


async def test_aclose_without_async_with_closes_the_shared_pool_too() -> None:
    model = ScriptedModel([HELLO])
    with no_leaks(models=[model]):
        async with serve_scripted_model(model) as base_url:
            client = AnthropicClient(api_key="k", base_url=base_url, retry=NEVER)
            await client.__aenter__()
            await _stream(client)
            await client.aclose()
            await client.aclose()  # idempotent
            await client.__aexit__(None, None, None)
            assert client.closed
    assert model.connections == 1


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_a_closed_client_refuses_every_request_before_sending(provider: str) -> None:
    model = ScriptedModel([HELLO] * 3)
    http = httpx.AsyncClient(transport=model.transport())
    client: AnthropicClient | OpenAIClient
    if provider == "anthropic":
        client = AnthropicClient(api_key="k", base_url="http://scripted", http_client=http)
    else:
        client = OpenAIClient(api_key="k", base_url="http://scripted/v1", http_client=http)
    async with client:
        pass
    with pytest.raises(ClientClosedError, match="was closed"):
        await _stream(client)
    with pytest.raises(ClientClosedError):
        async with client:
            pass
    if isinstance(client, AnthropicClient):
        with pytest.raises(ClientClosedError):
            await client.create(**_kwargs())
    assert model.requests == []
    # the caller's http client was not closed: it still serves a request
    assert not http.is_closed
    response = await http.post("http://scripted/v1/messages", json={"stream": False})
    assert response.status_code == 200
    await http.aclose()


async def test_nested_async_with_closes_at_the_outermost() -> None:
    model = ScriptedModel([HELLO, HELLO])
    with no_leaks(models=[model]):
        async with serve_scripted_model(model) as base_url:
            async with AnthropicClient(api_key="k", base_url=base_url, retry=NEVER) as client:
                async with client as inner:
                    assert inner is client
                    await _stream(client)
                assert not client.closed
                await _stream(client)
            assert client.closed
    assert model.connections == 1


async def test_aclose_in_a_cancelled_scope_still_closes_the_connections() -> None:
    model = ScriptedModel([HELLO])
    with no_leaks(models=[model]):
        async with serve_scripted_model(model) as base_url:
            client = AnthropicClient(api_key="k", base_url=base_url, retry=NEVER)
            with trio.CancelScope() as scope:
                async with client:
                    await _stream(client)
                    scope.cancel()
                    await trio.sleep_forever()
            assert scope.cancelled_caught
            assert client.closed


@settings(max_examples=12, deadline=None)
@given(plan=st.lists(st.sampled_from(["stream", "create", "leave_early"]), min_size=1, max_size=5))
def test_any_sequence_of_requests_shares_the_pool_and_leaks_nothing(plan: list[str]) -> None:
    """A consumer leaving a stream early drops that connection (the body was not read);
    every complete request leaves its connection for the next one."""
    model = ScriptedModel([HELLO] * len(plan))

    async def main() -> None:
        async with (
            serve_scripted_model(model) as base_url,
            AnthropicClient(api_key="k", base_url=base_url, retry=NEVER) as client,
        ):
            for step in plan:
                if step == "stream":
                    result = await _stream(client)
                    assert result.message.content == HELLO.blocks
                elif step == "create":
                    created = await client.create(**_kwargs())
                    assert created.message.content == HELLO.blocks
                else:
                    assert await _stream(client, stop_after=2) is None

    with no_leaks(models=[model]) as check:
        trio.run(main, instruments=[check])
    assert len(model.requests) == len(plan)
    # a new connection for the first request and after each early leave (but the last)
    dropped = plan[:-1].count("leave_early")
    assert model.connections == 1 + dropped
