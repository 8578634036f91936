"""The live view of a turn (rich) and ``trio-agent demo``.

:class:`LiveView` shows, while a turn runs, the text the model streams and a table
of its tool calls with their state (queued / executing / done / error / cancelled)
and latest progress line; :func:`print_timeline` then shows when each block
finished streaming, when each tool started and ended, when each stream ended, and
what overlapping the tools with the stream saved.

:func:`run_demo` runs the scripted demo task (:mod:`trio_agent._cli._demo`) with the
real built-in tools in a temporary workspace, live or as NDJSON events.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import attrs
import trio

from ._plain import PlainConsole, console_for, escape, has_rich
from ._timeline import ToolRow, TurnRecorder, instrument, printable

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

__all__ = ["LiveView", "event_record", "print_timeline", "run_demo"]

_STYLES = {
    "queued": "dim",
    "executing": "yellow",
    "done": "green",
    "error": "red",
    "cancelled": "magenta",
}
_TEXT_LINES = 14
_TOOL_WIDTH = 26
_REFRESH = 0.05


def event_record(event: object, t: float) -> dict[str, Any]:
    """One event as a JSON-ready dict: ``type``, ``t`` (seconds) and its fields."""
    from ._agent import event_fields

    return {"type": type(event).__name__, "t": round(t, 3), **event_fields(event)}


@attrs.define(eq=False)
class LiveView:
    """Renders a :class:`TurnRecorder` as streaming text over a table of tools."""

    recorder: TurnRecorder
    title: str = "trio-agent"

    def render(self) -> RenderableType:
        """The current view."""
        from rich import box
        from rich.console import Group
        from rich.panel import Panel
        from rich.table import Table
        from rich.text import Text

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
                Text(row.state, style=_STYLES[row.state]),
                _duration(row, now),
                Text(row.progress or "", style="dim" if row.state != "executing" else ""),
            )
        return Group(panel, table) if rec.tools else panel

    async def run(self, console: Console, events: trio.abc.ReceiveChannel[Any]) -> None:
        """Feed every event of *events* to the recorder and keep the view live."""
        from rich.live import Live

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


def _bar(begin: float, end: float, start: float, span: float, width: int, mark: str) -> str:
    """``····████····``: *mark* from *begin* to *end*, over ``start .. start + span``."""

    def at(t: float) -> int:
        return min(width - 1, max(0, int((t - start) / span * width)))

    cells = [" "] * width
    for i in range(at(begin), at(end) + 1):
        cells[i] = mark
    return "".join(cells)


def print_timeline(console: Console | PlainConsole, recorder: TurnRecorder) -> None:
    """The turn's timeline, per model call, and what overlapping saved."""
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
            width = 40
            stream_end = call.stream_ended_at if call.stream_ended_at is not None else end
            bar = _bar(call.started_at, stream_end, call.started_at, span, width, "─")
            console.print(f"  {'the model streaming':<28} [dim]{bar}[/]")
            for row in rows:
                ended = row.ended_at if row.ended_at is not None else row.started_at or 0.0
                bar = _bar(row.started_at or 0.0, ended, call.started_at, span, width, "█")
                summary = escape(f"{row.summary[:28]:<28}")
                console.print(f"  {summary} [{_STYLES[row.state]}]{bar}[/]")
        saved = recorder.saved(call)
        if saved >= 0.005:
            console.print(f"  overlapping saved [bold]{saved:.2f}s[/] in this call")
        console.print()
    console.print(
        f"Overlapping tools with the stream saved [bold green]{recorder.total_saved():.2f}s"
        "[/] compared to running them after each stream ended."
    )


