"""The channel of one turn's events, from the loop to the consumer of ``query()``.

A Trio memory channel makes every event cost a schedule point on each side: the
loop parks in ``send`` even when the consumer already waits, and the consumer parks
in ``receive`` even when an event is there. The events of one network read (eight
or more when a model streams fast) then cost a scheduler pass each. This channel
keeps what the loop sent and the consumer has not taken yet in a short buffer:

- :meth:`Outbox.send` adds the event and goes on (it waits only while
  :data:`LIMIT` events are unread), so the loop hands out a whole read and then
  awaits the next one;
- :meth:`TurnEvents.receive` takes the next event without a schedule point while
  there is one, and parks when the buffer is empty, so the consumer takes the whole
  read in one step; the take that empties the buffer wakes a loop waiting for room.

A send either adds its event or raises (``Cancelled`` before adding it, as Trio's
``send``), so an event is never both sent and not sent. :meth:`Outbox.announce` is
the loop's "the consumer has seen this": it returns once the consumer took the
event, after the consumer's task ran with it (what it does on receiving the event,
as a Session's recording, is done); cancelled before the consumer took it, it takes
the event back. The loop announces a finished block so before the block's tool
starts (docs/DESIGN.md section 8).

Both ends check for cancellation first, as Trio's channels do; the consumer's
``receive`` is a schedule point only when it waits.
"""

from __future__ import annotations

from collections import deque
from types import TracebackType
from typing import final

import trio
from trio.lowlevel import enable_ki_protection

from ._state import QueryEvent

__all__ = ["LIMIT", "Outbox", "TurnEvents", "open_turn_channel"]

#: How many events the loop may be ahead of its consumer.
LIMIT = 64


@final
class _Buffer:
    """What both ends share."""

    __slots__ = ("events", "receiver", "receiver_closed", "room", "sender_closed", "taken")

    def __init__(self) -> None:
        self.events: deque[QueryEvent] = deque()
        #: The consumer, parked in ``receive`` (the buffer is then empty).
        self.receiver: trio.lowlevel.Task | None = None
        #: Senders waiting for room (woken once the consumer took every event).
        self.room = trio.lowlevel.ParkingLot()
        #: Announcers waiting for the consumer to take their event (woken at each take).
        self.taken = trio.lowlevel.ParkingLot()
        self.sender_closed = False
        self.receiver_closed = False

    def queued(self, event: QueryEvent) -> bool:
        return any(queued is event for queued in self.events)

    def take_back(self, event: QueryEvent) -> None:
        """Remove *event* (that very object, not an equal one) if it is queued."""
        for index, queued in enumerate(self.events):
            if queued is event:
                del self.events[index]
                return

    def wake_receiver(self) -> None:
        receiver = self.receiver
        if receiver is not None:
            self.receiver = None
            trio.lowlevel.reschedule(receiver)


def open_turn_channel() -> tuple[Outbox, TurnEvents]:
    """A new channel: its sending end (the loop's) and its receiving end."""
    buffer = _Buffer()
    return Outbox(buffer), TurnEvents(buffer)


