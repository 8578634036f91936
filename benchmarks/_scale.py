"""Scale: N agent ``Session``s at once against the loopback server, each a
two-iteration turn with tools. Each measurement runs in a fresh child process so its
peak RSS is its own."""

from __future__ import annotations

import gc
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import trio

from ._report import Series


def _child(
    agents: int, base_url: str, mode: str, counting: bool = False, freeze: bool = False
) -> dict[str, Any]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 4 * agents + 256)), hard))
    from trio_agent import Session, TurnEnd, TurnEndReason

    from ._turns import MAX_TOKENS, MODEL, PROMPT, after_stream_turn, scenario_tools, with_client

    completed = 0
    errors: dict[str, int] = {}

    async def main(client: Any) -> tuple[float, int]:
        async def session_turn() -> None:
            nonlocal completed
            session = Session(client, scenario_tools(Path(".")), model=MODEL, max_tokens=MAX_TOKENS)
            async with session.submit(PROMPT) as events:
                async for event in events:
                    if isinstance(event, TurnEnd):
                        if event.reason == TurnEndReason.COMPLETED:
                            completed += 1
                        else:
                            why = f"{event.reason}: {type(event.error).__name__}: {event.error}"
                            errors[why[:200]] = errors.get(why[:200], 0) + 1
                            return
            if len(session.messages) != 4:
                raise RuntimeError(f"a session turn made {len(session.messages)} messages, not 4")

        async def after_stream() -> None:
            nonlocal completed
            await after_stream_turn(client, scenario_tools(Path(".")), parallel=True)
            completed += 1

        agent = session_turn if mode == "session" else after_stream
        base_rss = _current_rss_kb()
        t0 = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for _ in range(agents):
                nursery.start_soon(agent)
        return time.perf_counter() - t0, base_rss

    collections = [0, 0, 0]
    gc_seconds = [0.0]
    started = [0.0]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.process_time()
        else:
            collections[info["generation"]] += 1
            gc_seconds[0] += time.process_time() - started[0]

    counts = Counts() if counting else None
    if freeze:
        # The guidance for servers: after the imports and setup, move what exists
        # into the permanent generation, so full collections skip it.
        gc.freeze()
    gc.callbacks.append(on_gc)
    cpu0 = time.process_time()
    try:
        wall, base_rss = trio.run(
            with_client, base_url, main, instruments=[counts] if counts is not None else []
        )
    finally:
        cpu = time.process_time() - cpu0
        gc.callbacks.remove(on_gc)
    peak = _peak_rss_kb()
    return {
        "wall": wall,
        "cpu": cpu,
        "gc_cpu": gc_seconds[0],
        "collections": collections,
        "turns": completed,
        "errors": errors,
        "base_rss_kb": base_rss,
        "peak_rss_kb": peak,
        "counts": counts.per(completed) if counts is not None else None,
    }


class Counts(trio.abc.Instrument):
    """Tasks spawned, task steps (each step ends in a park or the task's end) and
    memory-channel sends, over the whole run."""

    def __init__(self) -> None:
        self.tasks = 0
        self.steps = 0
        self.sends = 0
        counts = self
        original = trio.MemorySendChannel.send_nowait

        # MemorySendChannel.send calls send_nowait once, so this counts every send.
        def send_nowait(self: Any, value: Any) -> None:
            counts.sends += 1
            original(self, value)

        trio.MemorySendChannel.send_nowait = send_nowait  # type: ignore[method-assign]

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        self.tasks += 1

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.steps += 1

    def per(self, turns: int) -> dict[str, float]:
        n = max(turns, 1)
        return {"tasks": self.tasks / n, "steps": self.steps / n, "sends": self.sends / n}


