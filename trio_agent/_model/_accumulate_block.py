"""The pieces of MessageAccumulator's state: strict JSON decoding, and one content
block being streamed (its parts, and what the hot path of ``feed`` needs to know)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs
import jiter

from .._exceptions import StreamLimitError, StreamProtocolError, excerpt
from .._messages import ContentBlock, TextBlock, ThinkingBlock, block_from_api

__all__ = [
    "DELTA_FIELD",
    "DELTA_KIND",
    "HOT_DELTA",
    "JSON_BLOCK_TYPES",
    "Block",
    "load_event",
    "strict_loads",
    "utf8_len",
]


def utf8_len(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


#: One decoder for every call: ``json.loads(data, parse_constant=...)`` would build a
#: new decoder (and scanner) each time, which costs more than decoding a small event.
_JSON = json.JSONDecoder(parse_constant=_reject_constant)


def strict_loads(data: str | bytes, what: str) -> Any:
    """Strict JSON: no NaN / Infinity; too deep a nesting is a StreamLimitError.

    Raises ValueError for anything that is not JSON (numbers past Python's
    int-string-conversion limit included).

    jiter decodes first (a small event in a quarter of ``json``'s time); whatever it
    refuses, ``json`` decides, so the result is always ``json``'s: jiter refuses
    everything ``json`` refuses, and a few things ``json`` accepts (a lone surrogate
    escape, nesting deeper than jiter's limit). tests/model/test_strict_json.py
    checks the two agree.
    """
    try:
        return jiter.from_json(
            data.encode() if isinstance(data, str) else data, allow_inf_nan=False
        )
    except ValueError:  # UnicodeEncodeError (a lone surrogate) included
        pass
    try:
        if not isinstance(data, str):  # as json.loads does with bytes
            data = data.decode(json.detect_encoding(data), "surrogatepass")
        return _JSON.decode(data)
    except RecursionError:
        # The C decoder recurses once per nesting level: hostile nesting must not
        # escape as a RecursionError.
        raise StreamLimitError(f"{what} is nested too deeply") from None


def load_event(data: str | bytes, max_event_bytes: int) -> Any:
    """One server-sent event's ``data`` as JSON (strict), within *max_event_bytes*.

    Raises:
        StreamLimitError: the data is larger than *max_event_bytes*.
        StreamProtocolError: the data is not JSON.
    """
    size = len(data) if isinstance(data, bytes) else utf8_len(data)
    if size > max_event_bytes:
        raise StreamLimitError(
            f"an event of {size} bytes exceeds max_event_bytes={max_event_bytes}"
        )
    try:
        return strict_loads(data, "event data")
    except ValueError:
        raise StreamProtocolError(f"event data is not JSON: {excerpt(data)}") from None


@attrs.define(eq=False)
class Block:
    """One content block being streamed (mutable, private)."""

    index: int
    kind: str  # "text", "thinking", "json" (tool input) or "fixed"
    start: Mapping[str, Any]
    #: The deltas appended so far. Only ever changed in place while the block is open:
    #: ``feed`` keeps a reference to the open block's list.
    parts: list[str] = attrs.field(factory=lambda: list[str]())
    #: Exact UTF-8 size of the tool input so far; only kept once ``room`` ran out.
    size: int = 0
    #: Characters of tool input still accepted without counting bytes exactly (a
    #: character is at most 4 UTF-8 bytes); -1 once exact counting took over.
    room: int = 0
    #: The delta type and field the hot path appends (``text_delta`` / ``text``...).
    hot_type: str = ""
    hot_field: str = ""
    #: Whether the hot path must count the input (tool input JSON has a size limit).
    counted: bool = False
    #: Parts folded away (joined, or dropped at the stop). Every delta that appended
    #: is one event: ``folded + len(parts)`` counts them without a counter per delta.
    folded: int = 0
    signature: str = ""
    citations: list[Mapping[str, Any]] | None = None
    #: The unknown keys of the start (text and thinking blocks keep them).
    extra: Mapping[str, Any] = attrs.field(factory=lambda: dict[str, Any]())
    #: The block the start describes, with the input of its start (tool uses).
    template: ContentBlock | None = None
    stopped: bool = False
    final: ContentBlock | None = None

    def text(self) -> str:
        """The text so far; the parts are joined into one, so reading again is cheap.

        In place: the hot path holds on to the list of the open block.
        """
        parts = self.parts
        if len(parts) == 1:
            return parts[0]
        text = "".join(parts)
        self.folded += len(parts) - 1
        parts[:] = (text,)
        return text

    def snapshot(self) -> ContentBlock:
        if self.final is not None:
            return self.final
        if self.kind == "text":
            citations = None if self.citations is None else tuple(self.citations)
            return TextBlock(self.text(), citations, extra=self.extra)
        if self.kind == "thinking":
            return ThinkingBlock(self.text(), self.signature, extra=self.extra)
        if self.kind == "compaction":
            return block_from_api(self.start)
        # Tool input is only parsed at the block's stop; until then it is {} (also when
        # the start had no input: it was read as {}).
        return block_from_api({**self.start, "input": {}})


JSON_BLOCK_TYPES = frozenset({"tool_use", "server_tool_use"})
HOT_DELTA = {
    # block kind -> the delta that only appends, and its field
    "text": ("text_delta", "text"),
    "thinking": ("thinking_delta", "thinking"),
    "json": ("input_json_delta", "partial_json"),
}
DELTA_FIELD = {
    "text_delta": "text",
    "thinking_delta": "thinking",
    "signature_delta": "signature",
    "input_json_delta": "partial_json",
}
DELTA_KIND = {
    "text_delta": "text",
    "citations_delta": "text",
    "thinking_delta": "thinking",
    "signature_delta": "thinking",
    "input_json_delta": "json",
    "compaction_delta": "compaction",
}