@final
class Outbox:
    """The loop's end of the turn's events."""

    __slots__ = ("_buffer",)

    def __init__(self, buffer: _Buffer) -> None:
        self._buffer = buffer

    @enable_ki_protection
    async def send(self, event: QueryEvent) -> None:
        """Hand *event* to the consumer; wait only while it has :data:`LIMIT` unread.

        Raises:
            trio.Cancelled: the loop is cancelled (the event is not sent).
            trio.BrokenResourceError: the consumer closed its end.
            trio.ClosedResourceError: this end is closed.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        buffer = self._buffer
        while len(buffer.events) >= LIMIT and not buffer.receiver_closed:
            await buffer.room.park()
        self._add(event)

    @enable_ki_protection
    async def announce(self, event: QueryEvent) -> None:
        """Send *event* and return once the consumer took it, after the consumer's
        task ran with it: what it does on receiving the event is done.

        Raises:
            trio.Cancelled: the loop was cancelled before the consumer took *event*
                (it is then not sent).
            trio.BrokenResourceError: the consumer closed its end before taking it.
            trio.ClosedResourceError: this end is closed.
        """
        await self.send(event)
        buffer = self._buffer
        while buffer.queued(event) and not buffer.receiver_closed:
            try:
                await buffer.taken.park()
            except trio.Cancelled:
                buffer.take_back(event)
                raise
        if buffer.queued(event):
            raise trio.BrokenResourceError("the consumer closed the turn's events")

    def _add(self, event: QueryEvent) -> None:
        buffer = self._buffer
        if buffer.sender_closed:
            raise trio.ClosedResourceError("the turn's events are closed")
        if buffer.receiver_closed:
            raise trio.BrokenResourceError("the consumer closed the turn's events")
        buffer.events.append(event)
        buffer.wake_receiver()

    @enable_ki_protection
    def close(self) -> None:
        """No more events: the consumer gets ``EndOfChannel`` after the buffered ones."""
        buffer = self._buffer
        if buffer.sender_closed:
            return
        buffer.sender_closed = True
        buffer.wake_receiver()

    def __enter__(self) -> Outbox:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


@final
class TurnEvents(trio.abc.ReceiveChannel[QueryEvent]):
    """The consumer's end of the turn's events (what ``query()`` yields)."""

    __slots__ = ("_buffer",)

    def __init__(self, buffer: _Buffer) -> None:
        self._buffer = buffer

    @enable_ki_protection
    def receive_nowait(self) -> QueryEvent:
        """The next event if one is there.

        Raises:
            trio.WouldBlock: none yet.
            trio.EndOfChannel: the turn sent its last event.
            trio.ClosedResourceError: this end is closed.
        """
        buffer = self._buffer
        if buffer.receiver_closed:
            raise trio.ClosedResourceError("the turn's events are closed")
        if buffer.events:
            return self._take(buffer)
        if buffer.sender_closed:
            raise trio.EndOfChannel
        raise trio.WouldBlock

    @staticmethod
    def _take(buffer: _Buffer) -> QueryEvent:
        event = buffer.events.popleft()
        if buffer.taken:
            buffer.taken.unpark_all()
        if not buffer.events and buffer.room:
            buffer.room.unpark_all()
        return event

    @enable_ki_protection
    async def receive(self) -> QueryEvent:
        """The next event: at once if one is there, else when the loop sends it.

        Raises:
            trio.EndOfChannel: the turn sent its last event.
            trio.ClosedResourceError: this end is closed.
            trio.BusyResourceError: another task is receiving.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        buffer = self._buffer
        while True:
            if buffer.receiver_closed:
                raise trio.ClosedResourceError("the turn's events are closed")
            if buffer.events:
                return self._take(buffer)
            if buffer.sender_closed:
                await trio.lowlevel.cancel_shielded_checkpoint()
                raise trio.EndOfChannel
            if buffer.receiver is not None:
                raise trio.BusyResourceError("another task is receiving the turn's events")
            buffer.receiver = task = trio.lowlevel.current_task()

            def abort(_: object, task: trio.lowlevel.Task = task) -> trio.lowlevel.Abort:
                if buffer.receiver is task:
                    buffer.receiver = None
                return trio.lowlevel.Abort.SUCCEEDED

            await trio.lowlevel.wait_task_rescheduled(abort)

    @enable_ki_protection
    def close(self) -> None:
        """Stop receiving: the loop's next send raises ``BrokenResourceError``."""
        buffer = self._buffer
        if buffer.receiver_closed:
            return
        buffer.receiver_closed = True
        buffer.room.unpark_all()
        buffer.taken.unpark_all()

    async def aclose(self) -> None:
        self.close()
        await trio.lowlevel.checkpoint()