def _status_kb(field: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _current_rss_kb() -> int:
    """The resident set size now."""
    rss = _status_kb("VmRSS")
    return rss if rss is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _peak_rss_kb() -> int:
    """This process's peak resident set size.

    ``VmHWM`` (the peak of this process's own address space), not ``ru_maxrss``:
    Linux carries the forking parent's peak over ``exec`` into the child's
    ``ru_maxrss``, so a child of a big benchmark process would report the parent's size.
    """
    hwm = _status_kb("VmHWM")
    return hwm if hwm is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def child_main(argv: list[str]) -> int:
    agents, base_url, mode = int(argv[0]), argv[1], argv[2]
    options = set(argv[3:])
    result = _child(agents, base_url, mode, "counts" in options, "freeze" in options)
    print(json.dumps(result), flush=True)
    return 0


def _measure(
    agents: int, base_url: str, mode: str, timeout: float, *options: str
) -> dict[str, Any]:
    root = Path(__file__).resolve().parent.parent
    try:
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "benchmarks",
                "scale-child",
                str(agents),
                base_url,
                mode,
                *options,
            ],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:  # run() has killed the child
        raise RuntimeError(f"scale child ({mode}) still running after {timeout:.0f} s") from exc
    if out.returncode != 0:
        raise RuntimeError(f"scale child failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_scale(config: Any) -> list[Series]:
    from ._e2e import server_url

    agents = 200 if config.quick else 1_000
    base = f"{server_url(config)}/s/scale/1.0"
    name = "scale"
    contestants = {
        "session": "trio_agent Session",
        "after": "after-stream parallel (same client)",
        "session-freeze": "trio_agent Session, gc.freeze() after setup",
        "after-freeze": "after-stream parallel, gc.freeze() after setup",
    }
    subjects = {
        "session": None,
        "after": contestants["session"],
        "session-freeze": None,
        "after-freeze": contestants["session-freeze"],
    }
    rows: dict[str, dict[str, Series]] = {}
    for mode, who in contestants.items():
        sub = subjects[mode]
        rows[mode] = {
            "cpu": Series(name, who, f"CPU per turn, {agents} agents, GC on", "ms", subject=sub),
            "gc": Series(name, who, f"GC CPU per turn, {agents} agents", "ms", subject=sub),
            "full": Series(
                name, who, f"full (gen 2) collections, {agents} agents", "", subject=sub
            ),
            "wall": Series(name, who, f"wall time, {agents} agents", "s", subject=sub),
            "rate": Series(name, who, f"turns per second, {agents} agents", "turns/s", subject=sub),
            "peak": Series(name, who, f"peak RSS, {agents} agents", "MB", subject=sub),
            "per": Series(name, who, "memory per agent (peak - base) / N", "KB", subject=sub),
        }
    modes = list(contestants)
    for i in range(1 if config.quick else min(config.repeat, 3)):
        # Interleaved; the order is reversed every other round.
        for mode in modes if i % 2 == 0 else modes[::-1]:
            kind, _, freeze = mode.partition("-")
            options = [freeze] if freeze else []
            m = _measure(agents, base, kind, 120 if config.quick else 600, *options)
            if m["turns"] != agents:
                raise RuntimeError(f"{m['turns']} of {agents} turns completed")
            r = rows[mode]
            r["cpu"].samples.append(m["cpu"] / agents * 1000)
            r["gc"].samples.append(m["gc_cpu"] / agents * 1000)
            r["full"].samples.append(m["collections"][2])
            r["wall"].samples.append(m["wall"])
            r["rate"].samples.append(m["turns"] / m["wall"])
            r["peak"].samples.append(m["peak_rss_kb"] / 1024)
            r["per"].samples.append((m["peak_rss_kb"] - m["base_rss_kb"]) / agents)
    rows["session"]["cpu"].note = (
        "each agent: a trio_agent.Session (no transcript) submitting one prompt; "
        "two model calls, two 50 ms reads in between; CPU is the agents' process "
        "(time.process_time, the server runs apart), GC on, the same on both sides"
    )
    return [s for key in rows["session"] for mode in modes for s in (rows[mode][key],)]


def bench_scale_10k(config: Any) -> list[Series]:
    """10,000 concurrent Sessions in one process: the peak RSS (goal < 1 GB)."""
    from ._e2e import server_url

    agents = 2_000 if config.quick else 10_000
    base = f"{server_url(config)}/s/scale/1.0"
    who = "trio_agent Session"
    peak = Series("scale_10k", who, f"peak RSS, {agents} sessions", "MB")
    per = Series("scale_10k", who, "memory per session (peak - base) / N", "KB")
    done = Series("scale_10k", who, f"turns completed of {agents}", "turns")
    m = _measure(agents, base, "session", 180 if config.quick else 1500)
    peak.samples.append(m["peak_rss_kb"] / 1024)
    per.samples.append((m["peak_rss_kb"] - m["base_rss_kb"]) / agents)
    done.samples.append(m["turns"])
    peak.note = (
        "one child process; VmHWM; each session one two-call turn with two tools. "
        "Turns the one-process loopback server could not serve in time end with an "
        f"error (their sessions were open all the same): {m['errors']}"
    )
    return [peak, per, done]
