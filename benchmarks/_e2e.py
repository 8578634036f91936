"""End-to-end turns: the scripted model on a real loopback server (its own process),
real time, the same tools for every contestant.

Contestants: trio_agent (``trio_agent.query`` with the streaming executor),
after-stream sequential, after-stream parallel (both on trio_agent's own client, so
only the scheduling differs), the SDK's beta tool runner with and without
``run_tools_eagerly``, pydantic-ai, and the ideal (``reference_schedule`` on the
actual block-finish times of the trio_agent run it is paired with; see
:mod:`benchmarks._ideal`).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from . import _peers
from ._cli import Benchmark, Config
from ._ideal import ideal_turn, timeline
from ._report import Series
from ._scenarios import SCENARIOS, Scenario, make_corpus
from ._turns import QueryRun, run_after_stream, run_query

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


def bench_scenario(scenario: Scenario) -> Callable[[Config], list[Series]]:
    def run(config: Config) -> list[Series]:
        scale = QUICK_SCALE if config.quick else 1.0
        base = f"{server_url(config)}/s/{scenario.name}/{scale}"
        root = corpus(config)
        name = f"e2e.{scenario.name}"
        subject = "trio_agent"

        def row(contestant: str, skipped: str | None = None, vs: str | None = subject) -> Series:
            return Series(
                name,
                contestant,
                "turn wall time",
                "s",
                subject=None if contestant == vs else vs,
                skipped=skipped,
            )

        ours = row(subject)
        ideal = row("ideal")
        # The peers run every safe call at once: trio_agent also without its default
        # cap (Claude Code's 10), when the scenario has more calls than that.
        wide = scenario.wide_concurrency
        wide_name = f"trio_agent (max_tool_concurrency={wide})"
        ours_wide = row(wide_name, vs=wide_name) if wide else None
        ideal_wide = row(f"ideal (max_concurrency={wide})", vs=wide_name) if wide else None
        seq = row("after-stream sequential")
        par = row("after-stream parallel")
        sdk_missing = _peers.sdk_version()
        sdk = row("sdk tool_runner", sdk_missing)
        sdk_eager = row("sdk tool_runner eager", sdk_missing)
        pyd = row("pydantic-ai", _peers.pydantic_ai_missing())
        last: QueryRun | None = None
        if not config.quick:
            # Warm up once (imports, first connections), untimed.
            run_query(base, root)
        for _ in range(config.repeat):
            last = run_query(base, root)
            ours.samples.append(last.end)
            ideal.samples.append(ideal_turn(last))
            if ours_wide is not None and ideal_wide is not None:
                wide_run = run_query(base, root, max_tool_concurrency=wide)
                ours_wide.samples.append(wide_run.end)
                ideal_wide.samples.append(ideal_turn(wide_run))
            seq.samples.append(run_after_stream(base, root, parallel=False))
            par.samples.append(run_after_stream(base, root, parallel=True))
            if sdk_missing is None:
                sdk.samples.append(_peers.sdk_turn(base, root, eager=False))
                sdk_eager.samples.append(_peers.sdk_turn(base, root, eager=True))
            if pyd.skipped is None:
                pyd.samples.append(_peers.pydantic_ai_turn(base, root))
        assert last is not None
        config.timelines.append(timeline(f"{name}: {scenario.description} (trio_agent)", last))
        if scenario.name == "bash_cascade":
            ours.note = (
                "trio_agent cancels the failing Bash's siblings (by design); the "
                "others run every call to the end"
            )
        extra = [s for s in (ours_wide, ideal_wide) if s is not None]
        return [ours, ideal, *extra, seq, par, sdk, sdk_eager, pyd]

    return run


BENCHMARKS: list[Benchmark] = [
    Benchmark(f"e2e.{s.name}", s.description, bench_scenario(s)) for s in SCENARIOS.values()
]
