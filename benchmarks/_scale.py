"""Scale: N agents at once against the loopback server, each a two-iteration turn with
tools. Each measurement runs in a fresh child process so its peak RSS is its own."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import trio

from ._report import Series


def _child(agents: int, base_url: str, mode: str) -> dict[str, Any]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 4 * agents + 256)), hard))
    import httpx

    from trio_agent import AnthropicClient, RetryPolicy

    from ._e2e import Trace, trio_tools, turn_after_stream, turn_streaming

    traces: list[Trace] = []
    root = Path(".")

    async def main() -> tuple[float, int]:
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
        async with httpx.AsyncClient(timeout=httpx.Timeout(120.0), limits=limits) as http:
            client = AnthropicClient(
                api_key="bench",
                base_url=base_url,
                http_client=http,
                retry=RetryPolicy(max_retries=0),
            )

            async def agent(i: int) -> None:
                trace = Trace()
                traces.append(trace)
                tools = trio_tools(root, lambda: trace)
                if mode == "streaming":
                    await turn_streaming(client, tools, trace)
                else:
                    await turn_after_stream(client, tools, trace, parallel=True)

            base_rss = _current_rss_kb()
            t0 = time.perf_counter()
            async with trio.open_nursery() as nursery:
                for i in range(agents):
                    nursery.start_soon(agent, i)
            return time.perf_counter() - t0, base_rss

    wall, base_rss = trio.run(main)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    turns = sum(1 for t in traces if t.end > 0)
    return {"wall": wall, "turns": turns, "base_rss_kb": base_rss, "peak_rss_kb": peak}


def _current_rss_kb() -> int:
    """The resident set size now (ru_maxrss is the peak so far, not the current size)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def child_main(argv: list[str]) -> int:
    agents, base_url, mode = int(argv[0]), argv[1], argv[2]
    print(json.dumps(_child(agents, base_url, mode)), flush=True)
    return 0


def _measure(agents: int, base_url: str, mode: str) -> dict[str, Any]:
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks", "scale-child", str(agents), base_url, mode],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"scale child failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_scale(config: Any) -> list[Series]:
    from ._e2e import server_url

    agents = 200 if config.quick else 1_000
    base = f"{server_url(config)}/s/scale/1.0"
    name = "scale"
    contestants = {
        "streaming": "trio_agent (streaming executor)",
        "after": "after-stream parallel (same client)",
    }
    subject = contestants["streaming"]
    rows: dict[str, dict[str, Series]] = {}
    for mode, who in contestants.items():
        sub = None if mode == "streaming" else subject
        rows[mode] = {
            "wall": Series(name, who, f"wall time, {agents} agents", "s", subject=sub),
            "rate": Series(name, who, f"turns per second, {agents} agents", "turns/s", subject=sub),
            "peak": Series(name, who, f"peak RSS, {agents} agents", "MB", subject=sub),
            "per": Series(name, who, "memory per agent (peak - base) / N", "KB", subject=sub),
        }
    for _ in range(1 if config.quick else min(config.repeat, 3)):
        for mode in contestants:
            m = _measure(agents, base, mode)
            if m["turns"] != agents:
                raise RuntimeError(f"{m['turns']} of {agents} turns completed")
            r = rows[mode]
            r["wall"].samples.append(m["wall"])
            r["rate"].samples.append(m["turns"] / m["wall"])
            r["peak"].samples.append(m["peak_rss_kb"] / 1024)
            r["per"].samples.append((m["peak_rss_kb"] - m["base_rss_kb"]) / agents)
    note = (
        "Session not merged yet: each agent is the streaming loop built from "
        "AnthropicClient + open_tool_executor (the query loop's per-iteration work)"
    )
    rows["streaming"]["wall"].note = note
    return [
        s
        for key in ("wall", "rate", "peak", "per")
        for s in (rows["streaming"][key], rows["after"][key])
    ]
