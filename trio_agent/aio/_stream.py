"""EventStream: a bounded channel from a Trio task to an asyncio consumer.

The Trio side (:meth:`EventStream.send`) appends to a buffer of at most *capacity*
items and, when it is full, waits until the consumer has taken it down to half
(refilled in bulk, so a steady stream costs one wakeup of Trio per half buffer,
not one per item). The asyncio side (``async for``, :meth:`EventStream.receive`)
takes from it. Both run in the loop's thread (guest mode), so the buffer needs no
lock: the consumer is woken by setting an asyncio future, Trio by
``TrioToken.run_sync_soon`` (it may be blocked in its I/O thread).

A slow consumer so slows the turn (its reads of the model's stream, its events),
memory stays bounded. A consumer that left (:meth:`aclose`) makes the Trio side
discard what it sends. At the run's shutdown the bound is lifted
(:meth:`unbound`): an aborted turn's last events (its cut answer, the results,
``TurnEnd``) are few and must not wait for a consumer that may never read.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Generic, TypeVar, final

import attrs
import trio

__all__ = ["DEFAULT_BUFFER", "EventStream", "EventStreamStatistics", "check_buffer"]

T = TypeVar("T")

#: Events a turn may run ahead of its asyncio consumer by default.
DEFAULT_BUFFER = 64


def check_buffer(value: object) -> int:
    """*value* as a buffer size (an int >= 1), or a clear error."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"max_buffered must be an int, not {type(value).__name__}")
    if value < 1:
        raise ValueError(f"max_buffered must be >= 1, got {value}")
    return value


@attrs.frozen
class EventStreamStatistics:
    """A snapshot of an :class:`EventStream`.

    Attributes:
        buffered: items sent and not yet received.
        capacity: the most items the buffer holds before the sender waits.
        sent: items the Trio side put in the buffer so far.
        received: items the consumer took so far.
        max_buffered: the most items the buffer ever held.
        sender_waiting: whether the Trio side waits for room.
        discarded: items the Trio side dropped because the consumer had left.
    """

    buffered: int
    capacity: int
    sent: int
    received: int
    max_buffered: int
    sender_waiting: bool
    discarded: int


@final
class EventStream(Generic[T]):
    """The events of a turn (or any Trio channel) as an asyncio async iterator.

    Example::

        async with session.submit("Fix the test") as events:
            async for event in events:
                ...
    """

    def __init__(
        self, loop: asyncio.AbstractEventLoop, token: trio.lowlevel.TrioToken, capacity: int
    ) -> None:
        self._loop = loop
        self._token = token
        self._capacity = check_buffer(capacity)
        self._low = capacity // 2
        self._items: deque[T] = deque()
        self._waiter: asyncio.Future[None] | None = None  # the consumer's, while it waits
        self._room: trio.Event | None = None  # the sender's, while it waits
        self._ended = False
        self._error: BaseException | None = None
        self._error_raised = False
        self._left = False
        self._unbounded = False
        self._sent = 0
        self._received = 0
        self._max = 0
        self._discarded = 0

    def __repr__(self) -> str:
        return f"<EventStream buffered={len(self._items)}/{self._capacity} ended={self._ended}>"

    def statistics(self) -> EventStreamStatistics:
        """The buffer's fill and counts."""
        return EventStreamStatistics(
            buffered=len(self._items),
            capacity=self._capacity,
            sent=self._sent,
            received=self._received,
            max_buffered=self._max,
            sender_waiting=self._room is not None,
            discarded=self._discarded,
        )

    # -- the Trio side --------------------------------------------------------------

    async def send(self, item: T) -> None:
        """(Trio) Add *item*; wait while the buffer is full. Dropped once the
        consumer left."""
        if len(self._items) >= self._capacity and not (self._left or self._unbounded):
            room = self._room = trio.Event()
            try:
                await room.wait()
            finally:
                if self._room is room:
                    self._room = None
        if self._left:
            self._discarded += 1
            return
        self._items.append(item)
        self._sent += 1
        self._max = max(self._max, len(self._items))
        self._wake_consumer()

    def end(self, error: BaseException | None = None) -> None:
        """(Trio) No more items; the consumer gets *error* (if any) after the
        buffered ones, as :meth:`receive`'s exception."""
        self._ended = True
        self._error = error
        self._wake_consumer()

    def unbound(self) -> None:
        """(Trio) Lift the bound (the run is shutting down): the sender never waits."""
        self._unbounded = True
        self._wake_sender_here()

    def _wake_consumer(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _wake_sender_here(self) -> None:
        room, self._room = self._room, None
        if room is not None:
            room.set()

    # -- the asyncio side -------------------------------------------------------------

    @property
    def ended(self) -> bool:
        """Whether the sender is done (items may still be buffered)."""
        return self._ended

    def _wake_sender(self) -> None:
        room, self._room = self._room, None
        if room is not None:
            self._token.run_sync_soon(room.set)  # the sender is alive: it waits

    async def receive(self) -> T:
        """The next item; waits for one.

        Raises:
            trio.EndOfChannel: no more items.
            Exception: what ended the sender (e.g. the turn's error), once, after
                the buffered items.
        """
        while not self._items:
            if self._ended:
                if self._error is not None and not self._error_raised:
                    self._error_raised = True
                    raise self._error
                raise trio.EndOfChannel
            if self._left:
                raise trio.ClosedResourceError("the event stream was closed")
            waiter = self._waiter = self._loop.create_future()
            try:
                await waiter
            finally:
                self._waiter = None
        item = self._items.popleft()
        self._received += 1
        if self._room is not None and len(self._items) <= self._low:
            self._wake_sender()
        return item

    def undelivered_error(self) -> BaseException | None:
        """The sender's error if the consumer has not been raised it yet."""
        if self._error is not None and not self._error_raised:
            self._error_raised = True
            return self._error
        return None

    def __aiter__(self) -> EventStream[T]:
        return self

    async def __anext__(self) -> T:
        try:
            return await self.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None

    def close(self) -> None:
        """Leave: drop what is buffered; the Trio side drops what it sends next."""
        self._left = True
        self._discarded += len(self._items)
        self._items.clear()
        self._wake_sender()

    async def aclose(self) -> None:
        """:meth:`close` (a checkpoint)."""
        self.close()
        await asyncio.sleep(0)
