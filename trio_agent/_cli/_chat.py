"""``trio-agent chat``: an interactive session, turn after turn.

A prompt line (``> `` on stderr) reads what to ask; each turn is shown as it
streams, like ``run``, with the same permission questions and ``--allow`` /
``--deny`` rules, the same ``--transcript`` / ``--continue`` / ``--resume``.
Ctrl+C during a turn aborts the turn, not the program; at the prompt, Ctrl+C
twice (or ``/exit``, or end of input) leaves.

Everything read from stdin (prompts and permission answers) goes through one
:class:`LineReader`, whose single reading thread never loses a line to a
question that was given up on.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from typing import IO, Any, final

import attrs
import trio

from .._model import ModelClient
from .._permissions import Allow, Deny
from ._agent import check_api_setup, make_session, open_command_client, report_turn, run_turn
from ._errors import EXIT_INTERRUPTED, RetryReporter
from ._interrupt import open_ctrl_c
from ._render import preview
from ._session_options import add_session_options
from ._timeline import TurnRecorder

__all__ = ["LineReader", "add_chat_command", "run_chat"]

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
        read: returns the next line, ``""`` at the end (``sys.stdin.readline``).
        err: where the questions are written.
    """

    read: Callable[[], str]
    err: IO[str]
    _send: trio.MemorySendChannel[str] = attrs.field(init=False)
    _receive: trio.MemoryReceiveChannel[str] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._send, self._receive = trio.open_memory_channel[str](0)

    async def run(self) -> None:
        """Read lines until the end of the stream (run it in a nursery)."""
        async with self._send:
            while True:
                line = await trio.to_thread.run_sync(self.read, abandon_on_cancel=True)
                if not line:
                    return
                await self._send.send(line)

    async def ask(self, question: str) -> str | None:
        """Write *question*, wait for the next line (without its newline); None at EOF."""
        self.err.write(question)
        self.err.flush()
        try:
            return (await self._receive.receive()).rstrip("\r\n")
        except trio.EndOfChannel:
            return None


async def run_chat(
    args: argparse.Namespace,
    *,
    client: ModelClient | None = None,
    out: IO[str] | None = None,
    err: IO[str] | None = None,
    read: Callable[[], str] | None = None,
) -> int:
    """``trio-agent chat``.

    A client the command makes itself is entered for the whole chat, so every turn
    reuses one connection (a *client* passed in is used as it is).

    Returns:
        0 after ``/exit`` or the end of input, 130 after Ctrl+C twice.
    """
    async with open_command_client(args, client) as model_client:
        return await _chat(args, model_client, out, err, read)


async def _chat(
    args: argparse.Namespace,
    client: ModelClient,
    out: IO[str] | None,
    err: IO[str] | None,
    read: Callable[[], str] | None,
) -> int:
    stream = out if out is not None else sys.stdout
    errors = err if err is not None else sys.stderr
    lines = LineReader(read if read is not None else sys.stdin.readline, errors)

    async def ask(tool: Any, input: Mapping[str, Any], ctx: Any) -> Any:
        answer = await lines.ask(f"\nAllow {tool.name}({preview(dict(input), 100)})? [y/N] ")
        ok = answer is not None and answer.strip().lower() in ("y", "yes")
        return Allow() if ok else Deny("The user said no.")

    recorder = TurnRecorder(trio.current_time)
    session = make_session(args, client, recorder, errors, ask=ask)
    errors.write("trio-agent chat: type a prompt; /exit or Ctrl+D to leave\n")
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
                    if prompt is None or prompt.strip() in EXIT_COMMANDS:
                        break
                    if not prompt.strip():
                        continue
                    retries.reset()
                    end = await run_turn(
                        session, prompt, recorder, ctrl_c, stream, as_json=args.json
                    )
                    if end is not None:
                        report_turn(
                            end,
                            session,
                            recorder,
                            stream,
                            errors,
                            as_json=args.json,
                            attempts=retries.attempts,
                        )
                nursery.cancel_scope.cancel()
    finally:
        session.close()
    if ctrl_c.exited:
        errors.write("trio-agent: interrupted\n")
        return EXIT_INTERRUPTED
    return 0
