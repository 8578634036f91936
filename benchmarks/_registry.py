"""Every benchmark, in the order ``python -m benchmarks run`` runs them: the one list.

``list``, ``run`` and ``verify`` read :data:`BENCHMARKS`; a new benchmark is one
entry here (its module only defines ``bench_...(config) -> list[Series]``). The
end-to-end entries are made from the scenarios (:data:`~benchmarks._scenarios.SCENARIOS`),
those of :data:`OPENAI_SCENARIOS` also over OpenAI's Responses API.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from . import (
    _aio,
    _caching,
    _command,
    _durable,
    _e2e,
    _micro,
    _micro2,
    _pipeline,
    _rule_decision,
    _scale,
    _storm,
    _subagent,
)
from ._config import Benchmark
from ._scenarios import SCENARIOS

__all__ = ["BENCHMARKS", "BY_NAME", "OPENAI_SCENARIOS"]

#: The scenarios also run over OpenAI's Responses API.
OPENAI_SCENARIOS = ("seed1", "fifty_safe")

BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark(
        "accumulator",
        "MessageAccumulator vs the SDK's accumulate_event",
        _micro.bench_accumulator,
    ),
    Benchmark(
        "dispatch",
        "10,000 no-op tools: executor vs bare Trio nursery",
        _micro2.bench_dispatch,
    ),
    Benchmark(
        "pipeline",
        "client (SSE+accumulate+channel) vs bare httpx-sse + json.loads",
        _pipeline.bench_pipeline,
    ),
    Benchmark(
        "cancellation",
        "1,000 running siblings cancelled by one cascading error",
        _micro2.bench_cancellation,
    ),
    Benchmark(
        "progress",
        "progress latency p50/p99, 100 tools reporting every ms",
        _micro2.bench_progress,
    ),
    Benchmark(
        "progress_storm",
        "10 tools x 100k progress reports: turn time and memory, with vs without",
        _storm.bench_progress_storm,
    ),
    Benchmark(
        "scale",
        "1,000 concurrent agents on the loopback server: CPU, GC, time, RSS",
        _scale.bench_scale,
    ),
    Benchmark(
        "scale_10k",
        "10,000 concurrent Sessions in one process: peak RSS",
        _scale.bench_scale_10k,
    ),
    Benchmark(
        "session",
        "300 Sessions vs the after-stream loop on the same client: CPU per turn, GC on",
        _scale.bench_session,
    ),
    Benchmark(
        "durable",
        "durable turns (DBOS, SQLite) vs plain Session: sessions/s, per-turn overhead",
        _durable.bench_durable,
    ),
    Benchmark(
        "aio",
        "a turn through trio_agent.aio (asyncio, guest mode) vs trio.run: CPU, latency/event",
        _aio.bench_aio,
    ),
    Benchmark(
        "rule_decision",
        "PermissionRules.decide on a 1 KiB, 64 KiB and depth-200 Bash command",
        _rule_decision.bench_rule_decision,
    ),
    Benchmark(
        "caching",
        "20-call tool loop: cost with prompt caching on vs off, request-build CPU",
        _caching.bench_caching,
    ),
    Benchmark("cli_version", "`trio-agent --version`: wall time", _command.bench_version),
    Benchmark(
        "cli_exit", "`trio-agent run`: exit after the final message_stop", _command.bench_exit
    ),
    Benchmark(
        "cli_cpu",
        "`trio-agent run` CPU streaming 20,000 text deltas (an SSE event per chunk), plain, --json",
        _command.bench_cli_cpu,
    ),
    Benchmark(
        "cli_printer",
        "`trio-agent run`'s printer alone: CPU per 20,000 text deltas, plain, --json",
        _command.bench_cli_printer,
    ),
    Benchmark(
        "peers-cli",
        "trio-agent run vs the real Claude Code CLI on the same answers: CPU per 20,000 deltas,"
        " peak RSS (npm installs it; skipped without)",
        _command.bench_peers_cli,
    ),
    Benchmark(
        "subagent",
        "a subagent call vs a bare nested query() in a tool: dispatch overhead per call",
        _subagent.bench_subagent,
    ),
    *(
        Benchmark(f"e2e.{s.name}", s.description, _e2e.bench_scenario(s))
        for s in SCENARIOS.values()
    ),
    *(
        Benchmark(
            f"e2e.openai_responses.{n}",
            f"{SCENARIOS[n].description} over OpenAI Responses",
            _e2e.bench_scenario(SCENARIOS[n], "openai-responses"),
        )
        for n in OPENAI_SCENARIOS
    ),
)

#: The benchmarks by name.
BY_NAME: Mapping[str, Benchmark] = MappingProxyType({b.name: b for b in BENCHMARKS})
if len(BY_NAME) != len(BENCHMARKS):
    raise ValueError("two benchmarks have the same name")
