"""The live view of a turn, with ``rich`` (the ``cli`` extra).

:class:`LiveView` (the demo's) shows, while a turn runs, the text the model streams
and a table of its tool calls with their state (streaming, while the call's input
streams; queued / executing / done / error / cancelled), time and latest progress
line. :func:`live_output` is ``run``'s and ``chat``'s, on a terminal: what they print
goes above the view as each line completes, the line being written and the tool
table stay at the bottom, and the view is gone when the turn ends (what stays on
the screen is what they print without it). The tool column is wider on a wider
terminal. Both need ``rich``, which a core-only install does not have: import this
module only when :func:`~._plain.has_rich` says so (without it the commands print
plain lines).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Generator
from typing import IO, Any

import attrs
import trio
from rich import box
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ._ask import HeldOutput
from ._plain import rich_console
from ._render import STYLES
from ._timeline import ToolRow, TurnRecorder, printable

__all__ = ["LiveView", "live_output", "tools_table"]

_TEXT_LINES = 14
_TOOL_WIDTH = 26
#: The widest tool column (a call's summary is at most ~60 characters).
_TOOL_WIDTH_MAX = 60
_REFRESH = 0.05


def tools_table(recorder: TurnRecorder, width: int = 80) -> Table:
    """The tool calls of *recorder* as a table for a *width*-column terminal: fixed
    widths, but for the latest output, which takes the rest of the line, so the
    columns stay put as rows come and go; the tool column gets half of what a
    terminal has past 80 columns."""
    tool_width = min(_TOOL_WIDTH_MAX, _TOOL_WIDTH + max(0, width - 80) // 2)
    table = Table(
        box=box.SIMPLE_HEAD, expand=True, pad_edge=False, show_edge=False, collapse_padding=True
    )
    table.add_column("#", justify="right", width=2, no_wrap=True)
    table.add_column("tool", width=tool_width, no_wrap=True, overflow="ellipsis")
    table.add_column("state", width=9, no_wrap=True)
    table.add_column("time", justify="right", width=7, no_wrap=True)
    table.add_column("latest output", ratio=1, no_wrap=True, overflow="ellipsis")
    now = recorder.now()
    for top in recorder.tools.values():
        for row in (top, *top.children):  # a subagent's calls indented under its own
            indent = "  " * row.depth + "↳ " if row.depth else ""
            table.add_row(
                "" if row.depth else str(row.call),
                Text(indent + printable(row.summary)),  # Text: a "[" is no markup
                Text(row.state, style=STYLES[row.state]),
                _duration(row, now),
                Text(row.progress or "", style="dim" if row.state != "executing" else ""),
            )
    return table


@attrs.define(eq=False)
class LiveView:
    """Renders a :class:`TurnRecorder` as streaming text over a table of tools."""

    recorder: TurnRecorder
    title: str = "trio-agent"

    def render(self, width: int = 80) -> RenderableType:
        """The current view, for a *width*-column terminal."""
        rec = self.recorder
        lines = "".join(rec.text).splitlines()[-_TEXT_LINES:]
        panel = Panel(
            Text(printable("\n".join(lines))),
            title=f"{self.title} · model call {rec.current.index}",
            title_align="left",
        )
        return Group(panel, tools_table(rec, width)) if rec.tools else panel

    async def run(self, console: Console, events: trio.abc.ReceiveChannel[Any]) -> None:
        """Feed every event of *events* to the recorder and keep the view live."""
        with Live(self.render(), console=console, auto_refresh=False) as live:
            async with trio.open_nursery() as nursery:

                async def tick() -> None:
                    while True:
                        live.update(self.render(console.width), refresh=True)
                        await trio.sleep(_REFRESH)

                nursery.start_soon(tick)
                async for event in events:
                    self.recorder.feed(event)
                nursery.cancel_scope.cancel()
            live.update(self.render(console.width), refresh=True)


@attrs.define(eq=False)
class _Lines:
    """The stream ``run`` / ``chat`` print into under :func:`live_output`: each
    flush prints the complete lines above the live view; the incomplete last line
    is the view's first line."""

    console: Console
    tail: str = ""
    _done: list[str] = attrs.field(factory=list[str])

    def write(self, text: str) -> int:
        *done, self.tail = (self.tail + text).split("\n")
        self._done += done
        return len(text)

    def flush(self) -> None:
        if self._done:
            lines = "\n".join(self._done)
            self._done.clear()
            self.console.print(Text(printable(lines)), soft_wrap=True)

    def isatty(self) -> bool:
        return True


def _view(lines: _Lines, recorder: TurnRecorder, width: int) -> RenderableType:
    parts: list[RenderableType] = []
    if lines.tail:
        parts.append(Text(printable(lines.tail)))
    if recorder.tools:
        parts.append(tools_table(recorder, width))
    return Group(*parts)


@contextlib.asynccontextmanager
async def live_output(out: HeldOutput, recorder: TurnRecorder) -> AsyncGenerator[None]:
    """For the block, what is printed on *out* (a terminal) goes above a live view
    of *recorder*'s tool calls (see the module docstring); a question asked through
    ``out.held()`` pauses the view. When the block ends the view is erased and the
    unfinished last line printed."""
    target: IO[str] = out.target
    console = rich_console(target)
    assert console is not None  # this module is imported only when rich is there
    lines = _Lines(console)
    live = Live(console=console, auto_refresh=False, transient=True, redirect_stderr=False)

    def refresh() -> None:
        if live.is_started:
            live.update(_view(lines, recorder, console.width), refresh=True)

    @contextlib.contextmanager
    def paused() -> Generator[None]:
        live.stop()
        try:
            yield
        finally:
            live.start()
            refresh()

    out.flush()
    out.target, out.pause = lines, paused  # pyright: ignore[reportAttributeAccessIssue]
    live.start()
    try:
        async with trio.open_nursery() as nursery:

            async def tick() -> None:
                while True:
                    refresh()
                    await trio.sleep(_REFRESH)

            nursery.start_soon(tick)
            try:
                yield
            finally:
                nursery.cancel_scope.cancel()
    finally:
        out.flush()
        live.stop()
        out.target, out.pause = target, None
        if lines.tail:
            out.write(lines.tail)
        out.flush()


def _duration(row: ToolRow, now: float) -> str:
    if row.started_at is None:
        return ""
    end = row.ended_at if row.ended_at is not None else now
    return f"{end - row.started_at:.2f}s"
