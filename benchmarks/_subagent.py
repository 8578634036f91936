"""Subagents (issue 27): what dispatching a task through ``trio_agent.subagent`` costs
over the bare way, a tool that runs a nested ``query()`` itself.

One parent turn whose answer calls the tool N times (concurrency-safe, side by
side); each call runs a child turn of one model call answering "done". Both
contestants run the same script on the in-process scripted model in virtual time
(no sleep is real), so the difference per call is the subagent's own work: its
watcher task and shield, the typed progress forwarded to the parent, the
``SubagentTurn`` record and its usage summed into the parent's.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Mapping
from typing import Any

import trio
import trio.testing

from ._config import Config
from ._report import Series


def _script(n: int, name: str) -> list[Any]:
    from trio_agent import TextBlock, ToolUseBlock
    from trio_agent.testing import ScriptedAnswer, Timing

    fast = Timing(first_event_delay=0.0, token_delay=0.0)
    calls = [ToolUseBlock(f"toolu_{i:05}", name, {"prompt": f"task {i}"}) for i in range(n)]
    # The children's answers are all alike: whichever asks first gets the next one.
    return [
        ScriptedAnswer(blocks=calls, timing=fast),
        *[ScriptedAnswer(blocks=[TextBlock("done")], timing=fast)] * n,
        ScriptedAnswer(blocks=[TextBlock("all done")], timing=fast),
    ]


def _bare_tool() -> Any:
    """The bare way: a tool that runs a nested query() and returns its last text."""
    from trio_agent import AssistantMessage, TextBlock, Tool, TurnEnd, UserMessage, query

    async def run(input: Mapping[str, Any], ctx: Any) -> str:
        turn = ctx.turn
        end: Any = None
        async with query(
            turn.client, [UserMessage(input["prompt"])], tools=[], model=turn.model, system="s"
        ) as events:
            async for event in events:
                if isinstance(event, TurnEnd):
                    end = event
        last = end.messages[-1]
        assert isinstance(last, AssistantMessage)
        return "".join(b.text for b in last.content if isinstance(b, TextBlock))

    schema = {"type": "object", "properties": {"prompt": {"type": "string"}}}
    return Tool("bare", "Runs a nested turn.", schema, run, concurrency_safe=True)


async def _turn(n: int, kind: str) -> tuple[float, float]:
    """(CPU, wall) seconds of one parent turn dispatching *n* calls of *kind*."""
    from trio_agent import TurnEnd, TurnOptions, UserMessage, query, subagent
    from trio_agent.testing import ScriptedModel

    tool = (
        subagent("sub", "Runs a nested turn.", tools=[], system="s")
        if kind == "sub"
        else _bare_tool()
    )
    model = ScriptedModel(_script(n, tool.name))
    options = TurnOptions(max_tool_concurrency=n)
    end: Any = None
    cpu0, t0 = time.process_time(), time.perf_counter()
    async with query(
        model.client(),
        [UserMessage("go")],
        tools=[tool],
        model="m",
        max_tokens=100,
        options=options,
    ) as events:
        async for event in events:
            if isinstance(event, TurnEnd):
                end = event
    elapsed = time.process_time() - cpu0, time.perf_counter() - t0
    assert end is not None
    assert end.reason == "completed", end
    assert len(model.requests) == n + 2
    assert end.subagent_turns == (n if kind == "sub" else 0)
    return elapsed


def bench_subagent(config: Config) -> list[Series]:
    n = 50 if config.quick else 200
    name, metric = "subagent", f"us per call (N={n} side by side, one child call each)"
    cpu_metric = f"CPU us per call (N={n})"
    ours = Series(name, "trio_agent.subagent", metric, "us")
    bare = Series(name, "bare nested query() in a tool", metric, "us", subject=ours.contestant)
    ours_cpu = Series(name, ours.contestant, cpu_metric, "us")
    bare_cpu = Series(name, bare.contestant, cpu_metric, "us", subject=ours.contestant)

    def run(kind: str) -> tuple[float, float]:
        clock = trio.testing.MockClock(autojump_threshold=0)
        return trio.run(_turn, n, kind, clock=clock)

    runs = ((ours, ours_cpu, "sub"), (bare, bare_cpu, "bare"))
    for i in range(max(config.repeat, 3)):
        for wall_row, cpu_row, kind in runs[i % 2 :] + runs[: i % 2]:
            gc.collect()
            cpu, wall = run(kind)
            wall_row.samples.append(wall / n * 1e6)
            cpu_row.samples.append(cpu / n * 1e6)
    ours.note = (
        "both: the parent's model call, then per call a nested turn of one scripted model "
        "call (in-process HTTP, SSE, accumulation) in virtual time; the difference is the "
        "subagent's watcher and shield, typed progress, its record and usage"
    )
    return [ours, bare, ours_cpu, bare_cpu]
