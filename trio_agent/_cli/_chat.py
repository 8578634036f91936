"""``trio-agent chat``: an interactive session, turn after turn.

A prompt line (``> `` on stderr) reads what to ask; each turn is shown as it
streams, like ``run``, with the same permission questions and ``--allow`` /
``--deny`` rules, the same ``--transcript`` / ``--continue`` / ``--resume``.
Ctrl+C during a turn aborts the turn, not the program; at the prompt, Ctrl+C
twice (or ``/exit``, or end of input) leaves.

Everything read from stdin (prompts and permission answers) goes through one
:class:`LineReader`, whose single reading thread never loses a line to a
question that was given up on. On a terminal it reads with the standard
``readline`` (line editing, and a history in ``$XDG_STATE_HOME/trio-agent``); a
line starting with ``/`` is a command (``/help`` lists them), never sent to the
model. ``--mcp-config`` adds MCP tools, as for ``run``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any, cast, final

import attrs
import trio

from .._messages import Usage
from .._model import ModelClient
from .._tools import Tool
from ._agent import (
    add_mcp_option,
    check_api_setup,
    make_session,
    open_command_client,
    open_mcp_option,
    report_turn,
    run_turn,
)
from ._ask import Asker, HeldOutput
from ._errors import EXIT_INTERRUPTED, RetryReporter
from ._interrupt import open_ctrl_c
from ._session_options import add_session_options
from ._timeline import TurnRecorder

__all__ = [
    "HELP",
    "LineReader",
    "add_chat_command",
    "history_path",
    "run_chat",
    "stream_reader",
    "terminal_reader",
]

EXIT_COMMANDS = frozenset({"/exit", "/quit"})


def add_chat_command(subparsers: Any) -> None:
    """Add ``chat`` to an argparse subparsers object."""
    chat = subparsers.add_parser(
        "chat",
        help="an interactive session with the built-in tools, turn after turn",
        description="An interactive session against the Anthropic API (ANTHROPIC_API_KEY). "
        "Type a prompt; Ctrl+C aborts the running turn; /exit, end of input "
        "or Ctrl+C twice at the prompt leaves.",
    )
    add_session_options(chat)
    add_mcp_option(chat)
    chat.set_defaults(func=_chat_command)


def _chat_command(args: argparse.Namespace) -> int:
    problem = check_api_setup(args)
    if problem is not None:
        return problem
    return trio.run(run_chat, args)


@final
@attrs.define(eq=False)
class LineReader:
    """Lines of a text stream, read by one thread, handed out on request.

    Args:
        read: writes a question and returns the next line, ``""`` at the end
            (:func:`terminal_reader` or :func:`stream_reader`).
    """

    read: Callable[[str], str]
    _questions: trio.MemorySendChannel[str] = attrs.field(init=False)
    _asked: trio.MemoryReceiveChannel[str] = attrs.field(init=False)
    _send: trio.MemorySendChannel[str] = attrs.field(init=False)
    _receive: trio.MemoryReceiveChannel[str] = attrs.field(init=False)
    _reading: bool = attrs.field(init=False, default=False)

    def __attrs_post_init__(self) -> None:
        self._questions, self._asked = trio.open_memory_channel[str](1)
        self._send, self._receive = trio.open_memory_channel[str](0)

    async def run(self) -> None:
        """Read a line per question until the end of the stream (run it in a nursery)."""
        async with self._send:
            async for question in self._asked:
                line = await trio.to_thread.run_sync(self.read, question, abandon_on_cancel=True)
                if not line:
                    return
                await self._send.send(line)

    async def ask(self, question: str) -> str | None:
        """Ask *question*, wait for the next line (without its newline); None at EOF.

        A question given up on (Ctrl+C) leaves its read going: its line answers
        the next question, so no line is lost.
        """
        if not self._reading:
            self._reading = True
            self._questions.send_nowait(question)
        try:
            line = await self._receive.receive()
        except trio.EndOfChannel:
            return None
        self._reading = False
        return line.rstrip("\r\n")


def history_path() -> Path:
    """The chat's readline history: ``$XDG_STATE_HOME/trio-agent/chat_history``
    (``~/.local/state/trio-agent/chat_history`` by default)."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return Path(state) / "trio-agent" / "chat_history"


