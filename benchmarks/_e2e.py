"""End-to-end turns: the scripted model on a real loopback server (its own process),
real time, the same tools for every contestant.

Contestants: trio_agent (streaming executor), after-stream sequential, after-stream
parallel (both on trio_agent's own client, so only the scheduling differs), the SDK's
beta tool runner with and without ``run_tools_eagerly``, pydantic-ai, and the ideal
(the executor's rules with zero overhead, on the actual block-finish times of the
trio_agent run it is paired with).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import trio

from . import _peers
from ._cli import Benchmark, Config
from ._ideal import IdealCall, ideal_schedule
from ._report import Series, Timeline
from ._scenarios import (
    SCENARIOS,
    TOOL_SCHEMAS,
    Scenario,
    is_safe,
    make_corpus,
    real_work,
    result_text,
)

MODEL = "claude-scripted"
PROMPT = "Please do the task."
QUICK_SCALE = 0.15


# --- shared resources: the server process and the corpus ----------------------------


def server_url(config: Config) -> str:
    if "server" not in config.resources:
        root = Path(__file__).resolve().parent.parent
        proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks", "serve"],
            cwd=root,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        assert proc.stdin is not None
        url = proc.stdout.readline().strip()
        if not url.startswith("http://"):
            proc.kill()
            raise RuntimeError(f"the benchmark server did not start (said {url!r})")

        def close() -> None:
            assert proc.stdin is not None
            proc.stdin.close()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()

        config.resources["server"] = url
        config.resources.setdefault("closers", []).append(close)
    return config.resources["server"]


def corpus(config: Config) -> Path:
    if "corpus" not in config.resources:
        tmp = tempfile.TemporaryDirectory(prefix="trio-agent-bench-")
        config.resources.setdefault("closers", []).append(tmp.cleanup)
        files = 4 if config.quick else 24
        config.resources["corpus"] = make_corpus(Path(tmp.name), files=files)
    return config.resources["corpus"]


# --- the trace of one trio-side run ---------------------------------------------------


@attrs.define
class Trace:
    t0: float = attrs.field(factory=time.perf_counter)
    names: dict[str, str] = attrs.field(factory=dict[str, str])
    inputs: dict[str, Mapping[str, Any]] = attrs.field(factory=dict[str, Mapping[str, Any]])
    block_done: dict[str, float] = attrs.field(factory=dict[str, float])
    started: dict[str, float] = attrs.field(factory=dict[str, float])
    ended: dict[str, float] = attrs.field(factory=dict[str, float])
    cancelled: set[str] = attrs.field(factory=set[str])
    delivered: dict[str, float] = attrs.field(factory=dict[str, float])
    calls: list[tuple[float, float]] = attrs.field(factory=list[tuple[float, float]])
    end: float = 0.0

    def now(self) -> float:
        return time.perf_counter() - self.t0


def trio_tools(root: Path, trace_of: Callable[[], Trace]) -> list[Any]:
    """trio_agent Tools doing the scenario's work, recording start and end times."""
    from trio_agent import Tool, ToolContext, ToolOutput

    def make(name: str) -> Any:
        async def run(tool_input: Mapping[str, Any], ctx: ToolContext) -> Any:
            trace = trace_of()
            tid = ctx.tool_use_id
            trace.started[tid] = trace.now()
            done = False
            try:
                if tool_input.get("real"):
                    text = await trio.to_thread.run_sync(real_work, name, dict(tool_input), root)
                    is_error = False
                else:
                    await trio.sleep(float(tool_input.get("ms", 0)) / 1000)
                    text, is_error = result_text(name, tool_input)
                done = True
                return ToolOutput(text, is_error=is_error)
            finally:
                trace.ended[tid] = trace.now()
                if not done:
                    trace.cancelled.add(tid)

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


def _note_block(trace: Trace, block: Any) -> None:
    trace.block_done[block.id] = trace.now()
    trace.names[block.id] = block.name
    trace.inputs[block.id] = block.input


