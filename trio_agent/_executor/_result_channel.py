"""The executor's ``results`` channel: an unbounded, in-order buffer of results.

Unbounded is safe here: there is at most one result per tool call, so the buffer
is O(calls). A consumer that stops reading never blocks the executor, and whatever
it did not read is still there for ``executor.drain()``.
"""

from __future__ import annotations

from collections import deque
from typing import final

import trio

from ._results import ToolResult

__all__ = ["ResultChannel"]


@final
class ResultChannel(trio.abc.ReceiveChannel[ToolResult]):
    """Receives the executor's results in ``add_tool`` order.

    ``receive()`` raises :exc:`trio.EndOfChannel` once every result has been
    received after ``finish()``, or at once after ``discard()`` (what was not
    received is left for ``drain()``).
    """

    def __init__(self) -> None:
        self._buffer: deque[ToolResult] = deque()
        self._lot = trio.lowlevel.ParkingLot()
        self._ended = False  # no result will be pushed any more
        self._cut = False  # receivers get EndOfChannel even with results buffered
        self._closed = False  # aclose() was called on this end

    # -- executor side (sync) ---------------------------------------------------

    def push(self, result: ToolResult) -> None:
        self._buffer.append(result)
        self._lot.unpark()

    def push_many(self, results: list[ToolResult]) -> None:
        """Push several results, waking the receiver once."""
        self._buffer.extend(results)
        self._lot.unpark()

    def end(self, *, cut: bool = False) -> None:
        self._ended = True
        self._cut = self._cut or cut
        self._lot.unpark_all()

    def take_all(self) -> list[ToolResult]:
        items = list(self._buffer)
        self._buffer.clear()
        return items

    # -- receiver side ----------------------------------------------------------

    def _ready(self) -> bool:
        return bool(self._buffer) and not self._cut

    def _over(self) -> bool:
        return self._cut or (self._ended and not self._buffer)

    async def receive(self) -> ToolResult:
        """The next result in ``add_tool`` order, waiting for it if needed.

        Raises:
            trio.EndOfChannel: no result will come any more.
            trio.ClosedResourceError: this channel was closed with ``aclose()``.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        if self._closed:
            raise trio.ClosedResourceError("the results channel was closed")
        if self._ready() or self._over():
            await trio.lowlevel.cancel_shielded_checkpoint()
        else:
            while not (self._ready() or self._over()):
                await self._lot.park()
                if self._closed:
                    raise trio.ClosedResourceError("the results channel was closed")
        if self._ready():
            return self._buffer.popleft()
        raise trio.EndOfChannel

    async def aclose(self) -> None:
        """Stop receiving; results not received stay available to ``drain()``."""
        self._closed = True
        self._lot.unpark_all()
        await trio.lowlevel.checkpoint()
