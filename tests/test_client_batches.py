"""The client hands each network read's items over in one batch; the consumer still
sees single items, in the same order, with the same errors, and stays cancellable."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from test_client import (
    EVENTS,
    HEAD,
    TEXT_BLOCK,
    Chunks,
    Server,
    body,
    collect,
    ok,
    overloaded_event,
    sse,
)

from trio_agent import AssistantMessage, OverloadedError, StreamEvent, StreamResult


def one_read(events: list[dict[str, Any]]) -> Chunks:
    return Chunks([(0.0, b"".join(sse(e) for e in events))])


def comparable(items: list[Any]) -> list[Any]:
    # ttft differs with the timing of reads; everything else must be identical.
    return [(i.message, i.statistics) if isinstance(i, StreamResult) else i for i in items]


async def test_one_read_gives_the_same_items_as_one_read_per_event(
    autojump_clock: trio.testing.MockClock,
) -> None:
    apart = await collect(Server([ok(body(EVENTS))]).client())
    together = await collect(Server([ok(one_read(EVENTS))]).client())
    assert comparable(together) == comparable(apart)
    assert [type(i) for i in together].count(AssistantMessage) == 2
    assert isinstance(together[-1], StreamResult)


async def test_items_before_an_error_in_the_same_read_are_handed_out_first(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = Server([ok(one_read([*HEAD, *TEXT_BLOCK, overloaded_event()])), ok(body(EVENTS))])
    seen: list[Any] = []

    async def consume() -> None:
        async with server.client().stream(model="m", max_tokens=5, messages=[]) as items:
            async for item in items:
                seen.append(item)

    with pytest.raises(OverloadedError):
        await consume()
    assert len(server.requests) == 1  # content was handed out: not retried
    assert [i.type for i in seen if isinstance(i, StreamEvent)] == [
        e["type"] for e in [*HEAD, *TEXT_BLOCK]
    ]
    assert isinstance(seen[-1], AssistantMessage)
    assert server.bodies[0].closed


async def test_an_error_before_content_in_one_read_is_retried_invisibly(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = Server([ok(one_read([*HEAD, overloaded_event()])), ok(one_read(EVENTS))])
    items = await collect(server.client())
    assert len(server.requests) == 2
    assert items[-1].statistics.retries == 1
    assert [i.type for i in items if isinstance(i, StreamEvent)] == [e["type"] for e in EVENTS]


async def test_a_cancelled_consumer_stops_at_the_next_item(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = Server([ok(one_read(EVENTS))])
    seen: list[Any] = []
    with trio.CancelScope() as scope:
        async with server.client().stream(model="m", max_tokens=5, messages=[]) as items:
            async for item in items:
                seen.append(item)
                scope.cancel()  # no await after this one: the next item must not come
    assert scope.cancelled_caught
    assert len(seen) == 1
    assert server.bodies[0].closed


async def test_receive_and_end_of_channel(autojump_clock: trio.testing.MockClock) -> None:
    server = Server(
        [ok(Chunks([(0.0, b"".join(sse(e) for e in EVENTS[:4])), *body(EVENTS[4:]).chunks]))]
    )
    got: list[Any] = []
    async with server.client().stream(model="m", max_tokens=5, messages=[]) as items:
        while True:
            try:
                got.append(await items.receive())
            except trio.EndOfChannel:
                break
        with pytest.raises(trio.EndOfChannel):
            await items.receive()
        await items.aclose()
    assert isinstance(got[-1], StreamResult)
    assert got[-1].message.tool_uses[0].input == {"path": "a"}
    assert len([i for i in got if isinstance(i, StreamEvent)]) == len(EVENTS)
