"""Prompt caching (issue 22): what a 20-call tool loop costs with caching on and off,
and the CPU the breakpoints add to building each request.

The cost is the session's ``usage.cost_usd`` at Sonnet 5.5's published prices, the
usage reported by :class:`trio_agent.testing.PromptCache` (the Messages API's cache,
emulated) in virtual time: deterministic, so one sample per repeat is the same
figure. The CPU is ``MessagesProvider.request_body`` of the loop's last request,
timed with and without the marks.
"""

from __future__ import annotations

import time
from typing import Any

import trio
import trio.testing

from ._config import Config
from ._report import Series

MODEL = "claude-sonnet-5-5"
CALLS = 20
#: A system prompt of Claude Code's order of size (about 6,000 tokens).
SYSTEM = "\n".join(
    f"Rule {n}: keep the build green, the diff small and the tests honest." for n in range(340)
)


def _script() -> list[Any]:
    from trio_agent import TextBlock, ToolUseBlock
    from trio_agent.testing import ScriptedAnswer

    uses = [
        ScriptedAnswer(
            blocks=[TextBlock(f"Reading {n}."), ToolUseBlock(f"t{n}", "read", {"path": f"f{n}"})],
            model=MODEL,
        )
        for n in range(CALLS - 1)
    ]
    return [*uses, ScriptedAnswer(blocks=[TextBlock("Done.")], model=MODEL)]


def _read_tool() -> Any:
    from trio_agent import tool

    @tool
    async def read(path: str) -> str:
        """Read a file of the project."""
        return f"{path}:\n" + "def f():\n    return 42\n" * 12

    return read


async def _loop(cache: Any) -> tuple[float, list[Any]]:
    """(the loop's cost in USD, the history of its last request)."""
    from trio_agent import Session, TurnOptions
    from trio_agent.testing import PromptCache, ScriptedModel

    model = ScriptedModel(_script(), prompt_cache=PromptCache())
    session = Session(
        model.client(),
        [_read_tool()],
        model=MODEL,
        system=SYSTEM,
        max_tokens=1000,
        options=TurnOptions(cache=cache),
    )
    async with session.submit("Fix the build.") as events:
        async for _ in events:
            pass
    cost = session.usage.cost_usd
    assert cost is not None
    return cost, list(session.messages[:-1])


def _build_us(history: list[Any], cache: Any, rounds: int) -> float:
    from trio_agent._model._anthropic import MessagesProvider
    from trio_agent._model._provider import ModelRequest

    provider = MessagesProvider()
    request = ModelRequest(MODEL, history, 1000, SYSTEM, [_read_tool()], None, cache)
    start = time.perf_counter()
    for _ in range(rounds):
        provider.request_body(request, stream=True)
    return (time.perf_counter() - start) / rounds * 1e6


def bench_caching(config: Config) -> list[Series]:
    name = "caching"
    cost_metric = f"cost of a {CALLS}-call tool loop, ~6k-token system prompt"
    build_metric = f"request build, call {CALLS} ({CALLS * 2 - 1} messages)"
    cost = {
        None: Series(name, "cache off", cost_metric, "USD"),
        "5m": Series(name, "cache 5m", cost_metric, "USD", subject="cache off"),
    }
    build = {
        None: Series(name, "cache off", build_metric, "us"),
        "5m": Series(name, "cache 5m", build_metric, "us", subject="cache off"),
    }
    rounds = 200 if config.quick else 2000
    history: list[Any] = []
    for _ in range(max(config.repeat, 3)):
        for cache in (None, "5m"):
            usd, history = trio.run(
                _loop, cache, clock=trio.testing.MockClock(autojump_threshold=0)
            )
            cost[cache].samples.append(usd)
        for cache in (None, "5m"):
            build[cache].samples.append(_build_us(history, cache, rounds))
    return [cost[None], cost["5m"], build[None], build["5m"]]
