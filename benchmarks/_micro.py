"""Micro-benchmarks of Layers 1 and 2, each against a contestant on the same input."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any

from ._cli import Benchmark, Config
from ._report import Series


def _missing(what: str, exc: BaseException) -> str:
    return f"{what} not available here ({type(exc).__name__}: {exc})"


# --- accumulator ---------------------------------------------------------------------


def _text_events(deltas: int) -> list[dict[str, Any]]:
    from trio_agent import TextBlock
    from trio_agent.testing import ScriptedAnswer, Timing

    text = "abcd" * deltas
    return ScriptedAnswer(blocks=[TextBlock(text)], timing=Timing(text_chunk_size=4)).events()


def _tool_events(deltas: int, chunk: int = 16) -> list[dict[str, Any]]:
    from trio_agent import ToolUseBlock
    from trio_agent.testing import ScriptedAnswer, Timing

    # {"content":"xxx..."} is 14 bytes of framing around the payload.
    payload = "x" * (deltas * chunk - 14)
    block = ToolUseBlock("toolu_1", "Write", {"content": payload})
    events = ScriptedAnswer(blocks=[block], timing=Timing(json_chunk_size=chunk)).events()
    assert sum(1 for e in events if e["type"] == "content_block_delta") == deltas
    return events


def _time_ours(events: list[dict[str, Any]]) -> float:
    from trio_agent import MessageAccumulator

    acc = MessageAccumulator()
    feed = acc.feed
    gc.collect()
    t0 = time.perf_counter()
    for event in events:
        feed(event)
    elapsed = time.perf_counter() - t0
    assert acc.message.stop_reason is not None
    return elapsed


def _time_sdk(events: list[dict[str, Any]]) -> float:
    from anthropic._models import construct_type_unchecked
    from anthropic.lib.streaming._messages import accumulate_event
    from anthropic.types import RawMessageStreamEvent

    # Build the SDK's event objects outside the timed region: only accumulation is timed.
    sdk_events = [
        construct_type_unchecked(type_=RawMessageStreamEvent, value=e)  # type: ignore[arg-type]
        for e in events
    ]
    snapshot = None
    json_bufs: dict[int, bytes] = {}
    gc.collect()
    t0 = time.perf_counter()
    for event in sdk_events:
        snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs=json_bufs)
    elapsed = time.perf_counter() - t0
    assert snapshot is not None
    assert snapshot.stop_reason is not None
    return elapsed


def bench_accumulator(config: Config) -> list[Series]:
    name = "accumulator"
    cases = [("text 20k deltas", _text_events(5_000 if config.quick else 20_000))]
    tool_sizes = [2_000, 8_000]
    cases += [(f"tool input {n // 1000}k deltas", _tool_events(n)) for n in tool_sizes]
    out: list[Series] = []
    try:
        from anthropic.lib.streaming._messages import accumulate_event  # noqa: F401

        sdk_error = None
    except ImportError as exc:
        sdk_error = _missing("anthropic", exc)
    repeat = max(config.repeat, 3)
    per_byte: dict[str, list[float]] = {}
    for metric, events in cases:
        ours = Series(name, "trio_agent", metric, "ms")
        sdk = Series(
            name, "sdk accumulate_event", metric, "ms", subject="trio_agent", skipped=sdk_error
        )
        for _ in range(repeat):
            ours.samples.append(_time_ours(events) * 1e3)
            if sdk_error is None:
                sdk.samples.append(_time_sdk(events) * 1e3)
        out += [ours, sdk]
        if metric.startswith("tool input"):
            size = sum(
                len(e["delta"]["partial_json"])
                for e in events
                if e["type"] == "content_block_delta"
            )
            per_byte[metric] = [ms * 1e6 / size for ms in ours.samples]
    # Linearity: time per input byte at 2k deltas vs 8k deltas (flat = linear).
    first = f"tool input {tool_sizes[0] // 1000}k deltas"
    for metric, samples in per_byte.items():
        out.append(
            Series(
                name,
                f"trio_agent {metric}",
                "tool input ns/byte",
                "ns/byte",
                samples,
                subject=f"trio_agent {first}" if metric != first else None,
            )
        )
    return out


BENCHMARKS: list[Benchmark] = [
    Benchmark("accumulator", "MessageAccumulator vs the SDK's accumulate_event", bench_accumulator),
]


def _needs(
    attr: str, bench: Callable[[Config], list[Series]], title: str
) -> Callable[[Config], list[Series]]:
    """Run *bench* if ``trio_agent.<attr>`` exists, else report it skipped."""

    def run(config: Config) -> list[Series]:
        import trio_agent

        if not hasattr(trio_agent, attr):
            return [
                Series(title, "trio_agent", "-", "-", skipped=f"trio_agent.{attr} not merged yet")
            ]
        return bench(config)

    return run


def _late() -> list[Benchmark]:
    from . import _durable, _micro2, _pipeline, _scale

    return [
        Benchmark(
            "dispatch",
            "10,000 no-op tools: executor vs bare Trio nursery",
            _needs("open_tool_executor", _micro2.bench_dispatch, "dispatch"),
        ),
        Benchmark(
            "pipeline",
            "client (SSE+accumulate+channel) vs bare httpx-sse + json.loads",
            _needs("AnthropicClient", _pipeline.bench_pipeline, "pipeline"),
        ),
        Benchmark(
            "cancellation",
            "1,000 running siblings cancelled by one cascading error",
            _needs("open_tool_executor", _micro2.bench_cancellation, "cancellation"),
        ),
        Benchmark(
            "progress",
            "progress latency p50/p99, 100 tools reporting every ms",
            _needs("open_tool_executor", _micro2.bench_progress, "progress"),
        ),
        Benchmark(
            "scale",
            "1,000 concurrent agents on the loopback server: time, RSS",
            _needs("open_tool_executor", _scale.bench_scale, "scale"),
        ),
        Benchmark(
            "durable",
            "durable turns (DBOS, SQLite) vs plain Session: sessions/s, per-turn overhead",
            _durable.bench_durable,
        ),
    ]


BENCHMARKS += _late()
