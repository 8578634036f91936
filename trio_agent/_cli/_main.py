"""The ``trio-agent`` command line: the parser and the dispatch.

Every subcommand is listed in :data:`COMMANDS` (the one place: a name, the module
that registers and runs it), and :func:`build_parser` imports only the module of
the command asked for (all of them for ``trio-agent --help``). :func:`main` runs one and turns
whatever ends it into an exit status and one or two lines on stderr
(:mod:`._errors`): 0 done, 1 failed, 2 usage error, 130 Ctrl+C.
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import os
import sys
import threading
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn, TextIO

from .. import __version__
from ._errors import EXIT_BROKEN_PIPE, EXIT_USAGE, report_exception

__all__ = ["COMMANDS", "build_parser", "main"]


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


class _VersionAction(argparse.Action):
    """``--version``, as argparse's own, without formatting the version for a
    parser that is not asked for it."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        kwargs.update(nargs=0, default=argparse.SUPPRESS)
        kwargs.setdefault("help", "show the program's version and exit")
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        parser.exit(message=f"{parser.prog} {_version()}\n")


def _version() -> str:
    """The package's version: ``trio_agent.__version__``, which is the installed
    distribution's (tests/cli/test_cli_startup.py checks), without the ~60 ms of CPU
    ``importlib.metadata`` costs to import."""
    return __version__


#: Every command: its name -> its module and the function there that registers it on
#: the subparsers (``add_..._command(subparsers)``). A new command is one line here.
#: One function may register several commands (``worker`` and ``submit``): each is
#: listed, with the same function.
COMMANDS: Mapping[str, tuple[str, str]] = {
    "demo": ("._demo", "add_demo_command"),
    "run": ("._agent", "add_run_command"),
    "replay": ("._replay", "add_replay_command"),
    "chat": ("._chat", "add_chat_command"),
    "worker": ("._worker", "add_worker_commands"),
    "submit": ("._worker", "add_worker_commands"),
    "stream": ("._stream", "add_stream_command"),
    "view": ("._view", "add_view_command"),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``trio-agent`` parser, with every command of :data:`COMMANDS`; with
    *command* (one of them), that command only: its module alone is imported, so a
    command pays for none of the others' imports.

    A subcommand sets ``func`` (``(args) -> exit status``, running its own
    ``trio.run``) or ``handler`` (``async (args, out, err)``, run by :func:`main`).
    """
    parser = _Parser(
        prog="trio-agent",
        description="Run an LLM agent's tool calls while the model's answer is still "
        "streaming. Start with `trio-agent demo` (no API key needed).",
        epilog="`trio-agent COMMAND --help` tells more about each command.",
    )
    parser.add_argument("--version", action=_VersionAction)
    commands = parser.add_subparsers(
        dest="command", metavar="COMMAND", title="commands", parser_class=_Parser
    )
    chosen = COMMANDS.values() if command not in COMMANDS else [COMMANDS[command or ""]]
    for module, function in dict.fromkeys(chosen):  # each function once, in order
        # Here, not at the top: `trio-agent --version` needs none of the commands.
        getattr(importlib.import_module(module, __package__), function)(commands)
    return parser


def _command_in(argv: Sequence[str]) -> str | None:
    """The command *argv* names (its first word that is no option), if any."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def main(
    argv: Sequence[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Run the command line; returns the exit status (see the module docstring).

    Called as the process's command (no *argv*, *out* or *err*: the ``trio-agent``
    script, ``python -m trio_agent._cli``), it ends the process when the command is
    done (:func:`_exit_now`) instead of returning.
    """
    command = argv is None and out is None and err is None
    if command:
        _defer_httpx_cli()
    status = _main(argv, out, err)
    if command and not _threads_to_wait_for():
        _exit_now(status)
    return status


def _defer_httpx_cli() -> None:
    """Keep ``import httpx`` from importing httpx's own command line.

    httpx imports it (``httpx._main``: click, rich's syntax highlighting, pygments'
    lexers, about 40 ms of an idle machine's CPU, half a second of a loaded one's)
    whenever click and rich are installed, only to offer ``httpx.main``. This
    process is ``trio-agent`` and never runs it, so until httpx is imported its
    ``_main`` is a stand-in whose ``main`` loads the real module and runs it.
    """
    if "httpx" in sys.modules or "httpx._main" in sys.modules:
        return
    stand_in = types.ModuleType("httpx._main", "httpx's command line, loaded on first use.")

    def main(*args: Any, **kwargs: Any) -> Any:
        if sys.modules.get("httpx._main") is stand_in:
            del sys.modules["httpx._main"]
        return importlib.import_module("httpx._main").main(*args, **kwargs)

    stand_in.main = main  # type: ignore[attr-defined]
    sys.modules["httpx._main"] = stand_in


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
        parser = build_parser(_command_in(sys.argv[1:] if argv is None else argv))
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
