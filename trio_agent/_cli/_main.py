"""The ``trio-agent`` command line: the parser and the dispatch.

Every subcommand is registered in :func:`build_parser` (the one place), each by
the module that runs it: ``demo`` (:mod:`._demo`), ``run`` (:mod:`._agent`),
``replay`` (:mod:`._replay`), ``chat`` (:mod:`._chat`), ``worker`` and ``submit``
(:mod:`._worker`), ``stream`` (:mod:`._stream`). :func:`main` runs one and turns
whatever ends it into an exit status and one or two lines on stderr
(:mod:`._errors`): 0 done, 1 failed, 2 usage error, 130 Ctrl+C.
"""

from __future__ import annotations

import argparse
import atexit
import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TextIO

from .. import __version__
from ._errors import EXIT_BROKEN_PIPE, EXIT_USAGE, report_exception

__all__ = ["build_parser", "main"]


class _HelpFormatter(argparse.HelpFormatter):
    """Every option's help ends with its default, unless it says it already."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            "default" not in text
            and default not in (None, False, argparse.SUPPRESS)
            and action.option_strings
        ):
            text += " (default: %(default)s)"
        return text


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> Any:  # a one-line error, exit status 2
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _version() -> str:
    import importlib.metadata  # ~3 ms, which only --version and --help need

    try:
        return importlib.metadata.version("trio-agent")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree
        return __version__


def build_parser() -> argparse.ArgumentParser:
    """The ``trio-agent`` parser: every subcommand is registered here.

    A subcommand sets ``func`` (``(args) -> exit status``, running its own
    ``trio.run``) or ``handler`` (``async (args, out, err)``, run by :func:`main`).
    """
    parser = _Parser(
        prog="trio-agent",
        description="Run an LLM agent's tool calls while the model's answer is still "
        "streaming. Start with `trio-agent demo` (no API key needed).",
        epilog="`trio-agent COMMAND --help` tells more about each command.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    # Here, not at the top: `trio-agent --version` needs none of the commands.
    from ._agent import add_run_command
    from ._chat import add_chat_command
    from ._demo import add_demo_command
    from ._replay import add_replay_command
    from ._stream import add_stream_command
    from ._view import add_view_command
    from ._worker import add_worker_commands

    commands = parser.add_subparsers(
        dest="command", metavar="COMMAND", title="commands", parser_class=_Parser
    )
    add_demo_command(commands)
    add_run_command(commands)
    add_replay_command(commands)
    add_chat_command(commands)
    add_worker_commands(commands)  # worker, submit
    add_stream_command(commands)
    add_view_command(commands)
    return parser


def main(
    argv: Sequence[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Run the command line; returns the exit status (see the module docstring).

    Called as the process's command (no *argv*, *out* or *err*: the ``trio-agent``
    script, ``python -m trio_agent._cli``), it ends the process when the command is
    done (:func:`_exit_now`) instead of returning.
    """
    status = _main(argv, out, err)
    if argv is None and out is None and err is None and not _threads_to_wait_for():
        _exit_now(status)
    return status


def _threads_to_wait_for() -> bool:
    """Whether a non-daemon thread still runs (DBOS's, a thread pool's): then the
    interpreter's own shutdown waits for it, as it should."""
    main = threading.main_thread()
    return any(not t.daemon for t in threading.enumerate() if t is not main)


def _exit_now(status: int) -> NoReturn:
    """End the process with *status*: the ``atexit`` handlers run (logging's flush
    among them) and the standard streams are flushed, but the interpreter's teardown
    is skipped. Freeing its ~700 modules and ~80,000 objects one by one took 0.2-0.4 s
    after ``run``'s final answer on a loaded 2-core machine, and ~0.1 s of
    ``--version``; nothing of the command is left to do by then (the transcript is
    synced and closed at the end of each turn, the tools' processes are gone)."""
    try:
        atexit._run_exitfuncs()  # pyright: ignore[reportPrivateUsage]
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # the reader is gone (`| head`), or closed
                if stream is sys.stdout and status == 0:
                    status = EXIT_BROKEN_PIPE
        os._exit(status & 0xFF)


def _main(argv: Sequence[str] | None, out: TextIO | None, err: TextIO | None) -> int:
    stdout: TextIO = out if out is not None else sys.stdout
    stderr: TextIO = err if err is not None else sys.stderr
    if list(sys.argv[1:] if argv is None else argv) == ["--version"]:
        stdout.write(f"trio-agent {_version()}\n")  # before any command is imported
        return 0
    try:
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:
            return int(exc.code or 0)
        if args.command is None:  # bare `trio-agent`: what there is to do
            parser.print_help(stdout)
            return 0
        if getattr(args, "func", None) is not None:  # (args) -> exit status
            return int(args.func(args))
        handler: Callable[[argparse.Namespace, TextIO, TextIO], Any] = args.handler
        import trio

        return int(trio.run(handler, args, stdout, stderr) or 0)
    except BaseException as exc:  # Ctrl+C, errors, groups: one or two lines, no traceback
        if isinstance(exc, SystemExit):
            raise
        return report_exception(exc, stderr)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
