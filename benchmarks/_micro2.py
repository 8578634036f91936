"""Micro-benchmarks of the executor: dispatch, cancellation, progress latency
(the client's pipeline is in ``_pipeline``). Each runs against bare Trio / bare httpx-sse on the same input."""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Mapping
from typing import Any

import trio
import trio.testing

from trio_agent import TurnOptions

from ._config import Config
from ._report import Series


def _tool(name: str, run: Any, *, safe: bool = True, cascade: bool = False) -> Any:
    from trio_agent import Tool

    return Tool(
        name,
        name,
        {"type": "object"},
        run,
        concurrency_safe=safe,
        cancels_siblings_on_error=cascade,
    )


def _blocks(n: int, name: str) -> list[Any]:
    from trio_agent import ToolUseBlock

    return [ToolUseBlock(f"toolu_{i:06}", name, {}) for i in range(n)]


# --- dispatch ----------------------------------------------------------------------


async def _noop(_input: Mapping[str, Any], _ctx: Any) -> str:
    return "ok"


async def _executor_dispatch(n: int, max_concurrency: int) -> tuple[float, float]:
    from trio_agent import open_tool_executor

    tools = [_tool("noop", _noop)]
    blocks = _blocks(n, "noop")
    received = 0
    cpu0, t0 = time.process_time(), time.perf_counter()
    async with open_tool_executor(
        tools, options=TurnOptions(max_tool_concurrency=max_concurrency)
    ) as executor:
        for block in blocks:
            executor.add_tool(block)
        executor.finish()
        async for _result in executor.results:
            received += 1
    elapsed = time.process_time() - cpu0, time.perf_counter() - t0
    assert received == n
    return elapsed


async def _bare_dispatch(n: int) -> tuple[float, float]:
    """The bare design, yielding as the executor does: a task per call, in its own
    cancel scope, runs the tool and hands its result over without waiting (an
    unbounded channel's ``send_nowait``, like the executor's buffer); the consumer
    receives each result (one checkpoint each, like ``executor.results``)."""
    received = 0
    cpu0, t0 = time.process_time(), time.perf_counter()
    send, recv = trio.open_memory_channel[str](math.inf)

    async def task() -> None:
        with trio.CancelScope():
            send.send_nowait(await _noop({}, None))

    async with trio.open_nursery() as nursery:
        for _ in range(n):
            nursery.start_soon(task)
        with recv:
            for _ in range(n):
                await recv.receive()
                received += 1
    elapsed = time.process_time() - cpu0, time.perf_counter() - t0
    assert received == n
    return elapsed


def bench_dispatch(config: Config) -> list[Series]:
    n = 2_000 if config.quick else 10_000
    name, metric = "dispatch", f"us per no-op tool (N={n})"
    cpu_metric = f"CPU us per no-op tool (N={n})"
    ours = Series(name, "trio_agent executor (max_concurrency=N)", metric, "us")
    ours10 = Series(
        name, "trio_agent executor (max_concurrency=10)", metric, "us", subject=ours.contestant
    )
    bare = Series(
        name, "bare trio: task + cancel scope + channel", metric, "us", subject=ours.contestant
    )
    ours_cpu = Series(name, ours.contestant, cpu_metric, "us")
    ours10_cpu = Series(name, ours10.contestant, cpu_metric, "us", subject=ours.contestant)
    bare_cpu = Series(name, bare.contestant, cpu_metric, "us", subject=ours.contestant)
    runs = (
        (ours, ours_cpu, lambda: trio.run(_executor_dispatch, n, n)),
        (ours10, ours10_cpu, lambda: trio.run(_executor_dispatch, n, 10)),
        (bare, bare_cpu, lambda: trio.run(_bare_dispatch, n)),
    )
    for i in range(max(config.repeat, 3)):
        # Interleaved, the order rotating each round; GC on for all, each run starting
        # from a full collection (else a collection made due by another contestant's
        # garbage lands in this one's window: the bare row moved 15-26 us that way).
        for wall_row, cpu_row, run in runs[i % 3 :] + runs[: i % 3]:
            gc.collect()
            cpu, wall = run()
            wall_row.samples.append(wall / n * 1e6)
            cpu_row.samples.append(cpu / n * 1e6)
    ours.note = (
        "no-op tools; both sides: a task and a cancel scope per call, results handed "
        "over without waiting, one checkpoint per result received"
    )
    return [ours, ours10, bare, ours_cpu, ours10_cpu, bare_cpu]


