"""One turn of each trio-side contestant, on trio_agent's client and the same tools.

- :func:`run_query`: trio_agent itself, ``trio_agent.query`` with the streaming
  executor; the turn's timeline comes from its events (``BlockFinished``,
  ``ToolResult``...) fed to a :class:`trio_agent._cli._timeline.TurnRecorder`, and from
  the tools' ``run`` wrapped by :func:`trio_agent._cli._timeline.instrument`.
- :func:`run_after_stream`: wait for the whole message, then run its tools one by
  one (ReAct-style) or each run of consecutive safe calls at once.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any, Literal

import attrs
import trio

from trio_agent import TurnOptions

from ._scenarios import TOOL_SCHEMAS, is_safe, real_work, result_text

MODEL = "claude-scripted"
PROMPT = "Please do the task."
MAX_TOKENS = 1024


def scenario_tools(root: Path) -> list[Any]:
    """trio_agent Tools doing the scenarios' work: a sleep of ``ms``, or real file work."""
    from trio_agent import Tool, ToolContext, ToolOutput

    def make(name: str) -> Any:
        async def run(tool_input: Mapping[str, Any], ctx: ToolContext) -> Any:
            del ctx
            if tool_input.get("real"):
                text = await trio.to_thread.run_sync(real_work, name, dict(tool_input), root)
                return ToolOutput(text)
            await trio.sleep(float(tool_input.get("ms", 0)) / 1000)
            text, is_error = result_text(name, tool_input)
            return ToolOutput(text, is_error=is_error)

        spec = TOOL_SCHEMAS[name]
        return Tool(
            name,
            spec["description"],
            spec["input_schema"],
            run,
            concurrency_safe=partial(is_safe, name),
            interrupt_behavior="cancel" if name == "Bash" else "block",
            cancels_siblings_on_error=name == "Bash",
        )

    return [make(name) for name in TOOL_SCHEMAS]


@attrs.define(eq=False)
class QueryRun:
    """One trio_agent turn: the recorder's timeline plus what the recorder does not keep.

    Attributes:
        recorder: the turn's ``TurnRecorder`` (model calls, tool rows with their
            start/end and state); times are seconds since the turn began.
        blocks: each tool_use block in stream order, with the time its
            ``BlockFinished`` event arrived.
        delivered: when each tool's ``ToolResult`` reached the consumer.
        end: when ``TurnEnd`` arrived.
        max_tool_concurrency: the cap the turn ran with.
    """

    recorder: Any
    max_tool_concurrency: int
    blocks: dict[str, tuple[float, Any]] = attrs.field(factory=dict[str, tuple[float, Any]])
    delivered: dict[str, float] = attrs.field(factory=dict[str, float])
    end: float = 0.0

    def feed(self, event: object) -> None:
        from trio_agent import BlockFinished, ToolResult, ToolUseBlock, TurnEnd, TurnEndReason

        self.recorder.feed(event)
        now = self.recorder.now()
        if isinstance(event, BlockFinished) and isinstance(event.block, ToolUseBlock):
            self.blocks[event.block.id] = (now, event.block)
        elif isinstance(event, ToolResult):
            self.delivered[event.tool_use_id] = now
        elif isinstance(event, TurnEnd):
            self.end = now
            if event.reason != TurnEndReason.COMPLETED:
                raise RuntimeError(f"the turn ended with {event.reason}: {event.message}")


async def query_turn(client: Any, tools: list[Any], *, max_tool_concurrency: int = 10) -> QueryRun:
    """trio_agent: ``query()`` with its streaming executor, timeline recorded."""
    from trio_agent import UserMessage, query
    from trio_agent._cli._timeline import TurnRecorder, instrument

    recorder = TurnRecorder(trio.current_time)
    run = QueryRun(recorder, max_tool_concurrency)
    async with query(
        client,
        [UserMessage(PROMPT)],
        tools=instrument(tools, recorder),
        model=MODEL,
        max_tokens=MAX_TOKENS,
        options=TurnOptions(max_tool_concurrency=max_tool_concurrency),
    ) as events:
        async for event in events:
            run.feed(event)
    if run.end == 0.0:
        raise RuntimeError("the turn sent no TurnEnd")
    return run


