"""Reading server-sent events from a streamed httpx response, generator-free.

:class:`SSEParser` is the sync core: bytes in, events out, decoded with httpx-sse's
line and event decoders (UTF-8, a leading BOM dropped, LF / CR / CRLF line endings).

:class:`ResponseReader` reads the response's raw byte stream one chunk at a time.
httpx's ``aiter_*`` methods are async generators; stopping one early (at
``message_stop``, on an error event, when the consumer leaves) abandons the
generators it iterates, which Trio reports as a ResourceWarning (encode/httpx#3686).
So nothing here is a generator, and :meth:`ResponseReader.aclose` closes the
response first and then lets httpx's own stream iterator run to its end from the
inside, so no generator is left half-done.
"""

from __future__ import annotations

import codecs
from collections.abc import AsyncIterator

import httpx
import trio
from httpx_sse import ServerSentEvent
from httpx_sse._decoders import SSEDecoder, SSELineDecoder

from ._exceptions import StreamLimitError

__all__ = ["ResponseReader", "SSEParser"]

#: Bytes tolerated past ``max_event_bytes`` before an event boundary (one network read).
_SLACK = 128 * 1024
#: At most this many chunks are read (and dropped) while closing a response.
_MAX_DRAIN_CHUNKS = 64


class SSEParser:
    """Incremental SSE decoding: ``feed(chunk)`` returns the events it completed.

    Args:
        max_pending: the most bytes accepted without an event boundary; beyond it,
            :class:`StreamLimitError` (memory stays bounded whatever the server sends).
    """

    def __init__(self, max_pending: int) -> None:
        self._text = codecs.getincrementaldecoder("utf-8-sig")(errors="replace")
        self._lines = SSELineDecoder()
        self._events = SSEDecoder()
        self.max_pending = max_pending + _SLACK
        self.pending = 0

    def _decode_lines(self, lines: list[str]) -> list[ServerSentEvent]:
        out: list[ServerSentEvent] = []
        for line in lines:
            event = self._events.decode(line)
            if event is not None:
                # An event ended by a blank line resets the size count, even one the
                # SSE spec says not to dispatch: with an empty data buffer (httpx-sse
                # hands those out, e.g. for a lone "id:" or "retry:" field).
                self.pending = 0
                if event.data:
                    out.append(event)
        return out

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        self.pending += len(chunk)
        text = self._text.decode(chunk)
        events = self._decode_lines(self._lines.decode(text)) if text else []
        if self.pending > self.max_pending:
            raise StreamLimitError(
                f"{self.pending} bytes without an event boundary exceed max_event_bytes"
            )
        return events

    def flush(self) -> list[ServerSentEvent]:
        """The events completed by the end of the stream (a last unterminated line)."""
        text = self._text.decode(b"", final=True)
        lines = self._lines.decode(text) if text else []
        # As the SSE spec says, an event not ended by a blank line is not dispatched.
        return self._decode_lines([*lines, *self._lines.flush()])


class ResponseReader:
    """Reads the raw byte chunks of a streamed response, and closes it cleanly."""

    def __init__(self, response: httpx.Response) -> None:
        assert isinstance(response.stream, httpx.AsyncByteStream)
        self._response = response
        self._iterator: AsyncIterator[bytes] = response.stream.__aiter__()
        self._done = False
        self.total = 0

    async def read(self) -> bytes | None:
        """The next chunk, or None at the end of the body."""
        if self._done:
            return None
        try:
            chunk = await self._iterator.__anext__()
        except StopAsyncIteration:
            self._done = True
            return None
        except BaseException:
            self._done = True  # the exception ended every iterator on the way
            raise
        self.total += len(chunk)
        return chunk

    async def aclose(self) -> None:
        """Close the response, then let its stream iterator end (shield this call)."""
        await self._response.aclose()
        drained = 0
        while not self._done and drained < _MAX_DRAIN_CHUNKS:
            drained += 1
            try:
                await self._iterator.__anext__()
            except StopAsyncIteration:
                self._done = True
            except trio.Cancelled:
                raise
            except Exception:
                self._done = True  # reading a closed stream failed: that ended it
        if not self._done:
            self._done = True
            aclose = getattr(self._iterator, "aclose", None)
            if aclose is not None:
                await aclose()
