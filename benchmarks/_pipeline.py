"""The client's read path against bare httpx-sse + ``json.loads`` on the same bytes.

Every contestant reads the same pre-rendered SSE bytes through a real httpx transport
whose body yields them in a given chunking, with a Trio checkpoint per chunk (as a
socket read has):

- **one event per read**: the way real streams arrive, token by token;
- **64 KiB reads**: a burst, many events per read.

and the same over a real loopback socket (httpcore, a server in its own process): events
paced so that each is read alone, and the whole body sent at once.

The client's row is the whole public path (``AnthropicClient.stream``: SSE parsing,
JSON decoding, accumulation, the channel to the consumer); the bare rows parse SSE with
httpx-sse and decode each event's JSON, nothing else: with ``json.loads`` (the goal's
contestant) and with jiter, the client's own decoder (what the client adds, decoding
aside). Contestants alternate run by run
in one Trio run, with the garbage collector on for both; each sample is the median of a
few streams, in CPU time (``time.process_time``) and wall time.

Run alone: ``python -m benchmarks run pipeline``.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, final

import httpx
import trio

from ._config import Config
from ._report import Series

#: Streams per sample (the sample is their median).
_STREAMS_PER_SAMPLE = 5
_BODY = {
    "model": "m",
    "messages": [{"role": "user", "content": "go"}],
    "max_tokens": 1024,
    "stream": True,
}


def pipeline_answer(quick: bool) -> Any:
    """Text in 4-character deltas, then a tool input in 16-byte deltas."""
    from trio_agent import TextBlock, ToolUseBlock
    from trio_agent.testing import ScriptedAnswer, Timing

    text = "The quick brown fox jumps. " * (400 if quick else 2_000)
    blocks = [TextBlock(text), ToolUseBlock("toolu_1", "Write", {"content": "x" * 20_000})]
    return ScriptedAnswer(blocks=blocks, timing=Timing(text_chunk_size=4, json_chunk_size=16))


def event_chunks(answer: Any) -> list[bytes]:
    """The answer's SSE bytes, one event per chunk."""
    from trio_agent.testing import encode_event

    return [encode_event(event) for event in answer.events()]


def sized_chunks(per_event: list[bytes], size: int) -> list[bytes]:
    """The same bytes cut every *size* bytes (events split across reads)."""
    data = b"".join(per_event)
    return [data[i : i + size] for i in range(0, len(data), size)]


@final
class _Body(httpx.AsyncByteStream):
    """A response body yielding the given chunks, one per read, each after a Trio
    checkpoint (a plain async iterator: no generator to finalize)."""

    def __init__(self, chunks: list[bytes]) -> None:
        self._chunks = chunks
        self._next = 0

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self

    async def __anext__(self) -> bytes:
        await trio.lowlevel.checkpoint()
        index = self._next
        if index >= len(self._chunks):
            raise StopAsyncIteration
        self._next = index + 1
        return self._chunks[index]

    async def aclose(self) -> None:
        self._next = len(self._chunks)


@final
class ChunkedTransport(httpx.AsyncBaseTransport):
    """Answers every request with ``text/event-stream`` *chunks*, one per read."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await request.aread()
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, stream=_Body(self.chunks)
        )


async def stream_ours(http: httpx.AsyncClient, base_url: str) -> int:
    """One stream through ``AnthropicClient``; the number of items received."""
    from trio_agent import AnthropicClient
    from trio_agent.lowlevel import StreamResult

    client = AnthropicClient(api_key="bench", base_url=base_url, http_client=http)
    items_n = 0
    result = None
    async with client.stream(
        model="m", messages=[{"role": "user", "content": "go"}], max_tokens=1024
    ) as items:
        async for item in items:
            items_n += 1
            if isinstance(item, StreamResult):
                result = item
    if result is None or len(result.message.content) != 2:
        raise RuntimeError("the client's stream did not end with the whole message")
    return items_n


async def stream_bare(http: httpx.AsyncClient, base_url: str) -> int:
    """One stream through bare httpx-sse + ``json.loads``; the number of events."""
    from httpx_sse import aconnect_sse

    events = 0
    async with aconnect_sse(http, "POST", f"{base_url}/v1/messages", json=_BODY) as source:
        async for sse in source.aiter_sse():
            json.loads(sse.data)
            events += 1
    if events < 100:
        raise RuntimeError(f"bare httpx-sse read only {events} events")
    return events


async def stream_bare_jiter(http: httpx.AsyncClient, base_url: str) -> int:
    """Bare httpx-sse with the decoder the client uses (jiter): the client's own
    overhead, JSON decoding aside."""
    import jiter
    from httpx_sse import aconnect_sse

    events = 0
    async with aconnect_sse(http, "POST", f"{base_url}/v1/messages", json=_BODY) as source:
        async for sse in source.aiter_sse():
            jiter.from_json(sse.data.encode())
            events += 1
    if events < 100:
        raise RuntimeError(f"bare httpx-sse read only {events} events")
    return events


Contestant = Callable[[httpx.AsyncClient, str], Awaitable[int]]


async def _timed(run: Contestant, http: httpx.AsyncClient, base_url: str) -> tuple[float, float]:
    cpu0, wall0 = time.process_time(), time.perf_counter()
    await run(http, base_url)
    return time.process_time() - cpu0, time.perf_counter() - wall0


async def measure(
    transport: httpx.AsyncBaseTransport | None,
    base_url: str,
    contestants: list[Contestant],
    samples: int,
    streams: int = _STREAMS_PER_SAMPLE,
) -> list[list[tuple[float, float]]]:
    """Per contestant, *samples* ``(cpu, wall)`` pairs in seconds, each the median of
    *streams* streams; contestants alternate stream by stream (order flipped each time)."""
    out: list[list[tuple[float, float]]] = [[] for _ in contestants]
    async with httpx.AsyncClient(transport=transport, timeout=None) as http:
        for who in contestants:  # warm-up: imports, connection pool, caches
            await who(http, base_url)
        for _ in range(samples):
            runs: list[list[tuple[float, float]]] = [[] for _ in contestants]
            for n in range(streams):
                order = list(range(len(contestants)))
                if n % 2:
                    order.reverse()
                for i in order:
                    runs[i].append(await _timed(contestants[i], http, base_url))
            for i, timings in enumerate(runs):
                out[i].append(
                    (
                        statistics.median(c for c, _ in timings),
                        statistics.median(w for _, w in timings),
                    )
                )
    return out


OURS = "trio_agent client (SSE + accumulate + channel)"
BARE = "bare httpx-sse + json.loads"
BARE_JITER = "bare httpx-sse + jiter (the client's JSON decoder)"
CONTESTANTS: list[Contestant] = [stream_ours, stream_bare, stream_bare_jiter]


def rows(
    name: str, shape: str, unit_scale: float, unit: str, timings: list[list[tuple[float, float]]]
) -> list[Series]:
    """CPU and wall rows for ours (the subject) and the bare contestants, from
    :func:`measure`'s output (contestants in :data:`CONTESTANTS` order)."""
    out: list[Series] = []
    for index, kind in ((0, "CPU"), (1, "wall")):
        metric = f"{kind} ms per stream, {shape}"
        out.append(Series(name, OURS, metric, unit, [t[index] * unit_scale for t in timings[0]]))
        for who, runs in zip((BARE, BARE_JITER), timings[1:], strict=True):
            samples = [t[index] * unit_scale for t in runs]
            out.append(Series(name, who, metric, unit, samples, subject=OURS))
    return out


