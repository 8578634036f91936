"""``trio-agent run``, and the turn of a command against the API that ``chat`` shares.

``add_run_command(subparsers)`` registers ``run``. What ``run`` and ``chat`` both
do is here too: check the API setup (:func:`check_api_setup`), open the command's
client (:func:`open_command_client`), build the session with the built-in tools
(:func:`make_session`), run one turn and print it (:func:`run_turn`), and report
how it ended (:func:`report_turn`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import AsyncGenerator, AsyncIterable, Callable, Sequence
from typing import IO, Any, cast

import trio

from .._exceptions import TrioAgentError
from .._loop import BlockFinished, TurnEnd
from .._messages import ToolUseBlock, Usage
from .._model import ModelClient
from .._session import Session
from .._tools import Tool
from ._ask import Asker, HeldOutput
from ._errors import EXIT_INTERRUPTED, RetryReporter, describe_error, prefixed, print_error
from ._interrupt import CtrlC, open_ctrl_c
from ._plain import has_rich
from ._provider import endpoint_of, provider_client, provider_of
from ._render import event_line, print_event, tool_started_record
from ._session_options import (
    DEFAULT_MODEL,
    add_session_options,
    open_session,
    permission_rules,
    split_rules,
)
from ._timeline import ToolRow, TurnRecorder, instrument

__all__ = [
    "add_mcp_option",
    "add_run_command",
    "check_api_setup",
    "command_client",
    "input_line",
    "make_session",
    "open_mcp_option",
    "open_command_client",
    "print_events",
    "report_turn",
    "run_prompt",
    "run_turn",
    "run_with_mcp",
    "warn_unknown_rules",
]


def add_run_command(subparsers: Any) -> None:
    """Add ``run`` to an argparse subparsers object."""
    run = subparsers.add_parser(
        "run",
        help="run one prompt against the Anthropic API, with the built-in tools",
        description="Run one prompt in a session against the Anthropic API "
        "(ANTHROPIC_API_KEY); Write, Edit and Bash are asked about unless --allow says "
        "otherwise. Ctrl+C aborts the turn, a second Ctrl+C exits.",
    )
    run.add_argument("prompt", help="what to ask the model")
    add_session_options(run)
    add_mcp_option(run)
    run.set_defaults(func=_run_command)


def add_mcp_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--mcp-config FILE`` (``run`` and ``chat``)."""
    parser.add_argument(
        "--mcp-config",
        metavar="FILE",
        default=None,
        help="add the tools of this .mcp.json's servers (default: none)",
    )


@contextlib.asynccontextmanager
async def open_mcp_option(args: argparse.Namespace) -> AsyncGenerator[Sequence[Tool]]:
    """The tools of ``--mcp-config``'s servers for the block (none without it)."""
    path = getattr(args, "mcp_config", None)
    if path is None:
        yield ()
        return
    # Lazy: the mcp extra is optional, and heavy (~0.6 s to import).
    from ..mcp import load_mcp_config, open_mcp_tools
    from ._mcp_prompts import terminal_authorize, terminal_elicit

    servers = load_mcp_config(path)
    # A server's OAuth sign-in opens the browser; its questions are asked here.
    authorize, elicit = terminal_authorize(), terminal_elicit()
    async with open_mcp_tools(servers, authorize=authorize, elicit=elicit) as mcp_tools:
        yield mcp_tools


def check_api_setup(args: argparse.Namespace) -> int | None:
    """Before ``run`` / ``chat``: the exit status of a one-line error, or None if all is
    set. Settles ``args.provider`` and strips a ``provider:`` prefix from ``args.model``."""
    try:
        args.provider, model = provider_of(args.provider, args.model or "")
    except ValueError as exc:
        return print_error(str(exc))
    args.model = model or None
    keys = (
        ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
        if args.provider == "anthropic"
        else ("OPENAI_API_KEY",)
    )
    if not any(os.environ.get(key) for key in keys):
        named = " or ".join(keys)
        return print_error(
            f"{named} is not set; export it, or try `trio-agent demo` (no key needed)"
        )
    if not os.path.isdir(args.workspace):
        return print_error(f"workspace {args.workspace!r} is not a directory")
    return None


def command_client(args: argparse.Namespace) -> ModelClient:
    """The client for ``run`` / ``chat``: by ``--provider`` or the model's prefix."""
    client, model = provider_client(args.provider, args.model or DEFAULT_MODEL, args.base_url)
    if args.model:  # else the session's default (the transcript's model when continuing)
        args.model = model
    return client