async def _print_plain(
    events: trio.abc.ReceiveChannel[Any], recorder: TurnRecorder, out: IO[str]
) -> None:
    """The turn as plain lines (no rich): the text as it streams, each tool call the
    moment its block has streamed (while the answer goes on), its output lines."""
    from .._executor import ToolProgress
    from .._loop import BlockFinished, TextDelta
    from .._messages import AssistantMessage, ToolUseBlock
    from ._agent import preview, print_event

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
            end_line()
            out.write(f"    │ {preview(printable(str(event.data)), 74)}\n")
        elif not isinstance(event, AssistantMessage):  # its tool calls are shown already
            end_line()
            print_event(event, out)
        out.flush()
    end_line()


async def run_demo(
    speed: float = 1.0,
    as_json: bool = False,
    out: IO[str] | None = None,
    fault: str | None = None,
) -> int:
    """``trio-agent demo``: the scripted agent task with the real built-in tools.

    The first Ctrl+C aborts the turn (which is reported, the timeline too); a
    second one exits at once.

    Returns:
        0 when the turn completed, 130 after Ctrl+C, 1 otherwise.
    """
    import httpx

    from .._loop import PermissionRules
    from .._model import AnthropicClient
    from .._session import Session
    from ..testing import ScriptedModel
    from ..tools import Workspace, default_tools
    from ._demo import DEMO_MODEL, DEMO_PROMPT, demo_answers, make_demo_workspace
    from ._errors import EXIT_INTERRUPTED
    from ._interrupt import open_ctrl_c

    stream = out if out is not None else sys.stdout

    def started(row: ToolRow) -> None:
        if as_json:
            record = {"type": "ToolStarted", "t": round(row.started_at or 0.0, 3)}
            record |= {"tool_use_id": row.tool_use_id, "name": row.name}
            stream.write(json.dumps(record) + "\n")

    recorder = TurnRecorder(trio.current_time, on_tool_start=started)
    model = ScriptedModel(demo_answers(speed=speed, fault=fault))
    with tempfile.TemporaryDirectory(prefix="trio-agent-demo-") as tmp:
        root = Path(tmp)
        make_demo_workspace(root)
        async with (
            httpx.AsyncClient(transport=model.transport()) as http,
            open_ctrl_c(sys.stderr) as ctrl_c,
        ):
            session = Session(
                AnthropicClient(api_key="demo", base_url="http://scripted", http_client=http),
                instrument(default_tools(Workspace(root)), recorder),
                model=DEMO_MODEL,
                # the demo says yes to what `trio-agent run` would ask about
                can_use_tool=PermissionRules(
                    allow=["Read", "Glob", "Grep", "Bash", "Write", "Edit"]
                ),
            )
            if as_json:
                with ctrl_c.aborts(session.abort):
                    async with session.submit(DEMO_PROMPT) as events:
                        async for event in events:
                            recorder.feed(event)
                            stream.write(json.dumps(event_record(event, recorder.now())) + "\n")
                end = recorder.end
                stream.write(json.dumps({"type": "Timeline", **recorder.summary()}) + "\n")
            else:
                console = console_for(stream)
                console.print(f"[bold]>[/] {DEMO_PROMPT}", soft_wrap=True)
                console.print(f"[dim]workspace: {root} (scripted model, real tools)[/]")
                with ctrl_c.aborts(session.abort):
                    async with session.submit(DEMO_PROMPT) as events:
                        if has_rich():
                            await LiveView(recorder, title="scripted model").run(console, events)
                        else:  # a core-only install: the text and tool lines as they come
                            await _print_plain(events, recorder, stream)
                end = recorder.end
                console.print()
                print_timeline(console, recorder)
                report = root / "STATUS.md"
                if report.exists():
                    console.print(
                        f"[dim]The agent wrote STATUS.md ({len(report.read_text())} "
                        "bytes); the workspace is deleted now.[/]"
                    )
                if end is not None:
                    console.print(f"[bold]turn ended: {end.reason}[/] ({end.turns} model calls)")
    if ctrl_c.pressed:
        if ctrl_c.exited:
            sys.stderr.write("trio-agent: interrupted\n")
        return EXIT_INTERRUPTED
    return 0 if end is not None and str(end.reason) == "completed" else 1