async def _streamed(
    client: Any,
    messages: list[Any],
    tools: list[Any],
    trace: Trace,
    on_tool: Callable[[Any], None] | None,
) -> Any:
    """One model call on trio_agent's client; returns the whole message."""
    from trio_agent import AssistantMessage, StreamResult

    start = trace.now()
    message = None
    async with client.stream(model=MODEL, messages=messages, max_tokens=1024, tools=tools) as items:
        async for item in items:
            if isinstance(item, AssistantMessage):
                for block in item.tool_uses:
                    _note_block(trace, block)
                    if on_tool is not None:
                        on_tool(block)
            elif isinstance(item, StreamResult):
                message = item.message
    trace.calls.append((start, trace.now()))
    assert message is not None
    return message


async def turn_streaming(client: Any, tools: list[Any], trace: Trace) -> None:
    """trio_agent: each tool_use goes to the executor at its content_block_stop."""
    from trio_agent import UserMessage, open_tool_executor

    messages: list[Any] = [UserMessage(PROMPT)]
    while True:
        results: list[Any] = []
        with trio.CancelScope() as turn:
            async with (
                open_tool_executor(tools, turn_scope=turn) as executor,
                trio.open_nursery() as nursery,
            ):

                async def collect(executor: Any = executor, results: list[Any] = results) -> None:
                    async for result in executor.results:
                        trace.delivered[result.tool_use_id] = trace.now()
                        results.append(result)

                nursery.start_soon(collect)
                message = await _streamed(client, messages, tools, trace, executor.add_tool)
                executor.finish()
        results.extend(executor.drain())
        messages.append(message)
        if message.stop_reason != "tool_use":
            break
        messages.append(UserMessage([r.to_block() for r in results]))
    trace.end = trace.now()


async def turn_after_stream(client: Any, tools: list[Any], trace: Trace, parallel: bool) -> None:
    """Wait for the whole message, then run its tools: one by one, or each run of
    consecutive safe calls at once (a non-safe call alone), as non-streaming agents do."""
    from trio_agent import ToolContext, ToolResultBlock, UserMessage

    by_name = {t.name: t for t in tools}
    messages: list[Any] = [UserMessage(PROMPT)]
    while True:
        message = await _streamed(client, messages, tools, trace, None)
        messages.append(message)
        if message.stop_reason != "tool_use":
            break
        blocks: dict[str, Any] = {}

        async def run_one(block: Any, blocks: dict[str, Any] = blocks) -> None:
            tool = by_name[block.name]
            out = await tool.run(block.input, ToolContext(block.id, block.name))
            trace.delivered[block.id] = trace.now()
            blocks[block.id] = ToolResultBlock(block.id, out.content, is_error=out.is_error)

        uses = list(message.tool_uses)
        if not parallel:
            for block in uses:
                await run_one(block)
        else:
            batch: list[Any] = []
            for i, block in enumerate([*uses, None]):
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
                del i
        messages.append(UserMessage([blocks[b.id] for b in uses]))
    trace.end = trace.now()


def run_trio(turn: Callable[..., Any], base_url: str, root: Path, **kw: Any) -> Trace:
    from trio_agent import AnthropicClient, RetryPolicy

    holder: list[Trace] = []

    async def main() -> None:
        import httpx

        tools = trio_tools(root, lambda: holder[0])
        async with httpx.AsyncClient(timeout=httpx.Timeout(60.0)) as http:
            client = AnthropicClient(
                api_key="bench",
                base_url=base_url,
                http_client=http,
                retry=RetryPolicy(max_retries=0),
            )
            holder.append(Trace())
            await turn(client, tools, holder[0], **kw)

    trio.run(main)
    return holder[0]


def ideal_turn(trace: Trace, scenario: Scenario) -> tuple[float, str]:
    """The ideal turn time on this run's actual block-finish times."""
    calls: list[IdealCall] = []
    for tid, arrive in sorted(trace.block_done.items(), key=lambda kv: kv[1]):
        tool_input = trace.inputs[tid]
        name = trace.names[tid]
        if tool_input.get("real"):
            # Real work: its duration as measured in this very run.
            duration = trace.ended[tid] - trace.started[tid]
        else:
            duration = float(tool_input.get("ms", 0)) / 1000
        calls.append(
            IdealCall(
                tid,
                arrive,
                duration,
                is_safe(name, tool_input),
                cascades=bool(tool_input.get("fail")) and name == "Bash",
            )
        )
    schedule, source = ideal_schedule(calls)
    first_stream_end = trace.calls[0][1]
    tools_end = max((end for _, end in schedule.values()), default=0.0)
    # Then the second model call, as long as it took in this run.
    second = sum(end - start for start, end in trace.calls[1:])
    return max(first_stream_end, tools_end) + second, source


