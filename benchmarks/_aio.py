"""The asyncio bridge (``trio_agent.aio``, Trio's guest mode) against ``trio.run``.

- CPU and wall per turn: the same scripted turn (an answer of 400 characters of
  text and two tool calls, then a short answer; about 120 events, no model delay,
  tools that return at once) run one after the other, by ``trio_agent.Session``
  under ``trio.run`` and by ``trio_agent.aio.Session`` under ``asyncio.run``. The
  process CPU counts every thread (guest mode waits for I/O in a helper thread).
  The target: the bridge within 1.2x of ``trio.run``.
- The same, with the turns consumed by Trio code running in guest mode: what guest
  mode itself costs (each of Trio's scheduler batches is a loop callback, with one
  more poll), apart from the bridge's events.
- Latency per event: a Trio task sends a timestamp every 0.5 ms; the time until the
  consumer has it, through the bridge to an asyncio task (an ``aio.TurnStream``
  over a Trio memory channel) and, as the reference, to a Trio task over the same
  channel. The difference is what the bridge adds to each event.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from collections.abc import AsyncIterator
from typing import Any

import trio

from ._config import Config
from ._report import Series

NAME = "aio"
TRIO = "trio_agent.Session under trio.run"
BRIDGE = "trio_agent.aio.Session under asyncio.run (guest mode)"
GUEST = "trio_agent.Session in guest mode, consumed in Trio (no bridge)"
TRIO_CHANNEL = "Trio task -> Trio task (memory channel)"
BRIDGE_CHANNEL = "Trio task -> asyncio task (aio bridge)"
MODEL = "claude-scripted"


def _script() -> list[Any]:
    from trio_agent import TextBlock, ToolUseBlock
    from trio_agent.testing import ScriptedAnswer

    return [
        ScriptedAnswer(
            blocks=[
                TextBlock("Let me look at both files first. " * 12),
                ToolUseBlock("toolu_a", "Lookup", {"key": "a"}),
                ToolUseBlock("toolu_b", "Lookup", {"key": "b"}),
            ]
        ),
        ScriptedAnswer(blocks=[TextBlock("Both are fine.")]),
    ]


def _tools() -> list[Any]:
    from trio_agent import tool

    @tool(concurrency_safe=True)
    async def Lookup(key: str) -> str:
        """Look a key up."""
        return f"value of {key}"

    return [Lookup]


def _session(cls: Any) -> tuple[Any, Any]:
    from trio_agent.testing import ScriptedModel

    model = ScriptedModel(_script())
    return model, cls(model.client(), _tools(), model=MODEL, max_tokens=1024)


def _check(session: Any, events: int) -> int:
    if len(session.messages) != 4 or events < 100:
        raise RuntimeError(f"a turn gave {len(session.messages)} messages, {events} events")
    return events


async def _trio_turns(turns: int) -> tuple[float, float, int]:
    from trio_agent import Session

    async def one() -> int:
        _, session = _session(Session)
        n = 0
        async with session.submit("Check a and b.") as events:
            async for _ in events:
                n += 1
        return _check(session, n)

    await one()  # warm up
    cpu0, t0, n = time.process_time(), time.perf_counter(), 0
    for _ in range(turns):
        n += await one()
    return time.process_time() - cpu0, time.perf_counter() - t0, n


async def _bridge_turns(turns: int) -> tuple[float, float, int]:
    from trio_agent import aio

    async def one() -> int:
        _, session = _session(aio.Session)
        n = 0
        async with session.submit("Check a and b.") as events:
            async for _ in events:
                n += 1
        return _check(session, n)

    async with aio.open_guest_run():
        await one()  # warm up: the run is started
        cpu0, t0, n = time.process_time(), time.perf_counter(), 0
        for _ in range(turns):
            n += await one()
        return time.process_time() - cpu0, time.perf_counter() - t0, n


async def _guest_only_turns(turns: int) -> tuple[float, float, int]:
    """The Trio contestant's turns, consumed in Trio, but in guest mode: what guest
    mode itself costs, without the bridge's events."""
    from trio_agent import aio

    async with aio.open_guest_run():
        return await aio.run_in_trio(_trio_turns, turns)


