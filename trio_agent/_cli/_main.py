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
import importlib.metadata
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO

import trio

from .. import __version__
from ._agent import add_run_command
from ._chat import add_chat_command
from ._demo import add_demo_command
from ._errors import EXIT_USAGE, report_exception
from ._replay import add_replay_command
from ._stream import add_stream_command
from ._worker import add_worker_commands

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
    commands = parser.add_subparsers(
        dest="command", metavar="COMMAND", title="commands", parser_class=_Parser
    )
    add_demo_command(commands)
    add_run_command(commands)
    add_replay_command(commands)
    add_chat_command(commands)
    add_worker_commands(commands)  # worker, submit
    add_stream_command(commands)
    return parser


def main(
    argv: Sequence[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Run the command line; returns the exit status (see the module docstring)."""
    stdout: TextIO = out if out is not None else sys.stdout
    stderr: TextIO = err if err is not None else sys.stderr
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
        return int(trio.run(handler, args, stdout, stderr) or 0)
    except BaseException as exc:  # Ctrl+C, errors, groups: one or two lines, no traceback
        if isinstance(exc, SystemExit):
            raise
        return report_exception(exc, stderr)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
