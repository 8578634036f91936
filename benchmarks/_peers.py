"""The peers, on asyncio (their own runtime): the official SDK's beta tool runner (with
and without ``run_tools_eagerly``) and pydantic-ai's Anthropic agent, pointed at the
same loopback server, with tools that do the same work as trio_agent's.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from ._scenarios import TOOL_SCHEMAS, real_work, result_text

MODEL = "claude-scripted"
PROMPT = "Please do the task."


def _tool_body(name: str, root: Path) -> Callable[..., Awaitable[str]]:
    async def run(**tool_input: Any) -> str:
        if tool_input.get("real"):
            return await asyncio.to_thread(real_work, name, tool_input, root)
        await asyncio.sleep(float(tool_input.get("ms", 0)) / 1000)
        text, is_error = result_text(name, tool_input)
        return ("Error: " + text) if is_error else text

    run.__name__ = name
    return run


def sdk_version() -> str | None:
    """Why the SDK tool runner cannot run here, or None."""
    try:
        from anthropic import AsyncAnthropic  # noqa: F401
        from anthropic.lib.tools import beta_async_tool  # noqa: F401
    except ImportError as exc:
        return f"anthropic tool runner not importable: {exc}"
    return None


def pydantic_ai_missing() -> str | None:
    try:
        from pydantic_ai import Agent  # noqa: F401
        from pydantic_ai.models.anthropic import AnthropicModel  # noqa: F401
        from pydantic_ai.providers.anthropic import AnthropicProvider  # noqa: F401
    except ImportError as exc:
        return f"pydantic-ai not installed ({exc}); pip install 'pydantic-ai-slim[anthropic]'"
    return None


async def _sdk_turn(base_url: str, root: Path, eager: bool) -> float:
    from anthropic import AsyncAnthropic
    from anthropic.lib.tools import beta_async_tool

    tools = [
        beta_async_tool(
            _tool_body(name, root),
            name=name,
            description=spec["description"],
            input_schema=spec["input_schema"],
        )
        for name, spec in TOOL_SCHEMAS.items()
    ]
    async with AsyncAnthropic(api_key="bench", base_url=base_url, max_retries=0) as client:
        t0 = time.perf_counter()
        runner = client.beta.messages.tool_runner(
            model=MODEL,
            max_tokens=1024,
            tools=tools,
            stream=True,
            thread=False,
            run_tools_eagerly=eager,
            messages=[{"role": "user", "content": PROMPT}],
        )
        turns = 0
        async for stream in runner:
            async for _event in stream:
                pass
            turns += 1
        elapsed = time.perf_counter() - t0
    if turns != 2:
        raise RuntimeError(f"the SDK tool runner made {turns} model calls, expected 2")
    return elapsed


async def _pydantic_ai_turn(base_url: str, root: Path) -> float:
    from anthropic import AsyncAnthropic
    from pydantic_ai import Agent, Tool
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    client = AsyncAnthropic(api_key="bench", base_url=base_url, max_retries=0)
    model = AnthropicModel(MODEL, provider=AnthropicProvider(anthropic_client=client))
    tools = [
        Tool.from_schema(
            _tool_body(name, root),
            name=name,
            description=spec["description"],
            json_schema=spec["input_schema"],
            # Write (and non-read-only Bash) run alone, like trio_agent's unsafe tools.
            sequential=name == "Write",
        )
        for name, spec in TOOL_SCHEMAS.items()
    ]
    agent = Agent(model, tools=tools)
    try:
        t0 = time.perf_counter()
        result = await agent.run(PROMPT)
        elapsed = time.perf_counter() - t0
    finally:
        await client.close()
    if "All done." not in str(result.output):
        raise RuntimeError(f"pydantic-ai ended with {result.output!r}")
    return elapsed


async def _within(seconds: float, turn: Awaitable[float]) -> float:
    """*turn*, or ``TimeoutError`` once *seconds* have passed."""
    async with asyncio.timeout(None if math.isinf(seconds) else seconds):
        return await turn


def sdk_turn(base_url: str, root: Path, eager: bool, timeout: float = math.inf) -> float:
    return asyncio.run(_within(timeout, _sdk_turn(base_url, root, eager)))


def pydantic_ai_turn(base_url: str, root: Path, timeout: float = math.inf) -> float:
    return asyncio.run(_within(timeout, _pydantic_ai_turn(base_url, root)))