@contextlib.asynccontextmanager
async def _ticks(count: int) -> AsyncIterator[trio.MemoryReceiveChannel[float]]:
    """A channel of *count* timestamps, one sent every 0.5 ms by a Trio task."""
    send, receive = trio.open_memory_channel[float](0)

    async def produce() -> None:
        async with send:
            for _ in range(count):
                await trio.sleep(0.0005)
                await send.send(time.perf_counter())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(produce)
        async with receive:
            yield receive
        nursery.cancel_scope.cancel()


async def _trio_latency(count: int) -> list[float]:
    delays: list[float] = []
    async with _ticks(count) as ticks:
        async for sent in ticks:
            delays.append(time.perf_counter() - sent)
    return delays


async def _bridge_latency(count: int) -> list[float]:
    from trio_agent import aio

    delays: list[float] = []
    bridge = aio.TurnStream(lambda: _ticks(count), lambda: None, 64)
    async with aio.open_guest_run(), bridge as ticks:
        async for sent in ticks:
            delays.append(time.perf_counter() - sent)
    return delays


def bench_aio(config: Config) -> list[Series]:
    turns, ticks = (10, 200) if config.quick else (100, 2000)
    many = f"{turns} turns one after the other"
    cpu_metric = f"CPU ms per turn, {many}"
    wall_metric = f"wall ms per turn, {many}"
    bridge_cpu = Series(NAME, BRIDGE, cpu_metric, "ms")
    trio_cpu = Series(NAME, TRIO, cpu_metric, "ms", subject=BRIDGE)
    bridge_wall = Series(NAME, BRIDGE, wall_metric, "ms")
    trio_wall = Series(NAME, TRIO, wall_metric, "ms", subject=BRIDGE)
    guest_cpu = Series(NAME, GUEST, cpu_metric, "ms", subject=BRIDGE)
    bridge_event = Series(NAME, BRIDGE, f"CPU us per event, {many}", "us")
    trio_event = Series(NAME, TRIO, f"CPU us per event, {many}", "us", subject=BRIDGE)
    lat_metric = "p50 latency per event, sent every 0.5 ms"
    lat_bridge = Series(NAME, BRIDGE_CHANNEL, lat_metric, "us")
    lat_trio = Series(NAME, TRIO_CHANNEL, lat_metric, "us", subject=BRIDGE_CHANNEL)
    added = Series(NAME, "bridge - Trio channel", f"added {lat_metric}", "us")
    for n in range(1 if config.quick else config.repeat):
        # Alternate who goes first, so a drift in the machine's load hits both.
        runs = [("trio", lambda: trio.run(_trio_turns, turns))]
        runs.append(("bridge", lambda: asyncio.run(_bridge_turns(turns))))
        runs.append(("guest", lambda: asyncio.run(_guest_only_turns(turns))))
        got = {who: run() for who, run in (runs if n % 2 == 0 else runs[::-1])}
        guest_cpu.samples.append(got["guest"][0] * 1000 / turns)
        for who, cpu, wall, event in (
            ("trio", trio_cpu, trio_wall, trio_event),
            ("bridge", bridge_cpu, bridge_wall, bridge_event),
        ):
            used, took, events = got[who]
            cpu.samples.append(used * 1000 / turns)
            wall.samples.append(took * 1000 / turns)
            event.samples.append(used * 1e6 / events)
        in_trio = statistics.median(trio.run(_trio_latency, ticks)) * 1e6
        in_bridge = statistics.median(asyncio.run(_bridge_latency(ticks))) * 1e6
        lat_trio.samples.append(in_trio)
        lat_bridge.samples.append(in_bridge)
        added.samples.append(in_bridge - in_trio)
    bridge_cpu.note = (
        "the same scripted turn (two tool calls, ~120 events, no model delay); the ratio "
        "is bridge / trio.run (target: within 1.2x); CPU counts guest mode's I/O thread"
    )
    return [
        bridge_cpu,
        trio_cpu,
        guest_cpu,
        bridge_wall,
        trio_wall,
        bridge_event,
        trio_event,
        lat_bridge,
        lat_trio,
        added,
    ]