def terminal_reader(history: Path) -> Callable[[str], str]:
    """``input()`` with the standard ``readline``: line editing, and the history of
    *history* (loaded now, each line appended as it is read)."""
    try:
        import readline
    except ImportError:  # pragma: no cover - Windows without pyreadline
        readline = None
    if readline is not None:
        with contextlib.suppress(OSError):
            readline.read_history_file(history)

    def read(question: str) -> str:
        try:
            line = input(question)
        except EOFError:
            return ""
        if readline is not None and line.strip():
            with contextlib.suppress(OSError):
                history.parent.mkdir(parents=True, exist_ok=True)
                history.touch()  # append_history_file needs the file
                readline.append_history_file(1, history)
        return line + "\n"

    return read


def stream_reader(read: Callable[[], str], err: IO[str]) -> Callable[[str], str]:
    """Questions on *err*, lines from *read* (``sys.stdin.readline``: not a terminal)."""

    def ask(question: str) -> str:
        err.write(question)
        err.flush()
        return read()

    return ask


HELP = """\
commands:
  /help          this list
  /exit, /quit   leave (Ctrl+D, or Ctrl+C twice at the prompt, too)
anything else is sent to the model; Ctrl+C aborts the running turn"""


async def run_chat(
    args: argparse.Namespace,
    *,
    client: ModelClient | None = None,
    out: IO[str] | None = None,
    err: IO[str] | None = None,
    read: Callable[[str], str] | None = None,
    terminal: bool | None = None,
) -> int:
    """``trio-agent chat``.

    A client the command makes itself is entered for the whole chat, so every turn
    reuses one connection (a *client* passed in is used as it is).

    Args:
        read: writes a question, returns the next line (default: ``input()`` with
            readline on a terminal, else stdin's lines, questions on stderr).
        terminal: whether permission questions can be asked (default: stdin is a
            terminal; True when *read* is given).

    Returns:
        0 after ``/exit`` or the end of input, 130 after Ctrl+C twice.
    """
    errors = err if err is not None else sys.stderr
    if read is None:
        terminal = sys.stdin.isatty()
        read = (
            terminal_reader(history_path())
            if terminal
            else stream_reader(sys.stdin.readline, errors)
        )
    terminal = True if terminal is None else terminal
    async with open_command_client(args, client) as model_client, open_mcp_option(args) as mcp:
        return await _chat(args, model_client, out, errors, read, terminal, mcp)


async def _chat(
    args: argparse.Namespace,
    client: ModelClient,
    out: IO[str] | None,
    errors: IO[str],
    read: Callable[[str], str],
    terminal: bool,
    extra_tools: Sequence[Tool],
) -> int:
    stream = HeldOutput(out if out is not None else sys.stdout)
    lines = LineReader(read)

    async def read_answer(question: str) -> str | None:
        return await lines.ask(question) if terminal else None

    recorder = TurnRecorder(trio.current_time)
    ask = Asker(stream, errors, read_answer, show_calls=not args.json)
    session = make_session(args, client, recorder, errors, extra_tools, ask=ask)
    errors.write("trio-agent chat: type a prompt; /help lists the commands, /exit leaves\n")
    used = Usage(cost_usd=0.0)  # this chat's, not a continued transcript's
    try:
        with RetryReporter(errors) as retries:
            async with open_ctrl_c(errors) as ctrl_c, trio.open_nursery() as nursery:
                nursery.start_soon(lines.run)
                armed = True  # the next Ctrl+C at the prompt only clears it
                while True:
                    prompt: str | None = ""
                    with trio.CancelScope() as waiting:
                        if armed:
                            with ctrl_c.aborts(waiting.cancel, "Ctrl+C again or /exit to leave"):
                                prompt = await lines.ask("> ")
                        else:
                            prompt = await lines.ask("> ")
                    if waiting.cancelled_caught:
                        armed = False
                        continue
                    armed = True
                    command = "" if prompt is None else prompt.strip()
                    if prompt is None or command in EXIT_COMMANDS:
                        break
                    if not command:
                        continue
                    if command.startswith("/") and " " not in command:
                        if command != "/help":
                            errors.write(f"trio-agent: unknown command {command}\n")
                        errors.write(HELP + "\n")
                        errors.flush()
                        continue
                    retries.reset()
                    end = await run_turn(
                        session, prompt, recorder, ctrl_c, stream, as_json=args.json
                    )
                    if end is not None:
                        used = used + end.usage
                        report_turn(
                            end,
                            session,
                            recorder,
                            cast("IO[str]", stream),
                            errors,
                            as_json=args.json,
                            usage=used,
                            attempts=retries.attempts,
                        )
                nursery.cancel_scope.cancel()
    finally:
        session.close()
    if ctrl_c.exited:
        errors.write("trio-agent: interrupted\n")
        return EXIT_INTERRUPTED
    return 0