def bench_pipeline(config: Config) -> list[Series]:
    answer = pipeline_answer(config.quick)
    per_event = event_chunks(answer)
    samples = max(config.repeat, 3)
    out: list[Series] = []
    shapes = [
        (f"one event per read ({len(per_event)} reads)", per_event),
    ]
    bulk = sized_chunks(per_event, 65_536)
    shapes.append((f"64 KiB reads ({len(bulk)} reads)", bulk))
    for shape, chunks in shapes:
        timings = trio.run(
            measure,
            ChunkedTransport(chunks),
            "http://bench",
            CONTESTANTS,
            samples,
            2 if config.quick else _STREAMS_PER_SAMPLE,
        )
        out += rows("pipeline", shape, 1e3, "ms", timings)
    out += _loopback_rows(config, samples)
    out[0].note = (
        f"{sum(len(c) for c in per_event)} bytes, {len(per_event)} events; in-process httpx "
        "transport, a Trio checkpoint per read; GC on; contestants interleaved"
    )
    return out


# --- over a real loopback socket -----------------------------------------------------

#: Seconds the loopback server waits between events in the one-event-per-read shape,
#: long enough for either contestant to have read the previous event.
_PACE = 0.0002


def _handle(conn: Any, per_event: list[bytes], bulk: bytes) -> None:
    """Serve keep-alive POSTs on *conn*: ``/one/...`` paced per event, else all at once."""
    import socket

    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buffer = b""
    with conn:
        while True:
            while b"\r\n\r\n" not in buffer:
                data = conn.recv(65_536)
                if not data:
                    return
                buffer += data
            head, _, buffer = buffer.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            length = 0
            for line in lines[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            while len(buffer) < length:
                data = conn.recv(65_536)
                if not data:
                    return
                buffer += data
            buffer = buffer[length:]
            paced = lines[0].split()[1].startswith("/one/")
            size = sum(map(len, per_event)) if paced else len(bulk)
            conn.sendall(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                + f"content-length: {size}\r\n\r\n".encode()
            )
            if paced:
                for event in per_event:
                    conn.sendall(event)
                    time.sleep(_PACE)
            else:
                conn.sendall(bulk)


def serve_pipeline(quick: bool) -> None:
    """``python -m benchmarks pipeline-serve [--quick]``: print the port, serve until
    stdin closes (a thread per connection, plain blocking sockets)."""
    import socket
    import sys
    import threading

    # The paced stream is the quick answer (its pacing, not its size, is the point).
    per_event = event_chunks(pipeline_answer(True))
    bulk = b"".join(event_chunks(pipeline_answer(quick)))
    listener = socket.create_server(("127.0.0.1", 0))
    print(listener.getsockname()[1], flush=True)

    def accept() -> None:
        while True:
            conn, _ = listener.accept()
            threading.Thread(target=_handle, args=(conn, per_event, bulk), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    sys.stdin.read()


def _loopback_rows(config: Config, samples: int) -> list[Series]:
    import subprocess
    import sys
    from pathlib import Path

    argv = [sys.executable, "-m", "benchmarks", "pipeline-serve"]
    proc = subprocess.Popen(
        [*argv, *(["--quick"] if config.quick else [])],
        cwd=Path(__file__).resolve().parent.parent,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        out: list[Series] = []
        streams = 1 if config.quick else 3
        paced_events = len(pipeline_answer(True).events())
        for path, shape in (
            ("one", f"loopback TCP paced, {paced_events} events {_PACE * 1e6:.0f} us apart"),
            ("bulk", "loopback TCP bulk, the whole body sent at once"),
        ):
            timings = trio.run(
                measure,
                None,
                f"http://127.0.0.1:{port}/{path}",
                CONTESTANTS,
                samples,
                streams,
            )
            out += rows("pipeline", shape, 1e3, "ms", timings)
        return out
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)