async def after_stream_turn(client: Any, tools: list[Any], *, parallel: bool) -> float:
    """Wait for the whole message, then run its tools: one by one, or each run of
    consecutive safe calls at once (a non-safe call alone), as non-streaming agents
    do. Returns the turn's wall time."""
    from trio_agent import ToolContext, ToolResultBlock, UserMessage
    from trio_agent.lowlevel import StreamResult

    t0 = time.perf_counter()
    by_name = {t.name: t for t in tools}
    messages: list[Any] = [UserMessage(PROMPT)]
    while True:
        message = None
        async with client.stream(
            model=MODEL, messages=messages, max_tokens=MAX_TOKENS, tools=tools
        ) as items:
            async for item in items:
                if isinstance(item, StreamResult):
                    message = item.message
        assert message is not None
        messages.append(message)
        if message.stop_reason != "tool_use":
            break
        blocks: dict[str, Any] = {}

        async def run_one(block: Any, blocks: dict[str, Any] = blocks) -> None:
            out = await by_name[block.name].run(block.input, ToolContext(block.id, block.name))
            blocks[block.id] = ToolResultBlock(block.id, out.content, is_error=out.is_error)

        uses = list(message.tool_uses)
        if not parallel:
            for block in uses:
                await run_one(block)
        else:
            batch: list[Any] = []
            for block in [*uses, None]:
                if block is not None and is_safe(block.name, block.input):
                    batch.append(block)
                    continue
                if batch:
                    async with trio.open_nursery() as nursery:
                        for b in batch:
                            nursery.start_soon(run_one, b)
                    batch = []
                if block is not None:
                    await run_one(block)
        messages.append(UserMessage([blocks[b.id] for b in uses]))
    return time.perf_counter() - t0


#: The wire protocol a turn speaks: the Messages API, or OpenAI's Responses API.
Provider = Literal["anthropic", "openai-responses"]


async def with_client(
    base_url: str,
    body: Callable[[Any], Awaitable[Any]],
    seconds: float = math.inf,
    provider: Provider = "anthropic",
) -> Any:
    """Run ``body(client)`` with an ``AnthropicClient`` on *base_url* (or an
    ``OpenAIClient`` on ``{base_url}/v1`` for ``provider="openai-responses"``), no
    retries; ``trio.TooSlowError`` if it takes more than *seconds*."""
    import httpx

    from trio_agent import AnthropicClient, OpenAIClient, RetryPolicy

    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    with trio.fail_after(seconds):
        async with httpx.AsyncClient(timeout=httpx.Timeout(120.0), limits=limits) as http:
            retry = RetryPolicy(max_retries=0)
            client: Any
            if provider == "anthropic":
                client = AnthropicClient(
                    api_key="bench", base_url=base_url, http_client=http, retry=retry
                )
            else:
                client = OpenAIClient(
                    api_key="bench", base_url=f"{base_url}/v1", http_client=http, retry=retry
                )
            return await body(client)


def run_query(
    base_url: str,
    root: Path,
    *,
    max_tool_concurrency: int = 10,
    timeout: float = math.inf,
    provider: Provider = "anthropic",
) -> QueryRun:
    """One trio_agent turn in a fresh ``trio.run``, within *timeout* seconds."""

    async def body(client: Any) -> QueryRun:
        return await query_turn(
            client, scenario_tools(root), max_tool_concurrency=max_tool_concurrency
        )

    return trio.run(with_client, base_url, body, timeout, provider)


def run_after_stream(
    base_url: str,
    root: Path,
    *,
    parallel: bool,
    timeout: float = math.inf,
    provider: Provider = "anthropic",
) -> float:
    """One after-stream turn in a fresh ``trio.run``; its wall time (within *timeout* s)."""

    async def body(client: Any) -> float:
        return await after_stream_turn(client, scenario_tools(root), parallel=parallel)

    return trio.run(with_client, base_url, body, timeout, provider)
