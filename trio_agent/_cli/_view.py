"""``trio-agent view [PATH ...]``: the local session viewer (:mod:`trio_agent._viewer`).

Serves the sessions of the transcript files and event logs given (a directory: its
``*.jsonl`` files; none: the current directory) and of ``--database-url`` on
127.0.0.1, prints the URL and opens a browser when run in a terminal. Runs until
Ctrl+C. Needs the ``view`` extra (hypercorn).
"""

from __future__ import annotations

import argparse
import signal
import sys
from typing import Any, TextIO

import trio

from ._errors import EXIT_USAGE

__all__ = ["add_view_command"]

DEFAULT_PORT = 8737


def add_view_command(subparsers: Any) -> None:
    """Add ``view`` to an argparse subparsers object."""
    view = subparsers.add_parser(
        "view",
        help="look at sessions in a local web page (transcripts, event logs, a database)",
        description="Serve a read-only web page on 127.0.0.1 listing the sessions of the "
        "files given (transcripts, `--json` event logs; a directory: its *.jsonl files) "
        "and of a durable database, newest first; each session's page shows its "
        "conversation and each model call's timeline, and follows a file as it grows.",
    )
    view.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="transcript files, event logs or directories (default: the current directory)",
    )
    view.add_argument(
        "--database-url",
        default=None,
        help="also list the durable sessions of this database (read only)",
    )
    view.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help="the port on 127.0.0.1 (0: any free one)"
    )
    view.add_argument("--no-open", action="store_true", help="print the URL, open no browser")
    view.set_defaults(handler=_view)


async def _view(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    import importlib.util

    if importlib.util.find_spec("hypercorn") is None:  # the extra: say so first
        return _error("`trio-agent view` needs hypercorn: pip install 'trio-agent[view]'", err)
    if not 0 <= args.port <= 65535:
        return _error(f"--port must be 0-65535, not {args.port}", err)
    from .._viewer import DatabaseSource, Library, serve_viewer

    database = DatabaseSource(args.database_url) if args.database_url else None
    library = Library(args.paths or ["."], database)
    interrupted = False
    try:
        # Ctrl+C is taken here, not raised wherever it lands: hypercorn swallows a
        # KeyboardInterrupt raised in one of its own tasks, and its server just ends.
        with trio.open_signal_receiver(signal.SIGINT) as signals:
            async with trio.open_nursery() as nursery:
                try:
                    url: str = await nursery.start(_serve, serve_viewer, library, args.port)
                except OSError as exc:
                    err.write(
                        f"trio-agent: error: cannot listen on 127.0.0.1:{args.port}:"
                        f" {exc.strerror or exc} (--port 0 takes any free port)\n"
                    )
                    return 1
                out.write(f"trio-agent view: {url}/ (Ctrl+C to stop)\n")
                out.flush()
                if not args.no_open and sys.stdout.isatty():
                    import webbrowser

                    await trio.to_thread.run_sync(
                        webbrowser.open, f"{url}/", abandon_on_cancel=True
                    )
                async for _ in signals:
                    interrupted = True
                    nursery.cancel_scope.cancel(reason="Ctrl+C")
                    break
    finally:
        if database is not None:
            database.close()
    if interrupted:
        raise KeyboardInterrupt  # said, with exit status 130, as by every command
    return 0


def _error(message: str, err: TextIO) -> int:
    err.write(f"trio-agent: error: {message}\n")
    return EXIT_USAGE


async def _serve(
    serve_viewer: Any, library: Any, port: int, task_status: trio.TaskStatus[str]
) -> None:
    await serve_viewer(library, port=port, task_status=task_status)