# --- cancellation latency ---------------------------------------------------------------


async def _forever(_input: Mapping[str, Any], _ctx: Any) -> str:
    await trio.sleep_forever()
    raise AssertionError("unreachable")


async def _executor_cancel(n: int) -> tuple[float, float]:
    """(wall, CPU) seconds from the failure until n results were received."""
    from trio_agent import ToolOutput, open_tool_executor

    failed_at: list[tuple[float, float]] = []

    async def fail(_input: Mapping[str, Any], _ctx: Any) -> Any:
        failed_at.append((time.perf_counter(), time.process_time()))
        return ToolOutput("exit status 1", is_error=True)

    tools = [_tool("wait", _forever), _tool("Bash", fail, cascade=True)]
    received: list[Any] = []
    async with open_tool_executor(
        tools, options=TurnOptions(max_tool_concurrency=n + 1)
    ) as executor:
        for block in _blocks(n, "wait"):
            executor.add_tool(block)
        await trio.testing.wait_all_tasks_blocked()
        from trio_agent import AbortReason, ToolUseBlock

        executor.add_tool(ToolUseBlock("toolu_fail", "Bash", {}))
        executor.finish()
        # The same consumer as the bare side's: n receives (results come in add
        # order, the failed call's own last, after the clock stops).
        for _ in range(n):
            received.append(await executor.results.receive())
        end = (time.perf_counter(), time.process_time())
        last = await executor.results.receive()
    assert all(r.abort_reason is AbortReason.SIBLING_ERROR for r in received)
    assert last.tool_use_id == "toolu_fail"
    assert len(received) == n
    return end[0] - failed_at[0][0], end[1] - failed_at[0][1]


async def _bare_cancel(n: int) -> tuple[float, float]:
    """The bare design the goal names: a task per call runs the same tool in its own
    cancel scope; the failure cancels each sibling's scope and the consumer
    receives a result for each (as the executor's consumer does), from the
    failure on."""
    send, recv = trio.open_memory_channel[str](math.inf)
    scopes: list[trio.CancelScope] = []

    async def waiter() -> None:
        with trio.CancelScope() as scope:
            scopes.append(scope)
            await _forever({}, None)
        send.send_nowait("cancelled")

    received: list[str] = []
    async with trio.open_nursery() as nursery:
        for _ in range(n):
            nursery.start_soon(waiter)
        await trio.testing.wait_all_tasks_blocked()
        t0 = (time.perf_counter(), time.process_time())
        for scope in scopes:
            scope.cancel()
        for _ in range(n):
            received.append(await recv.receive())
        end = (time.perf_counter(), time.process_time())
    assert len(received) == n
    return end[0] - t0[0], end[1] - t0[1]


def bench_cancellation(config: Config) -> list[Series]:
    n = 1_000
    name, metric = "cancellation", f"ms until {n} synthetic results received"
    ours = Series(name, "trio_agent executor (sibling_error cascade)", metric, "ms")
    bare = Series(name, "bare trio, a cancel scope per task", metric, "ms", subject=ours.contestant)
    ours_cpu = Series(name, ours.contestant, f"CPU {metric}", "ms")
    bare_cpu = Series(name, bare.contestant, f"CPU {metric}", "ms", subject=ours.contestant)
    runs = ((ours, ours_cpu, _executor_cancel), (bare, bare_cpu, _bare_cancel))
    for i in range(max(config.repeat, 3)):
        # Interleaved, the order flipping each round; GC on for both, each run
        # starting from a full collection, so that neither pays for a collection
        # the other's garbage made due.
        for wall_row, cpu_row, contestant in runs if i % 2 == 0 else runs[::-1]:
            gc.collect()
            wall, cpu = trio.run(contestant, n)
            wall_row.samples.append(wall * 1e3)
            cpu_row.samples.append(cpu * 1e3)
    ours.note = (
        "both sides: 1,000 tasks, each running the same tool in its own cancel scope; "
        "timed from the failure until the consumer has received a result per call"
    )
    return [ours, bare, ours_cpu, bare_cpu]


