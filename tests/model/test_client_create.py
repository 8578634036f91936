"""``AnthropicClient.create()`` (one non-streaming request, the loop's last resort) and
the ``on_retry`` observer of ``stream()`` / ``create()``, on the scripted model."""

from __future__ import annotations

from typing import Any

import pytest

from trio_agent import (
    AnthropicClient,
    OverloadedError,
    RetryPolicy,
    StreamProtocolError,
    TextBlock,
    ToolUseBlock,
    Usage,
    UserMessage,
)
from trio_agent.lowlevel import RecoverableModelClient, StreamResult
from trio_agent.testing import HTTPErrorAnswer, RawAnswer, ScriptedAnswer, ScriptedModel

EXACT = RetryPolicy(max_retries=2, jitter=(1.0, 1.0))
ANSWER = ScriptedAnswer(
    blocks=[TextBlock("Hello."), ToolUseBlock("t1", "Read", {"path": "a"})],
    usage=Usage(input_tokens=12, output_tokens=7),
)


async def create(client: AnthropicClient, **kw: Any) -> StreamResult:
    return await client.create(model="m", messages=[UserMessage("hi")], max_tokens=50, **kw)


async def test_create_sends_stream_false_and_returns_the_message(autojump_clock: Any) -> None:
    scripted = ScriptedModel([ANSWER])
    client = scripted.client(retry=EXACT)
    assert isinstance(client, RecoverableModelClient)
    result = await create(client, extra_body={"temperature": 0.5})
    assert result.message == ANSWER.message
    assert result.ttft is None
    assert result.statistics.retries == 0
    assert result.request_id == "req_scripted_1"
    (request,) = scripted.requests
    assert request.body["stream"] is False
    assert request.body["max_tokens"] == 50
    assert request.body["temperature"] == 0.5


async def test_create_retries_under_the_policy(autojump_clock: Any) -> None:
    scripted = ScriptedModel([HTTPErrorAnswer(status=529), HTTPErrorAnswer(status=500), ANSWER])
    result = await create(scripted.client(retry=EXACT))
    assert result.statistics.retries == 2
    assert len(scripted.requests) == 3


async def test_on_retry_can_stop_the_retries(autojump_clock: Any) -> None:
    seen: list[Exception] = []

    def on_retry(exc: Exception) -> bool:
        seen.append(exc)
        return False

    scripted = ScriptedModel([HTTPErrorAnswer(status=529), ANSWER])
    with pytest.raises(OverloadedError):
        await create(scripted.client(retry=EXACT), on_retry=on_retry)
    assert len(seen) == 1
    assert len(scripted.requests) == 1
    # the same for a stream
    scripted = ScriptedModel([HTTPErrorAnswer(status=529), ANSWER])
    client = scripted.client(retry=EXACT)
    with pytest.raises(OverloadedError):
        await drain(client, on_retry)
    assert len(scripted.requests) == 1


async def drain(client: AnthropicClient, on_retry: Any) -> None:
    async with client.stream(
        model="m", messages=[UserMessage("hi")], max_tokens=5, on_retry=on_retry
    ) as items:
        async for _ in items:
            pass  # pragma: no cover


async def test_on_retry_sees_every_retry_of_a_stream(autojump_clock: Any) -> None:
    seen: list[str] = []

    def on_retry(exc: Exception) -> bool:
        seen.append(type(exc).__name__)
        return True

    scripted = ScriptedModel([HTTPErrorAnswer(status=529), RawAnswer(chunks=[]), ANSWER])
    client = scripted.client(retry=EXACT)
    async with client.stream(
        model="m", messages=[UserMessage("hi")], max_tokens=5, on_retry=on_retry
    ) as items:
        last = [item async for item in items][-1]
    assert isinstance(last, StreamResult)
    assert seen == ["OverloadedError", "StreamTruncatedError"]


@pytest.mark.parametrize(
    "body",
    [b"<html>oops</html>", b"[]", b'{"type": "error"}', b'{"type": "message", "content": 3}'],
)
async def test_a_200_that_is_not_a_message_is_a_protocol_error(
    autojump_clock: Any, body: bytes
) -> None:
    scripted = ScriptedModel([HTTPErrorAnswer(status=200, body=body)])
    with pytest.raises(StreamProtocolError, match="not a message"):
        await create(scripted.client(retry=EXACT))
    assert len(scripted.requests) == 1
