"""The live view of a turn, with ``rich`` (the ``cli`` extra).

:class:`LiveView` shows, while a turn runs, the text the model streams and a table
of its tool calls with their state (queued / executing / done / error / cancelled)
and latest progress line. It needs ``rich``, which a core-only install does not
have: import this module only when :func:`~._plain.has_rich` says so (without it
the demo prints :func:`~._render.print_plain` lines).
"""

from __future__ import annotations

from typing import Any

import attrs
import trio
from rich import box
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ._render import STYLES
from ._timeline import ToolRow, TurnRecorder, printable

__all__ = ["LiveView"]

_TEXT_LINES = 14
_TOOL_WIDTH = 26
_REFRESH = 0.05


@attrs.define(eq=False)
class LiveView:
    """Renders a :class:`TurnRecorder` as streaming text over a table of tools."""

    recorder: TurnRecorder
    title: str = "trio-agent"

    def render(self) -> RenderableType:
        """The current view."""
        rec = self.recorder
        lines = "".join(rec.text).splitlines()[-_TEXT_LINES:]
        panel = Panel(
            Text(printable("\n".join(lines))),
            title=f"{self.title} · model call {rec.current.index}",
            title_align="left",
        )
        # Fixed widths, but for the latest output, which takes the rest of the
        # line: the columns stay put as rows come and go (80 columns and up).
        table = Table(
            box=box.SIMPLE_HEAD, expand=True, pad_edge=False, show_edge=False, collapse_padding=True
        )
        table.add_column("#", justify="right", width=2, no_wrap=True)
        table.add_column("tool", width=_TOOL_WIDTH, no_wrap=True, overflow="ellipsis")
        table.add_column("state", width=9, no_wrap=True)
        table.add_column("time", justify="right", width=7, no_wrap=True)
        table.add_column("latest output", ratio=1, no_wrap=True, overflow="ellipsis")
        now = rec.now()
        for row in rec.tools.values():
            table.add_row(
                str(row.call),
                Text(printable(row.summary)),  # Text: a "[" in a command is no markup
                Text(row.state, style=STYLES[row.state]),
                _duration(row, now),
                Text(row.progress or "", style="dim" if row.state != "executing" else ""),
            )
        return Group(panel, table) if rec.tools else panel

    async def run(self, console: Console, events: trio.abc.ReceiveChannel[Any]) -> None:
        """Feed every event of *events* to the recorder and keep the view live."""
        with Live(self.render(), console=console, auto_refresh=False) as live:
            async with trio.open_nursery() as nursery:

                async def tick() -> None:
                    while True:
                        live.update(self.render(), refresh=True)
                        await trio.sleep(_REFRESH)

                nursery.start_soon(tick)
                async for event in events:
                    self.recorder.feed(event)
                nursery.cancel_scope.cancel()
            live.update(self.render(), refresh=True)


def _duration(row: ToolRow, now: float) -> str:
    if row.started_at is None:
        return ""
    end = row.ended_at if row.ended_at is not None else now
    return f"{end - row.started_at:.2f}s"
