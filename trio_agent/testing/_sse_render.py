"""Rendering a scripted answer as Messages API server-sent events (pure, sync).

Three steps, each a plain function: the answer's raw event dicts
(:meth:`ScriptedAnswer.events`, from :mod:`._message_events`), their SSE bytes
(:func:`encode_event`), and the plan of ``(delay, bytes)`` chunks a server sends once
timing and faults are applied (:func:`plan_stream`). The transports only sleep and
write what the plan says.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

import attrs

from .._messages import _plain  # pyright: ignore[reportPrivateUsage]
from ._answers import Faults, ScriptedAnswer
from ._message_events import dumps

__all__ = [
    "StreamPlan",
    "encode_event",
    "error_event",
    "plan_segments",
    "plan_stream",
    "render_events",
    "render_sse",
    "stall_segments",
]

BOM = b"\xef\xbb\xbf"


def error_event(error_type: str = "overloaded_error", message: str | None = None) -> dict[str, Any]:
    """An in-stream ``error`` event, as the API sends it before closing the stream."""
    if message is None:
        message = {
            "overloaded_error": "Overloaded",
            "api_error": "Internal server error",
            "rate_limit_error": "Rate limited",
        }.get(error_type, error_type.replace("_", " ").capitalize())
    return {"type": "error", "error": {"type": error_type, "message": message}}


def encode_event(event: Mapping[str, Any], line_ending: str = "\n") -> bytes:
    """One event as SSE bytes: ``event: <type>``, ``data: <json>``, a blank line."""
    name = event.get("type")
    if not isinstance(name, str):
        raise ValueError(f"an event needs a string 'type': {event!r}")
    le = line_ending
    return f"event: {name}{le}data: {dumps(_plain(event))}{le}{le}".encode()


def render_events(
    events: Iterable[Mapping[str, Any]], *, line_ending: str = "\n", bom: bool = False
) -> bytes:
    """Several events as one SSE byte string."""
    body = b"".join(encode_event(e, line_ending) for e in events)
    return BOM + body if bom else body


@attrs.frozen
class StreamPlan:
    """What a server sends for one answer.

    Attributes:
        chunks: ``(delay, data)`` pairs: sleep *delay* seconds, then send *data*.
        disconnect: Drop the connection after the last chunk instead of ending cleanly.
    """

    chunks: tuple[tuple[float, bytes], ...]
    disconnect: bool = False

    @property
    def data(self) -> bytes:
        """All the bytes, joined."""
        return b"".join(data for _, data in self.chunks)

    def schedule(self) -> list[tuple[float, bytes]]:
        """``(at, data)`` pairs: seconds from the start, summed exactly, rounded once.

        Servers send on this schedule, not after relative sleeps, so long streams do
        not drift and a slow reader gets what was sent meanwhile at once, as over TCP.
        """
        total = Fraction(0)
        out: list[tuple[float, bytes]] = []
        for delay, data in self.chunks:
            if delay:
                total += Fraction(delay)
            out.append((float(total), data))
        return out


_EVENT_DELAYS = {
    "message_start": "first_event_delay",
    "content_block_start": "block_delay",
    "content_block_delta": "token_delay",
}


def _faulted_events(answer: ScriptedAnswer) -> list[dict[str, Any]]:
    faults = answer.faults
    events = answer.events()
    if faults.truncate and events and events[-1]["type"] == "message_stop":
        events = events[:-1]
    if faults.error_event_after is not None:
        events = [*events[: faults.error_event_after + 1], error_event(faults.error_type)]
    return events


def stall_segments(faults: Faults, ping: bytes, segments: list[tuple[float, bytes]]) -> float:
    """Append the stall's pings (if it sends any) to *segments*; the rest of the stall,
    in seconds, to add to the next segment's delay."""
    stall = faults.stall_seconds
    if faults.pings_only_for is None:
        return stall
    step = faults.pings_only_for
    count = 0
    # A small tolerance so that 3.0 / 0.1 gives 30 pings, not 29.
    while (count + 1) * step <= stall + 1e-9:
        segments.append((step, ping))
        count += 1
    return max(0.0, stall - count * step)


