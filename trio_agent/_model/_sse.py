"""Reading server-sent events from a streamed httpx response, generator-free.

:class:`SSEParser` is the sync core: bytes in, event data out. Bytes are decoded as
UTF-8 (a leading BOM dropped, invalid bytes replaced) and split into lines by
httpx-sse's line decoder (LF / CR / CRLF, a CRLF split across chunks included). The
lines are interpreted here, per the SSE spec, but only as far as this client uses
them: ``data`` fields are collected and dispatched at a blank line; comments, and
the ``event``, ``id`` and ``retry`` fields, change nothing (dispatch is on the JSON
``type``, and a retry is a new request, never a reconnection with Last-Event-ID).
httpx-sse's own per-line event decoder (a method call and a ServerSentEvent per
line) took three times as long as this loop, and was the client's largest cost
after JSON decoding.

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
from httpx_sse._decoders import SSELineDecoder

from .._exceptions import StreamLimitError

__all__ = ["ResponseReader", "SSEParser"]

#: Bytes tolerated past ``max_event_bytes`` before an event boundary (one network read).
_SLACK = 128 * 1024
#: At most this many chunks are read (and dropped) while closing a response.
_MAX_DRAIN_CHUNKS = 64


class SSEParser:
    """Incremental SSE decoding: ``feed(chunk)`` returns the data of the events it
    completed.

    Events whose data is empty are not dispatched (the spec's rule for an event
    without ``data`` lines, extended to ``data:`` with nothing after it: no JSON
    event is empty).

    Args:
        max_pending: the most bytes accepted without an event boundary; beyond it,
            :class:`StreamLimitError` (memory stays bounded whatever the server sends).
    """

    def __init__(self, max_pending: int) -> None:
        self._text = codecs.getincrementaldecoder("utf-8-sig")(errors="replace")
        self._lines = SSELineDecoder()
        self._data: list[str] = []
        self.max_pending = max_pending + _SLACK
        self.pending = 0
        #: Bytes fed so far, counted until the BOM is decided (3).
        self._seen = 0
        #: Whether both decoders hold nothing back: the last chunk ended a line with
        #: LF, past the BOM (see :meth:`feed`).
        self._clean = False

    def _decode_lines(self, lines: list[str]) -> list[str]:
        out: list[str] = []
        data = self._data
        for line in lines:
            # (The cheapest tests first: a blank line, then the first character, which
            # is no new string for ASCII; most lines need nothing more.)
            if not line:  # a blank line ends the event
                # Whatever came before is dispatched or dropped: nothing is kept.
                self.pending = 0
                if data:
                    value = data[0] if len(data) == 1 else "\n".join(data)
                    data = self._data = []
                    if value:
                        out.append(value)
            elif line[0] == "d":
                # The data field's value: after the colon, minus one leading space.
                if line[:6] == "data: ":
                    data.append(line[6:])
                elif line[:5] == "data:":
                    data.append(line[5:])
                elif line == "data":  # a field name without a colon: an empty value
                    data.append("")
            # Anything else: a comment (":..."), event / id / retry, or an unknown field.
        return out

    def feed(self, chunk: bytes) -> list[str]:
        self.pending += len(chunk)
        if self._clean and chunk[-1:] == b"\n" and b"\r" not in chunk:
            # The way a stream arrives (whole lines, each ended by LF), when neither
            # decoder holds anything back: what they would do, in two calls. A chunk
            # that ends with LF leaves no partial character (LF is never part of a
            # multi-byte sequence) and no partial line; without CR, LF alone ends
            # lines; past the first bytes, the BOM is decided.
            lines = chunk.decode("utf-8", "replace").split("\n")
            lines.pop()  # the empty text after the last LF
            events = self._decode_lines(lines)
        else:
            text = self._text.decode(chunk)
            events = self._decode_lines(self._lines.decode(text)) if text else []
            if self._seen < 3:
                self._seen += len(chunk)
            self._clean = self._seen >= 3 and chunk[-1:] == b"\n"
        if self.pending > self.max_pending:
            raise StreamLimitError(
                f"{self.pending} bytes without an event boundary exceed max_event_bytes"
            )
        return events

    def flush(self) -> list[str]:
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
