"""The executor's progress channel: bounded, and never blocking the tools.

A tool may report progress a million times, or a command print 20 MB line by line:
the channel keeps at most :data:`MAX_UNREAD` reports of each call that were not
received yet; past that, a new report replaces the newest unread one (whose
``dropped`` counts the reports it replaced). Bursts (a chunk of output lines) arrive
whole, storms are coalesced: memory is bounded by the number of calls, ``report()``
never waits, the latest report of a call always arrives (before its
:class:`ToolFinished`), and a waiting consumer gets each report at once.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, final

import attrs
import trio

from ._results import ToolFinished, ToolProgress, ToolResult

__all__ = ["MAX_UNREAD", "ProgressChannel"]

#: The most reports of one call kept unread; later ones replace the newest of them.
MAX_UNREAD = 256


@attrs.define(eq=False)
class _CallProgress:
    """What the channel knows of one call's reports."""

    unread: int = 0  # its reports in the buffer
    newest: _Pending | None = None  # the newest of them, while unread
    finished: bool = False  # its result is final: no more reports


@attrs.define(eq=False)
class _Pending:
    """A report not received yet."""

    call: _CallProgress
    tool_use_id: str
    data: Any
    dropped: int = 0


@final
class ProgressChannel(trio.abc.ReceiveChannel[ToolProgress | ToolFinished]):
    """Receives progress reports (bounded per call) and ToolFinished, in order."""

    def __init__(self) -> None:
        # A call's end is queued as its ToolResult (see finished()).
        self._buffer: deque[_Pending | ToolResult] = deque()
        self._calls: dict[str, _CallProgress] = {}
        self._lot = trio.lowlevel.ParkingLot()
        self._ended = False
        self._closed = False

    def _call(self, tool_use_id: str) -> _CallProgress:
        call = self._calls.get(tool_use_id)
        if call is None:
            call = self._calls[tool_use_id] = _CallProgress()
        return call

    def reporter(self, tool_use_id: str) -> Callable[[Any], None]:
        """The ``report(data)`` of one call (what ``ctx.progress`` calls); it never
        blocks, and in a storm costs two attribute reads and two stores."""
        call = self._call(tool_use_id)

        def report(data: Any) -> None:
            newest = call.newest
            if newest is not None and call.unread >= MAX_UNREAD:
                newest.data = data
                newest.dropped += 1
            else:
                self._queue_report(call, tool_use_id, data)

        return report

    def _queue_report(self, call: _CallProgress, tool_use_id: str, data: Any) -> None:
        if self._closed or self._ended or call.finished:
            return  # nobody listens any more, or after the result: progress is advisory
        pending = _Pending(call, tool_use_id, data)
        call.newest = pending
        call.unread += 1
        self._buffer.append(pending)
        self._lot.unpark()

    def finished(self, results: Sequence[ToolResult]) -> None:
        """Queue the end of each call whose result is final (after its last report);
        later reports of those calls are dropped. The :class:`ToolFinished` is made
        when it is received, so a consumer that never reads progress never pays for it."""
        calls = self._calls
        for result in results:
            call = calls.get(result.tool_use_id)
            if call is None:
                call = calls[result.tool_use_id] = _CallProgress()
            call.finished = True
            call.newest = None  # no report may change what comes before the end
        if self._closed or self._ended:
            return
        self._buffer.extend(results)
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
        if isinstance(item, ToolResult):
            return ToolFinished(item.tool_use_id, item.is_error, item.abort_reason)
        call = item.call
        call.unread -= 1
        if call.newest is item:
            call.newest = None
        return ToolProgress(item.tool_use_id, item.data, dropped=item.dropped)

    async def aclose(self) -> None:
        """Stop receiving; later items are discarded."""
        self._closed = True
        self._buffer.clear()
        for call in self._calls.values():
            call.unread, call.newest = 0, None
        self._lot.unpark_all()
        await trio.lowlevel.checkpoint()
