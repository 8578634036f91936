"""The provider seam (``_provider.py``, ``_client.py``): one ``stream()``/``create()``
for every client, request fields the library does not model only via ``extra_body``,
and a new provider in a few lines."""

from __future__ import annotations

from typing import Any, final

import httpx
import pytest

from trio_agent import (
    AnthropicClient,
    APIStatusError,
    AssistantMessage,
    OpenAIClient,
    RetryPolicy,
    TextBlock,
    UserMessage,
)
from trio_agent._model import MessageAccumulator, StreamLimits, StreamResult
from trio_agent._model._anthropic import MessagesProvider
from trio_agent._model._client import ProviderClient
from trio_agent._model._provider import EventDecoder, ModelRequest, Provider
from trio_agent.lowlevel import RecoverableModelClient
from trio_agent.testing import ScriptedAnswer, ScriptedModel

HI = [UserMessage("hi")]
ANSWER = ScriptedAnswer(blocks=[TextBlock("Hello.")])


def clients() -> list[ProviderClient]:
    return [
        AnthropicClient(api_key="k"),
        OpenAIClient(api_key="k"),
        OpenAIClient(api_key="k", api="chat"),
    ]


@pytest.mark.parametrize("client", clients(), ids=["anthropic", "responses", "chat"])
def test_every_client_is_one_base_over_a_provider(client: ProviderClient) -> None:
    assert isinstance(client, ProviderClient)
    assert isinstance(client, RecoverableModelClient)
    assert type(client).stream is ProviderClient.stream
    assert type(client).create is ProviderClient.create
    assert client.url == client.base_url + client.provider.path


@pytest.mark.parametrize("client", clients(), ids=["anthropic", "responses", "chat"])
async def test_an_unknown_keyword_is_a_type_error(client: ProviderClient) -> None:
    with pytest.raises(TypeError, match="temperature"):
        client.stream(model="m", messages=HI, max_tokens=8, temperature=0.5)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="temperature"):
        await client.create(model="m", messages=HI, max_tokens=8, temperature=0.5)  # type: ignore[call-arg]


@pytest.mark.parametrize("client", clients(), ids=["anthropic", "responses", "chat"])
def test_extra_body_is_merged_and_stream_is_the_clients(client: ProviderClient) -> None:
    plain = client.build_request_body(model="m", messages=HI, max_tokens=8)
    body = client.build_request_body(
        model="m", messages=HI, max_tokens=8, extra_body={"temperature": 0.5, "stream": False}
    )
    assert body.pop("temperature") == 0.5
    assert body == plain
    assert body["stream"] is True


def test_chat_keeps_the_callers_stream_options_and_asks_for_usage() -> None:
    client = OpenAIClient(api_key="k", api="chat")
    extra = {"stream_options": {"include_obfuscation": False}}
    streamed = client.build_request_body(model="m", messages=HI, max_tokens=8, extra_body=extra)
    assert streamed["stream_options"] == {"include_obfuscation": False, "include_usage": True}
    request = ModelRequest("m", HI, 8, extra_body=extra)
    whole = client.provider.request_body(request, stream=False)
    assert "stream_options" not in whole  # only allowed on a streamed request
    assert whole["stream"] is False


async def test_extra_body_reaches_the_request(autojump_clock: Any) -> None:
    model = ScriptedModel([ANSWER, ANSWER])
    client = model.client()
    async with client.stream(
        model="m", messages=HI, max_tokens=8, extra_body={"top_k": 3}
    ) as items:
        async for _ in items:
            pass
    await client.create(model="m", messages=HI, max_tokens=8, extra_body={"top_k": 4})
    assert [r.body["top_k"] for r in model.requests] == [3, 4]
    assert [r.body["stream"] for r in model.requests] == [True, False]


def test_openai_settings_are_read_only() -> None:
    client = OpenAIClient(api_key="k", api="chat", early_tool_start=True)
    assert (client.api, client.early_tool_start, client.max_tokens_field) == (
        "chat",
        True,
        "max_completion_tokens",
    )
    with pytest.raises(AttributeError):
        client.api = "responses"  # type: ignore[misc]


# -- a new provider is one module's worth: a Provider and a ProviderClient subclass ----


@final
class _GatewayClient(ProviderClient):
    """A gateway speaking the Messages API at /gateway/messages, with its own key."""

    def __init__(self, http_client: httpx.AsyncClient) -> None:
        super().__init__(
            _Gateway(),
            base_url="http://gateway/",
            http_client=http_client,
            retry=RetryPolicy.never(),
            idle_timeout=10.0,
            stall_timeout=5.0,
            connect_timeout=1.0,
            limits=None,
            default_headers=None,
        )

    def _headers(self) -> dict[str, str]:
        return {"x-gateway-key": "g", "anthropic-version": "2023-06-01"}


@final
class _Gateway(Provider):
    path = "/gateway/messages"

    def __init__(self) -> None:
        self._messages = MessagesProvider()

    def request_body(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        return {"request": self._messages.request_body(request, stream=stream), "stream": stream}

    def decoder(self, accumulator: MessageAccumulator) -> EventDecoder:
        return self._messages.decoder(accumulator)

    def answer(self, data: Any, limits: StreamLimits) -> AssistantMessage:
        return self._messages.answer(data, limits)

    def retryable_in_stream(self, exc: APIStatusError) -> bool:
        return False


async def test_a_new_provider_streams_and_creates(autojump_clock: Any) -> None:
    model = ScriptedModel([ANSWER, ANSWER])
    client = _GatewayClient(httpx.AsyncClient(transport=model.transport()))
    result: StreamResult | None = None
    async with client.stream(model="m", messages=HI, max_tokens=8) as items:
        async for item in items:
            if isinstance(item, StreamResult):
                result = item
    assert result is not None
    assert result.message.text == "Hello."
    created = await client.create(model="m", messages=HI, max_tokens=8)
    assert created.message == result.message
    first, second = model.requests
    assert (first.path, first.headers["x-gateway-key"]) == ("/gateway/messages", "g")
    assert first.body["request"]["messages"] == [{"role": "user", "content": "hi"}]
    assert (first.body["stream"], second.body["stream"]) == (True, False)
