"""What a streaming call yields: raw events, finished blocks, and a final result."""

from __future__ import annotations

from typing import Any, TypeAlias

import attrs

from .._messages import AssistantMessage

__all__ = ["StreamEvent", "StreamItem", "StreamResult", "StreamStatistics"]


@attrs.frozen
class StreamEvent:
    """One server-sent event, decoded, as it arrived (for a UI: text deltas live).

    Attributes:
        type: the event's JSON ``type`` (``message_start``, ``content_block_delta``...).
        data: the whole decoded event JSON (treat it as read-only).
    """

    type: str
    data: dict[str, Any]

    @property
    def index(self) -> int | None:
        """The content block index of a ``content_block_*`` event, else None."""
        index = self.data.get("index")
        return index if type(index) is int else None

    def _delta(self, kind: str, field: str) -> str | None:
        if self.type != "content_block_delta":
            return None
        delta = self.data.get("delta")
        if isinstance(delta, dict) and delta.get("type") == kind:
            text = delta.get(field)  # pyright: ignore[reportUnknownVariableType]
            return text if isinstance(text, str) else None
        return None

    @property
    def text_delta(self) -> str | None:
        """The text of a ``text_delta`` event, else None (a convenience for UIs)."""
        return self._delta("text_delta", "text")

    @property
    def thinking_delta(self) -> str | None:
        """The text of a ``thinking_delta`` event, else None."""
        return self._delta("thinking_delta", "thinking")

    @property
    def stop_reason(self) -> str | None:
        """The ``stop_reason`` a ``message_delta`` event announces, else None (the
        earliest moment a consumer can know how the answer ends)."""
        if self.type != "message_delta":
            return None
        delta = self.data.get("delta")
        if isinstance(delta, dict):
            reason = delta.get("stop_reason")  # pyright: ignore[reportUnknownVariableType]
            return reason if isinstance(reason, str) else None
        return None

    @property
    def start_message(self) -> AssistantMessage | None:
        """The message a ``message_start`` event opens (id, model, usage; no content
        yet), else None."""
        if self.type != "message_start":
            return None
        message = self.data.get("message")
        if not isinstance(message, dict):
            return None
        try:
            return AssistantMessage.from_api({**message, "content": []})
        except (TypeError, ValueError, KeyError):
            return None


_new = object.__new__
_set_type = StreamEvent.__dict__["type"].__set__
_set_data = StreamEvent.__dict__["data"].__set__


def stream_event(etype: str, data: dict[str, Any]) -> StreamEvent:
    """``StreamEvent(etype, data)`` at a third of its cost (the read path makes one
    per server-sent event): the slots are set directly, as the frozen class's
    ``__init__`` sets them through ``object.__setattr__`` (no field has a default,
    converter or validator to skip)."""
    event = _new(StreamEvent)
    _set_type(event, etype)
    _set_data(event, data)
    return event


@attrs.frozen
class StreamStatistics:
    """What happened while streaming one answer (the successful attempt).

    Attributes:
        events: events received, pings and ignored ones included.
        pings: ``ping`` events.
        ignored: events and deltas of unknown type.
        stalls: gaps longer than the stall threshold between events (pings excluded).
        stall_time: the total length of those gaps, in seconds.
        retries: attempts that failed and were retried before this one.
    """

    events: int = 0
    pings: int = 0
    ignored: int = 0
    stalls: int = 0
    stall_time: float = 0.0
    retries: int = 0


@attrs.frozen
class StreamResult:
    """The last item of a stream: the whole final message and how it went.

    Attributes:
        message: the complete message (stop_reason, stop_sequence, usage included).
        ttft: seconds from the call to the first content event (time to first token),
            retries included; None if the message had no content.
        statistics: counts of events, pings, stalls and retries.
        request_id: the API's ``request-id`` header, if it sent one.
    """

    message: AssistantMessage
    ttft: float | None
    statistics: StreamStatistics
    request_id: str | None = None


#: Everything ``AnthropicClient.stream()`` yields.
StreamItem: TypeAlias = StreamEvent | AssistantMessage | StreamResult