@contextlib.asynccontextmanager
async def open_command_client(
    args: argparse.Namespace, client: ModelClient | None = None
) -> AsyncGenerator[ModelClient]:
    """The client of a ``run`` / ``chat`` command for the block.

    A *client* given by the caller is used as it is (its owner decides whether it
    shares connections, and closes it). Otherwise the command makes its own
    (:func:`command_client`) and enters it (``async with client:``), so every
    request of the command (each turn of a chat) reuses one connection pool, which
    is closed when the block ends.
    """
    if client is not None:
        yield client
        return
    made = command_client(args)
    # Both clients are async context managers; a client that is not is used as is.
    if not isinstance(made, contextlib.AbstractAsyncContextManager):  # pragma: no cover
        yield made
        return
    async with cast("contextlib.AbstractAsyncContextManager[object]", made):
        yield made


def _run_command(args: argparse.Namespace) -> int:
    problem = check_api_setup(args)
    if problem is not None:
        return problem
    try:
        return trio.run(run_with_mcp, args)
    except TrioAgentError as exc:  # e.g. a malformed --mcp-config file
        return print_error(f"{type(exc).__name__}: {exc}")


async def run_with_mcp(args: argparse.Namespace) -> int:
    """:func:`run_prompt` with the tools of ``--mcp-config``'s servers, if given."""
    async with open_mcp_option(args) as mcp_tools:
        return await run_prompt(args, extra_tools=mcp_tools)


async def _ask_on_terminal(question: str) -> str | None:
    return await trio.to_thread.run_sync(input_line, question, abandon_on_cancel=True)


def input_line(question: str) -> str | None:
    """Ask *question* on stderr, read the answer from stdin (runs in a thread);
    None when stdin is no terminal (nobody to ask) or at its end."""
    if not sys.stdin.isatty():
        return None
    sys.stderr.write(question)
    sys.stderr.flush()
    return sys.stdin.readline() or None


def make_session(
    args: argparse.Namespace,
    client: ModelClient,
    recorder: TurnRecorder,
    err: IO[str],
    extra_tools: Sequence[Tool] = (),
    *,
    ask: Callable[..., Any],
) -> Session:
    """The session of ``run`` / ``chat``: the built-in tools and *extra_tools*
    (instrumented for *recorder*), the permission rules of the flags (a tool to ask
    about is asked with *ask*, an :class:`~._ask.Asker`), the transcript options."""
    # Lazy: the built-in tools take ~70 ms to import, which `trio-agent --version`,
    # `demo --help` or `replay` need not pay.
    from ..tools import Workspace, default_tools

    rules = permission_rules(args, ask)
    # A Read deny rule keeps Glob and Grep from listing or reading what it covers.
    tools = [*default_tools(Workspace(args.workspace), exclude=rules.read_denied), *extra_tools]
    warn_unknown_rules(args, [t.name for t in tools], err)
    return open_session(args, client, instrument(tools, recorder), can_use_tool=rules, err=err)


def warn_unknown_rules(args: argparse.Namespace, names: Sequence[str], err: IO[str]) -> None:
    """Say on *err* which ``--allow`` / ``--deny`` rules name no tool (``bash`` for
    ``Bash``): such a rule matches nothing, silently."""
    by_lower = {name.lower(): name for name in names}
    for flag, values in (("--allow", args.allow), ("--deny", args.deny)):
        for rule in split_rules(values):
            tool = rule.partition("(")[0]
            if tool in names:
                continue
            near = by_lower.get(tool.lower())
            hint = f" (did you mean {near}?)" if near else ""
            err.write(f"trio-agent: warning: {flag} {rule}: no tool is named {tool}{hint}\n")
    err.flush()


async def run_turn(
    session: Session,
    prompt: str,
    recorder: TurnRecorder,
    ctrl_c: CtrlC,
    out: HeldOutput,
    *,
    as_json: bool,
) -> TurnEnd | None:
    """One turn of *session*, printed as it goes (:func:`print_events`; on a
    terminal with rich, under the live view of its tool calls); Ctrl+C aborts it.

    Returns:
        The turn's ``TurnEnd`` (None if a second Ctrl+C cut it short).
    """
    recorder.reset()
    with ctrl_c.aborts(session.abort):
        async with session.submit(prompt) as events:
            if not as_json and out.isatty() and has_rich():
                from ._live import live_output  # needs rich, an optional extra

                async with live_output(out, recorder):
                    await print_events(events, recorder, out, as_json=False)
            else:
                await print_events(events, recorder, out, as_json=as_json)
    return recorder.end


