"""The executor's progress channel: bounded, and never blocking the tools.

A tool may report progress a million times, or a command print 20 MB line by line:
the channel keeps only the latest report of each call that was not received yet
(its ``dropped`` count says how many it replaced), plus one :class:`ToolFinished`
per call. So memory stays bounded by the number of calls, ``report()`` never waits,
and a consumer reading at any pace always gets the newest state of every call, at
once when it is waiting (out of band, as before).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any, final

import attrs
import trio

from ._results import ToolFinished, ToolProgress

__all__ = ["ProgressChannel"]


@attrs.define(eq=False)
class _Pending:
    """A progress report not received yet; later reports of its call replace it."""

    tool_use_id: str
    data: Any
    dropped: int = 0


@final
class ProgressChannel(trio.abc.ReceiveChannel[ToolProgress | ToolFinished]):
    """Receives progress reports (coalesced per call) and ToolFinished, in order."""

    def __init__(self) -> None:
        self._buffer: deque[_Pending | ToolFinished] = deque()
        self._pending: dict[str, _Pending] = {}  # per call, the report in the buffer
        self._finished: set[str] = set()  # calls whose result is final: no more reports
        self._lot = trio.lowlevel.ParkingLot()
        self._ended = False
        self._closed = False

    def reporter(self, tool_use_id: str) -> Callable[[Any], None]:
        """The ``report(data)`` of one call (what ``ctx.progress`` calls).

        A report while the last one is still unread just replaces it: a dict lookup
        and two stores, so a tool reporting a million times pays little for it.
        """
        pending_of = self._pending.get

        def report(data: Any) -> None:
            pending = pending_of(tool_use_id)
            if pending is not None:
                pending.data = data
                pending.dropped += 1
            else:
                self._queue_report(tool_use_id, data)

        return report

    def _queue_report(self, tool_use_id: str, data: Any) -> None:
        if self._closed or self._ended or tool_use_id in self._finished:
            return  # nobody listens any more, or after the result: progress is advisory
        pending = _Pending(tool_use_id, data)
        self._pending[tool_use_id] = pending
        self._buffer.append(pending)
        self._lot.unpark()

    def finished(self, item: ToolFinished) -> None:
        """Queue the end of a call (after its last report); never coalesced. Later
        reports of the call are dropped."""
        self._finished.add(item.tool_use_id)
        if self._closed or self._ended:
            return
        self._pending.pop(item.tool_use_id, None)  # no report may replace it now
        self._buffer.append(item)
        self._lot.unpark()

    def end(self) -> None:
        self._ended = True
        self._lot.unpark_all()

    async def receive(self) -> ToolProgress | ToolFinished:
        """The next item, waiting for it if needed.

        Raises:
            trio.EndOfChannel: every call finished and everything was received.
            trio.ClosedResourceError: this channel was closed with ``aclose()``.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        if self._closed:
            raise trio.ClosedResourceError("the progress channel was closed")
        if self._buffer or self._ended:
            await trio.lowlevel.cancel_shielded_checkpoint()
        else:
            while not (self._buffer or self._ended):
                await self._lot.park()
                if self._closed:
                    raise trio.ClosedResourceError("the progress channel was closed")
        if not self._buffer:
            raise trio.EndOfChannel
        item = self._buffer.popleft()
        if isinstance(item, ToolFinished):
            return item
        if self._pending.get(item.tool_use_id) is item:
            del self._pending[item.tool_use_id]
        return ToolProgress(item.tool_use_id, item.data, dropped=item.dropped)

    async def aclose(self) -> None:
        """Stop receiving; later items are discarded."""
        self._closed = True
        self._buffer.clear()
        self._pending.clear()
        self._lot.unpark_all()
        await trio.lowlevel.checkpoint()
