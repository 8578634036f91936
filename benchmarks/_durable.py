"""Durable turns (``trio_agent.durable`` over DBOS) against plain ``Session``s.

Both contestants run the same turn (the scale scenario's: two model calls, two
reads between them) at scale 0, so the model answers at once and the tools take
no time: what is measured is the engine's own cost. Each measurement runs in a
fresh child process (DBOS is one per process), contestants alternate repeat by
repeat, and each child times two phases after its setup (imports, DBOS launch):

- one at a time: M turns, each of a new session, one after the other; the wall
  time of each (its median is the sample) and the process CPU per turn;
- at once: N sessions submitted together, one turn each; sessions per second
  (wall) and process CPU per session.

The durable child is the whole durable path in one process: a worker
(``open_worker``, concurrency N) and a ``DurableClient`` that submits each turn and
waits for its summary (the worker in the same process dequeues each submitted turn at
once and tells the waiting client when it ends; DBOS's queue poll, every 50 ms, is
what a submitter in another process waits for). Its
database is a fresh SQLite file and, when ``TRIO_AGENT_BENCH_POSTGRES_URL`` names a
Postgres server (``postgresql://user@host:port/any``), also a fresh database there
(``bench_<random>``, left behind: point it at a throwaway cluster).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import trio

from ._config import Config
from ._report import Series
from ._resources import server_url

#: The server's scale factor: no model delay, no tool time.
SCALE = "0.0"
NAME = "durable"
PLAIN = "trio_agent Session (plain)"
DURABLE = "trio_agent.durable (DBOS, SQLite)"
POSTGRES = "trio_agent.durable (DBOS, Postgres)"
#: A Postgres server to measure on too (any database name: each run makes its own).
POSTGRES_ENV = "TRIO_AGENT_BENCH_POSTGRES_URL"


def _session(client: Any) -> Any:
    from trio_agent import Session

    from ._turns import MAX_TOKENS, MODEL, scenario_tools

    return Session(client, scenario_tools(Path(".")), model=MODEL, max_tokens=MAX_TOKENS)


async def _plain(client: Any, sequential: int, concurrent: int) -> dict[str, Any]:
    from trio_agent import TurnEnd, TurnEndReason

    from ._turns import PROMPT

    completed = 0

    async def turn() -> None:
        nonlocal completed
        session = _session(client)
        async with session.submit(PROMPT) as events:
            async for event in events:
                if isinstance(event, TurnEnd) and event.reason == TurnEndReason.COMPLETED:
                    completed += 1
        if len(session.messages) != 4:
            raise RuntimeError(f"a session turn made {len(session.messages)} messages, not 4")

    await turn()  # warm up: the first connection, the first tool schemas

    async def at_once() -> None:
        async with trio.open_nursery() as nursery:
            for _ in range(concurrent):
                nursery.start_soon(turn)

    completed = 0
    measured = await _phases(turn, at_once, sequential)
    if completed != sequential + concurrent:
        raise RuntimeError(f"{completed} of {sequential + concurrent} turns completed")
    return measured


async def _durable(client: Any, sequential: int, concurrent: int, url: str) -> dict[str, Any]:
    from trio_agent import TurnEndReason
    from trio_agent.durable import Agent, DurableClient, open_worker

    from ._turns import PROMPT

    agent = Agent("bench", lambda session_id: _session(client))
    numbers = iter(range(10**9))
    summaries: list[Any] = []
    # The client first: it creates the database (and DBOS's tables) if missing.
    durable = await trio.to_thread.run_sync(lambda: DurableClient.connect(url, agent="bench"))
    try:
        async with open_worker(agent, database_url=url, concurrency=max(concurrent, 1)):

            async def turn() -> None:
                handle = await trio.to_thread.run_sync(durable.submit, f"s{next(numbers)}", PROMPT)
                summaries.append(await handle.wait())

            async def at_once() -> None:
                def submit_all() -> list[Any]:
                    return [durable.submit(f"s{next(numbers)}", PROMPT) for _ in range(concurrent)]

                handles = await trio.to_thread.run_sync(submit_all)
                for handle in handles:  # in order: the wall ends with the last one
                    summaries.append(await handle.wait())

            await turn()  # warm up: the queue, the tables, the first connection
            summaries.clear()
            measured = await _phases(turn, at_once, sequential)
    finally:
        await trio.to_thread.run_sync(durable.close)
    bad = [s for s in summaries if s.reason != TurnEndReason.COMPLETED or s.messages != 4]
    if bad or len(summaries) != sequential + concurrent:
        raise RuntimeError(f"{len(summaries)} durable turns, wrong ones: {bad[:3]}")
    return measured


async def _phases(turn: Any, at_once: Any, sequential: int) -> dict[str, Any]:
    walls: list[float] = []
    cpu0 = time.process_time()
    for _ in range(sequential):
        t0 = time.perf_counter()
        await turn()
        walls.append(time.perf_counter() - t0)
    cpu1 = time.process_time()
    t0 = time.perf_counter()
    await at_once()
    wall = time.perf_counter() - t0
    cpu2 = time.process_time()
    return {
        "turn_walls": walls,
        "turn_cpu": (cpu1 - cpu0) / sequential,
        "at_once_wall": wall,
        "at_once_cpu": cpu2 - cpu1,
    }


def durable_child(argv: list[str]) -> int:
    """``python -m benchmarks durable-child plain|sqlite|postgres SEQUENTIAL CONCURRENT BASE_URL``."""
    from ._turns import with_client

    mode, sequential, concurrent, base_url = argv[0], int(argv[1]), int(argv[2]), argv[3]
    with tempfile.TemporaryDirectory(prefix="trio-agent-bench-durable-") as tmp:
        if mode == "postgres":
            import sqlalchemy as sa

            server = sa.make_url(os.environ[POSTGRES_ENV])
            url = server.set(database=f"bench_{uuid.uuid4().hex[:12]}").render_as_string(False)
        else:
            url = f"sqlite:///{Path(tmp) / 'db.sqlite'}"

        async def main(client: Any) -> dict[str, Any]:
            if mode == "plain":
                return await _plain(client, sequential, concurrent)
            return await _durable(client, sequential, concurrent, url)

        result = trio.run(with_client, base_url, main)
    print(json.dumps(result), flush=True)
    return 0


def _measure(mode: str, sequential: int, concurrent: int, base: str, timeout: float) -> Any:
    root = Path(__file__).resolve().parent.parent
    argv = [sys.executable, "-m", "benchmarks", "durable-child", mode]
    argv += [str(sequential), str(concurrent), base]
    try:
        out = subprocess.run(
            argv, cwd=root, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as exc:  # run() has killed the child
        raise RuntimeError(f"durable child ({mode}) still running after {timeout:.0f} s") from exc
    if out.returncode != 0:
        raise RuntimeError(f"durable child ({mode}) failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_durable(config: Config) -> list[Series]:
    try:
        import dbos  # noqa: F401  # pyright: ignore[reportUnusedImport]
    except ImportError:
        why = "the durable extra (dbos) is not installed"
        return [Series(NAME, DURABLE, "-", "-", skipped=why)]
    sequential, concurrent = (2, 4) if config.quick else (20, 100)
    base = f"{server_url(config)}/s/scale/{SCALE}"
    one = f"one at a time ({sequential} turns)"
    many = f"{concurrent} sessions at once"
    who = {"sqlite": DURABLE}
    if os.environ.get(POSTGRES_ENV):
        who["postgres"] = POSTGRES
    who["plain"] = PLAIN
    label = {"sqlite": "SQLite", "postgres": "Postgres"}

    def rows(metric: str, unit: str) -> dict[str, Series]:
        # The ratio column: durable on SQLite (the embedded default) / this row.
        return {
            mode: Series(NAME, name, metric, unit, subject=None if mode == "sqlite" else DURABLE)
            for mode, name in who.items()
        }

    table = {
        "rate": rows(f"sessions per second, {many}", "sessions/s"),
        "at_once_cpu": rows(f"CPU ms per session, {many}", "ms"),
        "turn_wall": rows(f"wall ms per turn, {one}", "ms"),
        "turn_cpu": rows(f"CPU ms per turn, {one}", "ms"),
    }
    overhead = {
        (mode, key): Series(
            NAME, f"durable ({label[mode]}) - plain", f"overhead: {what} ms per turn, {one}", "ms"
        )
        for mode in who
        if mode != "plain"
        for key, what in (("turn_wall", "wall"), ("turn_cpu", "CPU"))
    }
    timeout = 120 if config.quick else 600
    modes = list(who)
    for n in range(1 if config.quick else config.repeat):
        # Rotate who goes first, so a drift in the machine's load hits every contestant.
        order = modes[n % len(modes) :] + modes[: n % len(modes)]
        got = {mode: _measure(mode, sequential, concurrent, base, timeout) for mode in order}
        for mode, m in got.items():
            table["rate"][mode].samples.append(concurrent / m["at_once_wall"])
            table["at_once_cpu"][mode].samples.append(m["at_once_cpu"] * 1000 / concurrent)
            table["turn_wall"][mode].samples.append(statistics.median(m["turn_walls"]) * 1000)
            table["turn_cpu"][mode].samples.append(m["turn_cpu"] * 1000)
        for (mode, key), series in overhead.items():
            series.samples.append(table[key][mode].samples[-1] - table[key]["plain"].samples[-1])
    table["rate"]["sqlite"].note = (
        "same turn (two model calls, two tool calls; no model delay, no tool time) in a "
        "fresh process each; durable = worker + DurableClient in one process, on a fresh "
        "database; Postgres only when " + POSTGRES_ENV + " is set"
    )
    return [s for key in table for s in table[key].values()] + list(overhead.values())
