"""Partial tool inputs while they stream: :class:`ToolInputDelta`, for UIs.

A tool call's input arrives as pieces of JSON (``input_json_delta``); the
accumulator parses it once, strictly, at the block's end, and that is the input
the tool gets. Before that, a UI may want to show what the model is writing (a
file's content, a command). :class:`PartialInputs` keeps each streaming call's
JSON and parses it with ``jiter``'s partial mode (incomplete strings, arrays and
objects are closed where they stop) into a :class:`ToolInputDelta`.

Re-parsing the whole prefix on every delta would cost quadratic time on a long
input (the official SDK does that). Parses are coalesced instead: after the
first piece, the next parse waits until the JSON has grown by at least
:data:`MIN_STEP` bytes *and* by :data:`GROWTH` of what was parsed last time, so the bytes parsed over a whole
input stay within ``(1 + 1 / GROWTH)`` times its size (linear), while a short
input is shown every few dozen bytes. Nothing here changes the final input.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, cast

import attrs
import jiter

from .._model import StreamEvent

__all__ = ["GROWTH", "MIN_STEP", "PartialInputs", "ToolInputDelta"]

#: Bytes of new input JSON before a partial parse, at least.
MIN_STEP: Final = 64
#: ... and this fraction of what was parsed last time: bounds the total work.
GROWTH: Final = 0.25


@attrs.frozen
class ToolInputDelta:
    """The input of a tool call parsed as far as it has streamed (for a UI).

    A partial view: strings, arrays and objects are cut where the JSON stops, and
    the last number may still be growing. The tool gets the input strictly parsed
    at the block's end (its :class:`BlockFinished`), never this.

    Attributes:
        index: the content block index of the tool call.
        tool_use_id: its id.
        name: the tool's name.
        partial_input: the input so far (a JSON object).
        received: bytes of input JSON received so far.
    """

    index: int
    tool_use_id: str
    name: str
    partial_input: Mapping[str, Any]
    received: int


@attrs.define(eq=False)
class _Buffer:
    tool_use_id: str
    name: str
    data: bytearray = attrs.field(factory=bytearray)
    parsed: int = 0


@attrs.define(eq=False)
class PartialInputs:
    """The streaming tool calls of one model call; :meth:`feed` each event.

    Attributes:
        min_step: :data:`MIN_STEP`.
        growth: :data:`GROWTH` (0 with *min_step* 0: a parse on every delta).
        parses: partial parses made (for measuring the coalescing).
        parsed_bytes: bytes parsed over all of them.
    """

    min_step: int = MIN_STEP
    growth: float = GROWTH
    _open: dict[int, _Buffer] = attrs.field(factory=dict[int, _Buffer], init=False)
    parses: int = attrs.field(default=0, init=False)
    parsed_bytes: int = attrs.field(default=0, init=False)

    def feed(self, event: StreamEvent) -> ToolInputDelta | None:
        """A :class:`ToolInputDelta` when *event* grew a tool call's input enough
        since its last one (and the JSON so far parses), else None."""
        index = event.index
        if index is None:
            return None
        if event.type == "content_block_start":
            block = event.data.get("content_block")
            if isinstance(block, dict):
                block = cast(dict[str, Any], block)
                kind, id, name = block.get("type"), block.get("id"), block.get("name")
                if kind == "tool_use" and isinstance(id, str) and isinstance(name, str):
                    self._open[index] = _Buffer(id, name)
            return None
        if event.type == "content_block_stop":
            self._open.pop(index, None)
            return None
        buffer = self._open.get(index)
        if buffer is None or event.type != "content_block_delta":
            return None
        delta = event.data.get("delta")
        if not isinstance(delta, dict):
            return None
        delta = cast(dict[str, Any], delta)
        piece = delta.get("partial_json")
        if delta.get("type") != "input_json_delta" or not isinstance(piece, str):
            return None
        buffer.data += piece.encode()
        size = len(buffer.data)
        if buffer.parsed and size - buffer.parsed < max(self.min_step, self.growth * buffer.parsed):
            return None
        buffer.parsed = size
        self.parses += 1
        self.parsed_bytes += size
        try:
            value = jiter.from_json(
                bytes(buffer.data),
                partial_mode="trailing-strings",
                cache_mode="none",
                allow_inf_nan=False,
            )
        except ValueError:  # not JSON (the block's end will say so), or nested too deep
            return None
        if not isinstance(value, dict):
            return None
        return ToolInputDelta(
            index, buffer.tool_use_id, buffer.name, cast(dict[str, Any], value), size
        )