def _segments(answer: ScriptedAnswer) -> list[tuple[float, bytes]]:
    """One ``(delay, bytes)`` segment per event sent, stall pings included."""
    timing, faults = answer.timing, answer.faults
    segments: list[tuple[float, bytes]] = []
    events = _faulted_events(answer)
    # A stall past the last event delays the end of the stream.
    stall_at = None
    if faults.stall_before_event is not None:
        stall_at = min(faults.stall_before_event, len(events))
    for i, event in enumerate([*events, None]):
        delay = 0.0
        if event is not None:
            attr = _EVENT_DELAYS.get(event["type"])
            delay = getattr(timing, attr) if attr else 0.0
        if i == stall_at:
            delay += stall_segments(
                faults, encode_event({"type": "ping"}, faults.line_ending), segments
            )
        if event is not None:
            segments.append((delay, encode_event(event, faults.line_ending)))
        elif delay > 0:
            segments.append((delay, b""))  # a stall before the end of the stream
    if faults.bom:  # there is always a first event: message_start
        segments[0] = (segments[0][0], BOM + segments[0][1])
    return segments


#: Plans already rendered, by the identity of their (immutable) answer; an entry goes
#: when its answer is collected.
_PLANS: dict[int, tuple[weakref.ref[ScriptedAnswer], StreamPlan]] = {}


def plan_stream(answer: ScriptedAnswer) -> StreamPlan:
    """The chunks to send for *answer*, with its timing and faults applied.

    Rendered once per answer (answers are frozen): serving the same answer again costs
    nothing, so a benchmark of the client does not measure the server's rendering.

    Without ``split_at`` / ``chunk_size`` each event is one chunk. With them, the stream
    is cut exactly there (events may share a chunk), and also wherever a delay starts,
    since bytes cannot be sent before they exist.
    """
    key = id(answer)
    cached = _PLANS.get(key)
    if cached is not None and cached[0]() is answer:
        return cached[1]
    plan = plan_segments(_segments(answer), answer.faults)
    _PLANS[key] = (weakref.ref(answer, lambda _: _PLANS.pop(key, None)), plan)
    return plan


def plan_segments(segments: list[tuple[float, bytes]], faults: Faults) -> StreamPlan:
    """The chunks to send for ``(delay, bytes)`` segments (one per event), with the
    byte-level faults applied: splits, chunk size, disconnect (any wire format)."""
    stream = b"".join(data for _, data in segments)
    end = len(stream)
    if faults.disconnect_after_byte is not None:
        end = min(end, faults.disconnect_after_byte)
    explicit = bool(faults.split_at) or faults.chunk_size is not None

    delays: dict[int, float] = {}
    cuts: set[int] = set()
    offset = 0
    for delay, data in segments:
        if delay > 0 or not explicit:
            cuts.add(offset)
        delays[offset] = delays.get(offset, 0.0) + delay
        offset += len(data)
    cuts.update(faults.split_at)
    if faults.chunk_size is not None:
        cuts.update(range(0, end, faults.chunk_size))
    bounds = [0, *sorted(c for c in cuts if 0 < c < end), end]
    # Every delayed segment starts at a cut, so a chunk's delay is the one at its start.
    chunks = [(delays.get(a, 0.0), stream[a:b]) for a, b in itertools.pairwise(bounds) if a < b]
    if faults.disconnect_after_byte is None:
        # A stall before the end of the stream: a delay with nothing after it.
        tail = sum(d for off, d in delays.items() if off >= end)
        if tail > 0:
            chunks.append((tail, b""))
    return StreamPlan(chunks=tuple(chunks), disconnect=faults.disconnect_after_byte is not None)


def render_sse(answer: ScriptedAnswer) -> bytes:
    """The exact bytes a client receives for *answer*, faults included."""
    return plan_stream(answer).data
