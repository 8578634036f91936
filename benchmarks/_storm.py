"""Progress storms (issue 10): tools that report progress as fast as they can must not
slow the turn nor grow memory. A whole ``query()`` turn over the scripted model, its
tools each reporting *reports* times, against the same turn without progress."""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Mapping
from typing import Any

import trio
import trio.lowlevel

from ._config import Config
from ._report import Series


async def _turn(
    tools_n: int, reports: int, *, progress: bool, trace: bool
) -> tuple[float, int, int]:
    """(wall seconds, peak traced bytes if *trace*, progress events the consumer got)."""
    from trio_agent import TextBlock, Tool, ToolProgress, ToolUseBlock, UserMessage, query
    from trio_agent.testing import ScriptedAnswer, ScriptedModel

    async def noisy(_input: Mapping[str, Any], ctx: Any) -> str:
        for i in range(reports):
            line = f"line {i} of a command printing a lot"  # the tool's own work
            if progress:
                ctx.progress(line)
            if i % 1000 == 999:
                await trio.lowlevel.checkpoint()
        return "done"

    tool = Tool("Noisy", "prints a lot", {"type": "object"}, noisy, concurrency_safe=True)
    uses = [ToolUseBlock(f"toolu_{i:04}", "Noisy", {}) for i in range(tools_n)]
    model = ScriptedModel([ScriptedAnswer(blocks=uses), ScriptedAnswer(blocks=[TextBlock("done")])])
    seen = 0
    if trace:
        tracemalloc.start()
    start = time.perf_counter()
    try:
        async with query(
            model.client(), [UserMessage("go")], tools=[tool], model="m", max_tokens=64
        ) as events:
            async for event in events:
                if isinstance(event, ToolProgress):
                    seen += 1
                    await trio.lowlevel.checkpoint()  # a consumer that renders each report
        wall = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1] if trace else 0
    finally:
        if trace:
            tracemalloc.stop()
    return wall, peak, seen


def bench_progress_storm(config: Config) -> list[Series]:
    tools_n = 10
    reports = 10_000 if config.quick else 100_000
    name = "progress_storm"
    what = f"{tools_n} tools x {reports:,} progress reports"
    rows = {
        "quiet": (
            Series(name, "trio_agent, no progress", f"turn wall time ({what})", "ms"),
            Series(name, "trio_agent, no progress", f"peak traced memory ({what})", "KiB"),
        ),
        "noisy": (
            Series(
                name,
                "trio_agent, progress",
                f"turn wall time ({what})",
                "ms",
                subject="trio_agent, no progress",
            ),
            Series(
                name,
                "trio_agent, progress",
                f"peak traced memory ({what})",
                "KiB",
                subject="trio_agent, no progress",
            ),
        ),
    }
    delivered = Series(name, "trio_agent, progress", "progress events delivered", "events")
    for _ in range(max(config.repeat, 3)):
        for label in ("quiet", "noisy"):
            noisy = label == "noisy"
            # Time without tracemalloc (it slows every allocation); memory with it.
            wall, _, seen = trio.run(
                lambda noisy=noisy: _turn(tools_n, reports, progress=noisy, trace=False)
            )
            _, peak, _ = trio.run(
                lambda noisy=noisy: _turn(tools_n, reports, progress=noisy, trace=True)
            )
            rows[label][0].samples.append(wall * 1e3)
            rows[label][1].samples.append(peak / 1024)
            if noisy:
                delivered.samples.append(seen)
    return [*rows["quiet"], *rows["noisy"], delivered]
