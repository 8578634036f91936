"""A turn's events as text: what ``run``, ``chat`` and ``demo`` print.

:func:`print_event` prints one loop event (text as it streams, tool calls and
results) or, with ``--json``, one JSON line of :func:`event_fields`;
:func:`print_plain` is the demo's live view without ``rich``: each tool call the
moment its block has streamed. :func:`print_timeline` shows a recorded turn
(:class:`~._timeline.TurnRecorder`) per model call, and what overlapping the tools
with the stream saved, on a rich ``Console`` or a :class:`~._plain.PlainConsole`.
Nothing here needs ``rich``.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import IO, TYPE_CHECKING, Any, Final

import attrs
import trio

from .._executor import ToolProgress
from .._loop import BlockFinished, ModelFallback, TextDelta
from .._messages import AssistantMessage, ToolUseBlock, UserMessage
from .._subagent import (
    SubagentText,
    SubagentToolFinished,
    SubagentToolProgress,
    SubagentToolStarted,
)
from ._plain import PlainConsole, escape
from ._timeline import ToolRow, TurnRecorder, printable

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "STYLES",
    "event_fields",
    "event_line",
    "event_record",
    "preview",
    "print_event",
    "print_plain",
    "print_timeline",
    "tool_started_record",
]

_SUBAGENT_STEPS = (SubagentToolStarted, SubagentToolProgress, SubagentToolFinished)

#: The style of each tool state, in the live view and the timeline.
STYLES: Final[Mapping[str, str]] = {
    "streaming": "cyan",
    "queued": "dim",
    "executing": "yellow",
    "done": "green",
    "error": "red",
    "cancelled": "magenta",
}


def preview(value: Any, limit: int = 80) -> str:
    """*value* (a string, else its JSON) on one line of at most *limit* characters."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def print_event(
    event: object,
    out: IO[str],
    *,
    as_json: bool = False,
    shown: Collection[str] = (),
    flush: bool = True,
) -> None:
    """Print one loop event: NDJSON, or text as it streams and tool calls and results
    (but those in *shown*: listed already, before their permission question); then
    flush *out*, unless not to (*flush*: the caller flushes in batches)."""
    if as_json:
        out.write(json.dumps({"type": type(event).__name__, **event_fields(event)}) + "\n")
    elif isinstance(event, TextDelta):
        out.write(event.text)
    elif isinstance(event, AssistantMessage):
        out.write("\n")
        for b in event.tool_uses:
            if b.id not in shown:
                out.write(f"  → {b.name}({preview(dict(b.input), 60)})\n")
    elif isinstance(event, ToolProgress):
        out.write(f"    {preview(str(event.data), 76)}\n")
    elif isinstance(event, UserMessage):
        for r in event.tool_results:
            mark = "✗" if r.is_error else "✓"
            content = r.content if isinstance(r.content, str) else "[blocks]"
            out.write(f"  {mark} {preview(content)}\n")
    elif isinstance(event, ModelFallback):
        out.write(f"\n[overloaded: switching from {event.from_model} to {event.to_model}]\n")
    if flush:
        out.flush()


def event_fields(event: Any) -> dict[str, Any]:
    """The JSON-ready fields of a loop event (messages and blocks in their API form;
    ``TurnEnd.messages`` left out: the message events tell the history)."""
    if isinstance(event, (AssistantMessage, UserMessage)):
        return {"message": event.to_api()}
    names = _field_names(type(event))
    out: dict[str, Any] = {}
    for name in names:
        value = getattr(event, name)
        if type(value) not in _PLAIN:  # (a text delta's fields all are)
            value = _json_value(value)
            if value is _SKIP:
                continue
        out[name] = value
    return out


_PLAIN = frozenset({str, int, float, bool, type(None)})
_FIELDS: dict[type, tuple[str, ...]] = {}


def _field_names(kind: type) -> tuple[str, ...]:
    """The attrs fields of *kind* that ``--json`` prints (looked up once per type)."""
    names = _FIELDS.get(kind)
    if names is None:
        fields = attrs.fields(kind) if attrs.has(kind) else ()
        names = _FIELDS[kind] = tuple(f.name for f in fields if f.name != "messages")
    return names


def event_record(event: object, t: float) -> dict[str, Any]:
    """One event as a JSON-ready dict: ``type``, ``t`` (seconds) and its fields."""
    return {"type": type(event).__name__, "t": round(t, 3), **event_fields(event)}


def event_line(event: object, t: float) -> str:
    """``json.dumps(event_record(event, t))`` and a newline: the ``--json`` line of
    an event. A text delta's (most of a turn's lines) is formatted directly, to the
    same text, without building its dict."""
    if type(event) is TextDelta:
        text, index = _encode(event.text), event.index
        return f'{{"type": "TextDelta", "t": {round(t, 3)!r}, "text": {text}, "index": {index}}}\n'
    return json.dumps(event_record(event, t)) + "\n"


