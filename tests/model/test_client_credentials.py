"""AnthropicClient's credentials: ``api_key``/``$ANTHROPIC_API_KEY`` as ``x-api-key``,
``auth_token``/``$ANTHROPIC_AUTH_TOKEN`` as ``Authorization: Bearer`` (both when both
are set, as the official SDK does), or explicit headers; with none of them every
request is refused with :class:`AuthenticationError` before anything is sent."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

import trio_agent
from trio_agent import AnthropicClient, AuthenticationError, TextBlock, TurnEnd, UserMessage
from trio_agent.testing import ScriptedAnswer, ScriptedModel

HELLO = ScriptedAnswer(blocks=[TextBlock("hello")])
ENV_NAMES = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")


def _kwargs() -> dict[str, Any]:
    return {"model": "claude-x", "max_tokens": 64, "messages": [UserMessage("hi")]}


def _client(model: ScriptedModel, **kwargs: Any) -> AnthropicClient:
    http = httpx.AsyncClient(transport=model.transport())
    return AnthropicClient(base_url="http://scripted", http_client=http, **kwargs)


async def _stream_and_create(client: AnthropicClient) -> None:
    async with client.stream(**_kwargs()) as items:
        async for _ in items:
            pass
    await client.create(**_kwargs())


secrets = st.sampled_from([None, "", "sk-ant-arg-0123"])
tokens = st.sampled_from([None, "", "tok-arg-4567"])
env_keys = st.sampled_from([None, "", "sk-ant-env-89ab"])
env_tokens = st.sampled_from([None, "", "tok-env-cdef"])
header_sets = st.sampled_from(
    [{}, {"X-Api-Key": "sk-header"}, {"Authorization": "Bearer tok-header"}, {"x-other": "1"}]
)


@settings(max_examples=60, deadline=None)
@given(
    api_key=secrets,
    auth_token=tokens,
    env_key=env_keys,
    env_token=env_tokens,
    headers=header_sets,
)
def test_credentials_are_sent_or_refused_before_sending(
    api_key: str | None,
    auth_token: str | None,
    env_key: str | None,
    env_token: str | None,
    headers: dict[str, str],
) -> None:
    key = api_key if api_key is not None else env_key
    token = auth_token if auth_token is not None else env_token
    lowered = {k.lower(): v for k, v in headers.items()}
    has_credentials = bool(key or token or {"x-api-key", "authorization"} & set(lowered))
    model = ScriptedModel([HELLO, HELLO])
    with pytest.MonkeyPatch.context() as patch:
        for name, value in zip(ENV_NAMES, (env_key, env_token), strict=True):
            if value is None:
                patch.delenv(name, raising=False)
            else:
                patch.setenv(name, value)
        client = _client(model, api_key=api_key, auth_token=auth_token, default_headers=headers)
    assert client.has_credentials is has_credentials
    assert "sk-" not in repr(client)
    assert "tok-" not in repr(client)

    async def main() -> None:
        if has_credentials:
            await _stream_and_create(client)
            return
        with pytest.raises(AuthenticationError) as raised:
            async with client.stream(**_kwargs()):
                raise AssertionError("the block was entered without credentials")
        for name in ENV_NAMES:
            assert name in str(raised.value)
        assert raised.value.status_code is None
        assert raised.value.error_type == "authentication_error"
        with pytest.raises(AuthenticationError, match="ANTHROPIC_AUTH_TOKEN"):
            await client.create(**_kwargs())

    trio.run(main)
    if not has_credentials:
        assert model.requests == []
        return
    assert len(model.requests) == 2  # a stream and a create(), the same headers
    for request in model.requests:
        sent = request.headers
        # an explicit header wins over the key or token, as in the SDK
        expected_key = lowered.get("x-api-key", key or None)
        expected_auth = lowered.get("authorization", f"Bearer {token}" if token else None)
        assert sent.get("x-api-key") == expected_key
        assert sent.get("authorization") == expected_auth


async def test_a_session_turn_without_credentials_ends_with_the_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    model = ScriptedModel([HELLO])
    session = trio_agent.Session(_client(model), [], model="claude-x")
    ends: list[TurnEnd] = []
    async with session.submit("hi") as events:
        async for event in events:
            if isinstance(event, TurnEnd):
                ends.append(event)
    (end,) = ends
    assert end.reason == "error"
    assert isinstance(end.error, AuthenticationError)
    assert "ANTHROPIC_API_KEY" in str(end.error)
    assert model.requests == []