async def print_events(
    events: AsyncIterable[object], recorder: TurnRecorder, out: HeldOutput, *, as_json: bool
) -> None:
    """Feed a turn's *events* to *recorder* and print them on *out* as they come:
    text as it streams, each tool call once its block has streamed, the results;
    with *as_json*, one JSON line per event with its time (``t``, seconds since the
    turn began), and a ``ToolStarted`` line when a tool really starts, as
    ``demo --json`` prints. What comes together is written together
    (:meth:`~._ask.HeldOutput.flush_soon`)."""

    def started(row: ToolRow) -> None:
        out.write(json.dumps(tool_started_record(row)) + "\n")
        out.flush_soon()

    if as_json:
        recorder.on_tool_start = started
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(out.flusher)
            async for event in events:
                recorder.feed(event)
                if as_json:
                    out.write(event_line(event, recorder.now()))
                else:
                    if isinstance(event, BlockFinished) and isinstance(event.block, ToolUseBlock):
                        block = event.block  # listed once it has streamed
                        out.show_call(block.id, block.name, block.input)
                    print_event(event, cast("IO[str]", out), shown=out.shown, flush=False)
                out.flush_soon()
            nursery.cancel_scope.cancel()
    finally:
        recorder.on_tool_start = None
        out.flush()


def report_turn(
    end: TurnEnd,
    session: Session,
    recorder: TurnRecorder,
    out: IO[str],
    err: IO[str],
    *,
    as_json: bool,
    usage: Usage,
    attempts: int = 1,
) -> None:
    """After a turn: a summary line on *out* (unless JSON), the error on *err*.

    *usage* is this command's: a continued transcript's earlier turns are not
    this run's (``session.usage`` counts them too).
    """
    if not as_json:
        parts = [
            str(end.reason),
            f"{end.turns} model call{'s' if end.turns != 1 else ''}",
            f"{usage.input_tokens} in / {usage.output_tokens} out tokens",
        ]
        # The cost at the published prices; unknown (None) is left out.
        cost = usage.cost_usd
        if cost is not None and round(cost, 4) > 0:  # no "$0.0000" noise
            parts.append(f"${cost:.4f}")
        if recorder.tools:
            parts.append(f"overlapping saved {recorder.total_saved():.2f}s")
        out.write(f"\n[{'; '.join(parts)}]\n")
        out.flush()
    if end.error is not None:
        where = endpoint_of(session.client)
        err.write(prefixed(describe_error(end.error, endpoint=where, attempts=attempts)))
    elif end.message and str(end.reason) != "completed":
        err.write(f"trio-agent: {end.message}\n")
    err.flush()


async def run_prompt(
    args: argparse.Namespace,
    *,
    client: ModelClient | None = None,
    out: IO[str] | None = None,
    err: IO[str] | None = None,
    extra_tools: Sequence[Tool] = (),
) -> int:
    """``trio-agent run``: one prompt in a session against the API.

    Write, Edit and Bash are asked about on the terminal (see ``--allow`` /
    ``--deny``). The first Ctrl+C aborts the turn (every tool call gets its
    result, the transcript stays valid, the turn's end is reported); a second one
    stops waiting at once. Retries are said on stderr as they happen.

    Args:
        args: the parsed ``run`` arguments.
        client: the client to use (default: by ``--provider`` or the model's
            ``openai:`` prefix, an ``OpenAIClient``, else an ``AnthropicClient``; for
            ``args.base_url``).
        out: where to print (default stdout).
        err: where errors, retries and questions go (default stderr).

    Returns:
        0 when the turn completed, 130 after Ctrl+C, 1 when it ended otherwise.
    """
    stream = HeldOutput(out if out is not None else sys.stdout)
    errors = err if err is not None else sys.stderr
    recorder = TurnRecorder(trio.current_time)
    ask = Asker(stream, errors, _ask_on_terminal, show_calls=not args.json)
    async with open_command_client(args, client) as model_client:
        session = make_session(args, model_client, recorder, errors, extra_tools, ask=ask)
        end = None
        try:
            with RetryReporter(errors) as retries:
                async with open_ctrl_c(errors) as ctrl_c:
                    end = await run_turn(
                        session, args.prompt, recorder, ctrl_c, stream, as_json=args.json
                    )
        finally:
            session.close()
    if end is not None:
        report_turn(
            end,
            session,
            recorder,
            cast("IO[str]", stream),
            errors,
            as_json=args.json,
            usage=end.usage,
            attempts=retries.attempts,
        )
    if ctrl_c.pressed:
        if ctrl_c.exited:
            errors.write("trio-agent: interrupted\n")
        return EXIT_INTERRUPTED
    if end is None:  # pragma: no cover - a turn always ends with TurnEnd
        return 1
    return 0 if end.reason == "completed" else 1
