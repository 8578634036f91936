"""``trio-agent demo``: the scripted agent task, with the real built-in tools.

:func:`run_demo` runs the script of :mod:`._demo_script` in a temporary workspace:
a scripted model (no API key, no network) asks the real built-in tools for a status
report while its answers stream. The turn is shown live (:mod:`._live`, with
``rich``; plain lines without it) or as NDJSON events, then its timeline.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
import tempfile
from collections.abc import Generator
from pathlib import Path
from typing import IO, Any

import httpx
import trio

from .._loop import PermissionRules
from .._model import AnthropicClient
from .._options import TurnOptions
from .._session import Session
from ._args import positive_float
from ._errors import EXIT_INTERRUPTED, print_error
from ._interrupt import open_ctrl_c
from ._plain import console_for, has_rich
from ._render import event_line, print_plain, print_timeline, tool_started_record
from ._timeline import ToolRow, TurnRecorder, instrument

__all__ = ["add_demo_command", "run_demo"]


def add_demo_command(subparsers: Any) -> None:
    """Add ``demo`` to an argparse subparsers object."""
    demo = subparsers.add_parser(
        "demo",
        help="a scripted agent task on a temporary project (no API key, no network)",
        description="A scripted model asks the real built-in tools for a status report "
        "on a small project in a temporary directory; the tools run while the answer "
        "streams, and a timeline shows what that saved.",
    )
    demo.add_argument("--json", action="store_true", help="print one JSON event per line")
    demo.add_argument(
        "--speed", type=positive_float, default=1.0, help="stream this many times faster"
    )
    demo.add_argument(
        "--fault",
        choices=["reset"],
        default=None,
        help="break the first answer's stream (reset: after its first tool call) to show"
        " the recovery",
    )
    demo.set_defaults(func=_demo_command)


def _demo_command(args: argparse.Namespace) -> int:
    if not args.speed > 0:
        return print_error("--speed must be positive")
    return trio.run(run_demo, args.speed, args.json, None, args.fault)


@contextlib.contextmanager
def _quiet_models_log() -> Generator[None]:
    """The scripted model has no price nor window in the model data; saying so is
    noise in the demo (``trio_agent.models`` logs errors only, for the block)."""
    logger = logging.getLogger("trio_agent.models")
    old = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(old)


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
    # Lazy: the script needs the scripted model (trio_agent.testing, ~140 ms to import)
    # and the tools ~70 ms, which `trio-agent --version` and the other commands skip.
    from ..tools import Workspace, default_tools
    from ._demo_script import DEMO_MODEL, DEMO_PROMPT, demo_model, make_demo_workspace

    stream = out if out is not None else sys.stdout

    def started(row: ToolRow) -> None:
        if as_json:
            stream.write(json.dumps(tool_started_record(row)) + "\n")

    recorder = TurnRecorder(trio.current_time, on_tool_start=started)
    model = demo_model(speed=speed, fault=fault)
    with _quiet_models_log(), tempfile.TemporaryDirectory(prefix="trio-agent-demo-") as tmp:
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
                options=TurnOptions(
                    can_use_tool=PermissionRules(
                        allow=["Read", "Glob", "Grep", "Bash", "Write", "Edit"]
                    )
                ),
            )
            if as_json:
                with ctrl_c.aborts(session.abort):
                    async with session.submit(DEMO_PROMPT) as events:
                        async for event in events:
                            recorder.feed(event)
                            stream.write(event_line(event, recorder.now()))
                end = recorder.end
                stream.write(json.dumps({"type": "Timeline", **recorder.summary()}) + "\n")
            else:
                console = console_for(stream)
                console.print(f"[bold]>[/] {DEMO_PROMPT}", soft_wrap=True)
                console.print(f"[dim]workspace: {root} (scripted model, real tools)[/]")
                with ctrl_c.aborts(session.abort):
                    async with session.submit(DEMO_PROMPT) as events:
                        if has_rich():
                            from ._live import LiveView  # needs rich, an optional extra

                            await LiveView(recorder, title="scripted model").run(console, events)
                        else:  # a core-only install: the text and tool lines as they come
                            await print_plain(events, recorder, stream)
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