def timeline(title: str, trace: Trace, scenario: Scenario) -> Timeline:
    tl = Timeline(title)
    for start, end in trace.calls:
        tl.span("model stream", "stream", start, end)
    calls = [
        IdealCall(
            tid,
            t,
            (float(trace.inputs[tid].get("ms", 0)) / 1000)
            if not trace.inputs[tid].get("real")
            else trace.ended[tid] - trace.started[tid],
            is_safe(trace.names[tid], trace.inputs[tid]),
            bool(trace.inputs[tid].get("fail")),
        )
        for tid, t in sorted(trace.block_done.items(), key=lambda kv: kv[1])
    ]
    ideal, _ = ideal_schedule(calls)
    for n, (tid, done) in enumerate(sorted(trace.block_done.items(), key=lambda kv: kv[1]), 1):
        row = f"{n:02} {trace.names[tid]}"
        tl.mark(row, "block", done)
        if tid in trace.started:
            tl.span(row, "queued", done, trace.started[tid])
            tl.span(
                row,
                "cancelled" if tid in trace.cancelled else "executing",
                trace.started[tid],
                trace.ended[tid],
            )
        if tid in trace.delivered:
            tl.mark(row, "delivered", trace.delivered[tid])
        if tid in ideal:
            tl.mark(row, "ideal", ideal[tid][1])
    return tl


def bench_scenario(scenario: Scenario) -> Callable[[Config], list[Series]]:
    def run(config: Config) -> list[Series]:
        scale = QUICK_SCALE if config.quick else 1.0
        base = f"{server_url(config)}/s/{scenario.name}/{scale}"
        root = corpus(config)
        name = f"e2e.{scenario.name}"
        metric = "turn wall time"
        subject = "trio_agent"

        def row(contestant: str, skipped: str | None = None) -> Series:
            return Series(
                name,
                contestant,
                metric,
                "s",
                subject=None if contestant == subject else subject,
                skipped=skipped,
            )

        ours = row(subject)
        ideal = row("ideal")
        seq = row("after-stream sequential")
        par = row("after-stream parallel")
        sdk_missing = _peers.sdk_version()
        sdk = row("sdk tool_runner", sdk_missing)
        sdk_eager = row("sdk tool_runner eager", sdk_missing)
        pyd = row("pydantic-ai", _peers.pydantic_ai_missing())
        last: Trace | None = None
        if not config.quick:
            # Warm up once (imports, first connections), untimed.
            run_trio(turn_streaming, base, root)
        for _ in range(config.repeat):
            last = run_trio(turn_streaming, base, root)
            ours.samples.append(last.end)
            ideal_time, source = ideal_turn(last, scenario)
            ideal.samples.append(ideal_time)
            ideal.note = source
            seq.samples.append(run_trio(turn_after_stream, base, root, parallel=False).end)
            par.samples.append(run_trio(turn_after_stream, base, root, parallel=True).end)
            if sdk_missing is None:
                sdk.samples.append(_peers.sdk_turn(base, root, eager=False))
                sdk_eager.samples.append(_peers.sdk_turn(base, root, eager=True))
            if pyd.skipped is None:
                pyd.samples.append(_peers.pydantic_ai_turn(base, root))
        assert last is not None
        config.timelines.append(
            timeline(f"{name}: {scenario.description} (trio_agent)", last, scenario)
        )
        if scenario.name == "bash_cascade":
            ours.note = (
                "trio_agent cancels the failing Bash's siblings (by design); the "
                "others run every call to the end"
            )
        return [ours, ideal, seq, par, sdk, sdk_eager, pyd]

    return run


BENCHMARKS: list[Benchmark] = [
    Benchmark(f"e2e.{s.name}", s.description, bench_scenario(s)) for s in SCENARIOS.values()
]
