"""OpenAI caches on its own: ``cache=`` sends nothing, and its ``cached_tokens`` are
``Usage.cache_read_input_tokens`` as Anthropic's reads are."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from trio_agent import OpenAIClient, RetryPolicy, TextBlock, Usage, UserMessage
from trio_agent.lowlevel import StreamResult
from trio_agent.testing import ScriptedAnswer, ScriptedModel


@pytest.mark.parametrize("protocol", ["openai-responses", "openai-chat"])
async def test_cached_tokens_are_cache_reads(autojump_clock: Any, protocol: Any) -> None:
    usage = Usage(input_tokens=200, output_tokens=3, cache_read_input_tokens=1800)
    model = ScriptedModel(
        [ScriptedAnswer(blocks=[TextBlock("ok")], usage=usage)], protocol=protocol
    )
    client = OpenAIClient(
        api_key="sk-test",
        base_url="http://scripted/v1",
        http_client=httpx.AsyncClient(transport=model.transport()),
        retry=RetryPolicy.never(),
        api="responses" if protocol == "openai-responses" else "chat",
    )
    async with client.stream(
        model="gpt-5", messages=[UserMessage("hi")], max_tokens=10, system="sys", cache="1h"
    ) as items:
        results = [i async for i in items if isinstance(i, StreamResult)]
    got = results[0].message.usage
    assert (got.input_tokens, got.cache_read_input_tokens) == (200, 1800)
    assert b"cache_control" not in model.requests[0].content
