"""The channel of a turn's events (``trio_agent._loop._outbox``): what the loop sends
reaches the consumer once, in order, whatever the timing, the cancellations and a
consumer that leaves; an announced event was handled before ``announce`` returned;
the loop is never more than ``LIMIT`` events ahead; and handing over the events of
one read costs each side one task step, not one per event."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import example, given, settings
from hypothesis import strategies as st

from trio_agent import TextDelta
from trio_agent._loop._outbox import LIMIT, open_turn_channel
from trio_agent.testing import run_virtual

#: A sender's step: how it sends (plain or announced) and how long it waits first.
_op = st.tuples(st.sampled_from(["send", "announce"]), st.sampled_from([None, 0, 0.25, 1.0]))


@settings(max_examples=300, deadline=None)
@given(
    ops=st.lists(_op, max_size=3 * LIMIT),
    pauses=st.lists(st.sampled_from([None, None, 0, 0.3, 2.0]), max_size=60),
    cancel_at=st.none() | st.floats(0, 40),
    leave_after=st.none() | st.integers(0, 3 * LIMIT),
)
@example(ops=[("send", None)] * (2 * LIMIT + 1), pauses=[5.0], cancel_at=None, leave_after=None)
@example(ops=[("announce", 0)] * 3, pauses=[1.0] * 3, cancel_at=0.5, leave_after=None)
@example(ops=[("send", None), ("announce", None)], pauses=[], cancel_at=None, leave_after=1)
def test_every_event_sent_is_received_once_in_order(
    ops: list[tuple[str, float | None]],
    pauses: list[float | None],
    cancel_at: float | None,
    leave_after: int | None,
) -> None:
    async def main() -> None:
        outbox, events = open_turn_channel()
        sent: list[Any] = []  # the events whose send returned
        refused: list[Any] = []  # the events whose send raised
        received: list[Any] = []
        log: list[tuple[str, int]] = []  # ("took" | "announced", id) in time order
        outcomes: list[str] = []

        async def sender() -> None:
            with outbox, trio.move_on_after(cancel_at if cancel_at is not None else 1e9):
                for i, (how, wait) in enumerate(ops):
                    if wait is not None:
                        try:
                            await trio.sleep(wait)
                        except trio.Cancelled:
                            outcomes.append("cancelled")
                            raise
                    # Equal events: a cancelled announcement takes back its own.
                    event = TextDelta("x", i % 2)
                    try:
                        if how == "send":
                            await outbox.send(event)
                        else:
                            await outbox.announce(event)
                            log.append(("announced", id(event)))
                    except trio.BrokenResourceError:
                        refused.append(event)
                        outcomes.append("broken")
                        return
                    except trio.Cancelled:
                        refused.append(event)
                        outcomes.append("cancelled")
                        raise
                    sent.append(event)
                    assert len(sent) - len(received) <= LIMIT

        async def consumer() -> None:
            pause = iter(pauses)
            while leave_after is None or len(received) < leave_after:
                try:
                    event = await events.receive()
                except trio.EndOfChannel:
                    return
                received.append(event)
                log.append(("took", id(event)))
                wait = next(pause, None)
                if wait is not None:
                    await trio.sleep(wait)
            await events.aclose()

        with trio.fail_after(10_000):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(sender)
                nursery.start_soon(consumer)

        # Received: exactly the events sent, in order (a prefix of them if the
        # consumer left), never one whose send raised.
        assert [id(e) for e in received] == [id(e) for e in sent[: len(received)]]
        if leave_after is None:
            assert len(received) == len(sent)
        assert not {id(e) for e in received} & {id(e) for e in refused}
        # An announced event was taken (and the consumer ran on) before announce returned.
        for what, ident in log:
            if what == "announced":
                assert log.index(("took", ident)) < log.index(("announced", ident))
        # Every step ran, unless the consumer left or the sender was cancelled.
        if not outcomes:
            assert len(sent) == len(ops)
        else:
            assert len(outcomes) == 1
            possible = {"broken"} if leave_after is not None else set[str]()
            possible |= {"cancelled"} if cancel_at is not None else set[str]()
            assert outcomes[0] in possible

    run_virtual(main)


def test_a_cancelled_announcement_is_taken_back() -> None:
    async def main() -> None:
        outbox, events = open_turn_channel()
        first, second = TextDelta("same", 0), TextDelta("same", 0)
        await outbox.send(first)
        with trio.move_on_after(1) as scope:
            await outbox.announce(second)  # nobody receives: cancelled after 1 s
        assert scope.cancelled_caught
        outbox.close()
        assert await events.receive() is first  # the equal one before it stays
        with pytest.raises(trio.EndOfChannel):
            await events.receive()

    run_virtual(main)


def test_a_consumer_that_leaves_breaks_a_waiting_announcement() -> None:
    async def main() -> None:
        outbox, events = open_turn_channel()

        async def leave() -> None:
            await trio.sleep(1)
            await events.aclose()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(leave)
            with pytest.raises(trio.BrokenResourceError):
                await outbox.announce(TextDelta("x", 0))
        with pytest.raises(trio.BrokenResourceError):
            await outbox.send(TextDelta("y", 0))
        with pytest.raises(trio.ClosedResourceError):
            await events.receive()

    run_virtual(main)


def test_a_full_buffer_waits_until_the_consumer_took_everything() -> None:
    async def main() -> float:
        outbox, events = open_turn_channel()
        for i in range(LIMIT):
            await outbox.send(TextDelta(str(i), 0))

        async def drain_later() -> None:
            await trio.sleep(3)
            for _ in range(LIMIT):
                await events.receive()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(drain_later)
            start = trio.current_time()
            await outbox.send(TextDelta("one more", 0))
            waited = trio.current_time() - start
        last = events.receive_nowait()
        assert isinstance(last, TextDelta)
        assert last.text == "one more"
        return waited

    assert run_virtual(main) == 3


def test_receive_nowait_and_the_ends() -> None:
    async def main() -> None:
        outbox, events = open_turn_channel()
        with pytest.raises(trio.WouldBlock):
            events.receive_nowait()
        await outbox.send(TextDelta("a", 0))
        outbox.close()
        outbox.close()  # idempotent
        first = events.receive_nowait()
        assert isinstance(first, TextDelta)
        assert first.text == "a"
        with pytest.raises(trio.EndOfChannel):
            events.receive_nowait()
        with pytest.raises(trio.ClosedResourceError):
            await outbox.send(TextDelta("b", 0))
        await events.aclose()
        with pytest.raises(trio.ClosedResourceError):
            events.receive_nowait()

    run_virtual(main)


def test_two_receivers_at_once_is_an_error() -> None:
    async def main() -> None:
        _outbox, events = open_turn_channel()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(events.receive)
            await trio.testing.wait_all_tasks_blocked()
            with pytest.raises(trio.BusyResourceError):
                await events.receive()
            nursery.cancel_scope.cancel()

    run_virtual(main)


def test_a_cancelled_receive_loses_nothing() -> None:
    async def main() -> None:
        outbox, events = open_turn_channel()
        with trio.move_on_after(1):
            await events.receive()
        await outbox.send(TextDelta("kept", 0))
        kept = await events.receive()
        assert isinstance(kept, TextDelta)
        assert kept.text == "kept"

    run_virtual(main)


def test_one_read_of_events_costs_each_side_one_step() -> None:
    """The loop hands a read's events to a waiting consumer without parking, and the
    consumer takes them without parking: a third task never runs in between."""
    batch = 10

    async def main() -> tuple[list[str], list[int]]:
        outbox, events = open_turn_channel()
        trace: list[str] = []
        running = trio.Event()

        done = trio.Event()

        async def consumer() -> None:
            async for event in events:
                assert isinstance(event, TextDelta)
                trace.append(f"took {event.text}")
            done.set()

        async def bystander() -> None:
            while True:
                trace.append("bystander")
                running.set()
                await trio.sleep(0)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(consumer)
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(bystander)
            await running.wait()
            sending: list[int] = []
            for i in range(batch):
                await outbox.send(TextDelta(str(i), 0))
                sending.append(len(trace))  # what ran while the sends were in flight
            outbox.close()
            await done.wait()
            nursery.cancel_scope.cancel()
        return trace, sending

    trace, sending = run_virtual(main)
    # No send let another task run...
    assert len(set(sending)) == 1
    # ...and the consumer took the ten events in one step: no bystander between them.
    took = [i for i, entry in enumerate(trace) if entry.startswith("took")]
    assert len(took) == batch
    assert took == list(range(took[0], took[0] + batch))