_encode = json.encoder.encode_basestring_ascii  # what json.dumps uses for a str


def tool_started_record(row: ToolRow) -> dict[str, Any]:
    """The ``ToolStarted`` line of ``--json``: a tool really started (its ``run``
    was called), *row*'s time and call."""
    t = round(row.started_at or 0.0, 3)
    return {"type": "ToolStarted", "t": t, "tool_use_id": row.tool_use_id, "name": row.name}


_SKIP = object()


def _json_value(value: Any) -> Any:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if hasattr(value, "to_api"):
        return value.to_api()
    if isinstance(value, BaseException):
        return f"{type(value).__name__}: {value}"
    if isinstance(value, (tuple, list)):
        items = [_json_value(v) for v in value]  # pyright: ignore[reportUnknownVariableType]
        return _SKIP if any(i is _SKIP for i in items) else items
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return _SKIP
    return value


async def print_plain(
    events: trio.abc.ReceiveChannel[Any], recorder: TurnRecorder, out: IO[str]
) -> None:
    """The turn as plain lines (no rich): the text as it streams, each tool call the
    moment its block has streamed (while the answer goes on), its output lines."""
    mid_line = False

    def end_line() -> None:
        nonlocal mid_line
        if mid_line:
            out.write("\n")
            mid_line = False

    async for event in events:
        recorder.feed(event)
        if isinstance(event, TextDelta):
            out.write(printable(event.text))
            mid_line = not event.text.endswith("\n")
        elif isinstance(event, BlockFinished):
            if isinstance(event.block, ToolUseBlock):
                end_line()
                out.write(f"  → {event.block.name}({preview(dict(event.block.input), 60)})\n")
        elif isinstance(event, ToolProgress):
            data = event.data
            if isinstance(data, SubagentText):
                continue  # a subagent's text: its steps and its result are shown
            end_line()
            # A subagent's steps, indented by its depth (its subagents' further in).
            depth = data.depth if isinstance(data, _SUBAGENT_STEPS) else 1
            out.write(f"    │ {'  ' * (depth - 1)}{preview(printable(str(data)), 74)}\n")
        elif not isinstance(event, AssistantMessage):  # its tool calls are shown already
            end_line()
            print_event(event, out)
        out.flush()
    end_line()


def _bar(begin: float, end: float, start: float, span: float, width: int, mark: str) -> str:
    """``····████····``: *mark* from *begin* to *end*, over ``start .. start + span``."""

    def at(t: float) -> int:
        return min(width - 1, max(0, int((t - start) / span * width)))

    cells = [" "] * width
    for i in range(at(begin), at(end) + 1):
        cells[i] = mark
    return "".join(cells)


def _fit(text: str, width: int) -> str:
    """*text* in exactly *width* columns: padded, or cut with an ellipsis."""
    return f"{text:<{width}}" if len(text) <= width else text[: width - 1] + "…"


def print_timeline(console: Console | PlainConsole, recorder: TurnRecorder) -> None:
    """The turn's timeline, per model call, and what overlapping saved, as wide as the
    console: the calls' labels as long as they are (up to 40% of the width), the bars
    the rest."""
    width = max(40, console.width)
    for call in recorder.calls:
        moments = recorder.timeline(call)
        console.print(f"model call {call.index} ({call.reason})", soft_wrap=True)
        for t, what in moments:
            console.print(f"[cyan]{t:7.2f}s[/] {escape(what)}", soft_wrap=True)
        rows = [r for r in recorder.call_tools(call) if r.started_at is not None]
        if rows:
            end = max(
                [r.ended_at or 0.0 for r in rows]
                + [call.stream_ended_at or 0.0, *(t for t, _ in moments)]
            )
            span = max(end - call.started_at, 1e-6)
            stream_label = "the model streaming"
            longest = max(len(stream_label), *(len(printable(r.summary)) for r in rows))
            label = min(longest, max(28, width * 2 // 5))
            bars = width - 3 - label  # "  LABEL BAR"
            stream_end = call.stream_ended_at if call.stream_ended_at is not None else end
            bar = _bar(call.started_at, stream_end, call.started_at, span, bars, "─")
            console.print(f"  {_fit(stream_label, label)} [dim]{bar}[/]", soft_wrap=True)
            for row in rows:
                ended = row.ended_at if row.ended_at is not None else row.started_at or 0.0
                bar = _bar(row.started_at or 0.0, ended, call.started_at, span, bars, "█")
                summary = escape(_fit(printable(row.summary), label))
                console.print(f"  {summary} [{STYLES[row.state]}]{bar}[/]", soft_wrap=True)
        saved = recorder.saved(call)
        if saved >= 0.005:
            console.print(f"  overlapping saved [bold]{saved:.2f}s[/] in this call")
        console.print()
    console.print(
        f"Overlapping tools with the stream saved [bold green]{recorder.total_saved():.2f}s"
        "[/] compared to running them after each stream ended."
    )