# --- progress latency ----------------------------------------------------------------


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _executor_progress(tools_n: int, reports: int) -> list[float]:
    from trio_agent import ToolProgress, open_tool_executor

    async def reporter(_input: Mapping[str, Any], ctx: Any) -> str:
        for _ in range(reports):
            await trio.sleep(0.001)
            ctx.progress(time.perf_counter())
        return "ok"

    latencies: list[float] = []
    async with open_tool_executor(
        [_tool("p", reporter)], options=TurnOptions(max_tool_concurrency=tools_n)
    ) as executor:
        for block in _blocks(tools_n, "p"):
            executor.add_tool(block)
        executor.finish()

        async def drain_results() -> None:
            async for _ in executor.results:
                pass

        async with trio.open_nursery() as nursery:
            nursery.start_soon(drain_results)
            async for item in executor.progress:
                if isinstance(item, ToolProgress):
                    latencies.append(time.perf_counter() - item.data)
    return latencies


async def _bare_progress(tools_n: int, reports: int) -> list[float]:
    send, recv = trio.open_memory_channel[float](math.inf)
    latencies: list[float] = []

    async def reporter(send: trio.MemorySendChannel[float]) -> None:
        async with send:
            for _ in range(reports):
                await trio.sleep(0.001)
                send.send_nowait(time.perf_counter())

    async with trio.open_nursery() as nursery:
        async with send:
            for _ in range(tools_n):
                nursery.start_soon(reporter, send.clone())
        async for stamp in recv:
            latencies.append(time.perf_counter() - stamp)
    return latencies


def bench_progress(config: Config) -> list[Series]:
    reports = 50 if config.quick else 200
    name = "progress"
    out: list[Series] = []
    # 100 tools every ms (the load: 100k reports/s, more than one Python core can
    # schedule) and 10 tools every ms (a load the scheduler keeps up with).
    for tools_n in (100, 10):
        rows = {}
        for q, label in ((0.5, "p50"), (0.99, "p99")):
            metric = f"{label} latency ctx.progress -> consumer ({tools_n} tools, every ms)"
            rows[q] = (
                Series(name, "trio_agent executor.progress", metric, "us"),
                Series(
                    name,
                    "bare trio memory channel",
                    metric,
                    "us",
                    subject="trio_agent executor.progress",
                ),
            )
        cpu_metric = f"CPU us per report ({tools_n} tools, every ms)"
        ours_cpu = Series(name, "trio_agent executor.progress", cpu_metric, "us")
        bare_cpu = Series(
            name, "bare trio memory channel", cpu_metric, "us", subject=ours_cpu.contestant
        )
        for _ in range(max(config.repeat, 3)):
            cpu0 = time.process_time()
            ours = trio.run(_executor_progress, tools_n, reports)
            cpu1 = time.process_time()
            bare = trio.run(_bare_progress, tools_n, reports)
            cpu2 = time.process_time()
            ours_cpu.samples.append((cpu1 - cpu0) / len(ours) * 1e6)
            bare_cpu.samples.append((cpu2 - cpu1) / len(bare) * 1e6)
            for q, (o, b) in rows.items():
                o.samples.append(_percentile(ours, q) * 1e6)
                b.samples.append(_percentile(bare, q) * 1e6)
        for o, b in rows.values():
            out += [o, b]
        out += [ours_cpu, bare_cpu]
    return out
