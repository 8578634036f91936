"""The ``trio-agent`` command line.

``trio-agent stream [PROMPT] [--model M] [--max-tokens N] [--json]`` streams one
answer: text live, then each finished block, TTFT, stop reason and usage. Without
``ANTHROPIC_API_KEY`` it runs on an embedded scripted model (and says so on stderr).
Every subcommand is registered in :func:`build_parser` (the one place). :func:`main`
runs one and turns whatever ends it into an exit status and one or two lines on
stderr (:mod:`._errors`): 0 done, 1 failed, 2 usage error, 130 Ctrl+C.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO, cast

import httpx
import trio

from .._exceptions import APIError
from .._messages import AssistantMessage, ThinkingBlock, ToolUseBlock, UserMessage
from .._model import AnthropicClient, StreamEvent, StreamResult
from ._errors import EXIT_USAGE, RetryReporter, describe_error, prefixed, report_exception
from ._session_options import DEFAULT_MODEL, positive_int

__all__ = ["build_parser", "main"]

DEMO_PROMPT = "Look around this project and tell me what it does."


def _demo_model() -> Any:
    """The embedded scripted model: text, thinking and two tool calls, a few ms per token."""
    from ..testing import ScriptedAnswer, ScriptedModel, Timing

    answer = ScriptedAnswer(
        blocks=[
            ThinkingBlock(
                "The user wants an overview. Reading the README and listing the package "
                "will tell me what this project does.",
                "scripted-signature",
            ),
            _text_block(
                "I'll start by reading the README and listing the package, "
                "both at once, while I keep talking."
            ),
            ToolUseBlock("toolu_demo_1", "Read", {"path": "README.md"}),
            ToolUseBlock("toolu_demo_2", "Glob", {"pattern": "trio_agent/**/*.py"}),
        ],
        timing=Timing(first_event_delay=0.05, token_delay=0.004, json_chunk_size=6),
    )
    return ScriptedModel([answer])


def _text_block(text: str) -> Any:
    from .._messages import TextBlock

    return TextBlock(text)


class _Printer:
    """Plain (or rich, when installed) output of a stream."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.in_text = False
        try:
            from rich.console import Console

            self.console: Any = Console(file=out, highlight=False)
        except ImportError:  # a core-only install: plain text
            self.console = None

    def line(self, text: str, style: str | None = None) -> None:
        if self.in_text:
            self.out.write("\n")
            self.in_text = False
        if self.console is not None and style:
            self.console.print(text, style=style, markup=False, soft_wrap=True)
        else:
            self.out.write(text + "\n")
        self.out.flush()

    def item(self, item: Any) -> None:
        if isinstance(item, StreamEvent):
            text = item.text_delta
            if text:
                self.out.write(text)
                self.out.flush()
                self.in_text = True
        elif isinstance(item, AssistantMessage):
            for block in item.content:
                if isinstance(block, ToolUseBlock):
                    shown = json.dumps(dict(block.input), ensure_ascii=False)
                    valid = "" if block.is_valid else " (invalid input JSON)"
                    self.line(f"[tool_use {block.name} {block.id}] {shown}{valid}", "bold cyan")
                elif isinstance(block, ThinkingBlock):
                    self.line(f"[thinking] {block.thinking}", "dim italic")
        elif isinstance(item, StreamResult):
            usage = item.message.usage
            ttft = "n/a" if item.ttft is None else f"{item.ttft * 1000:.0f} ms"
            self.line(
                f"ttft: {ttft} · stop_reason: {item.message.stop_reason} · "
                f"usage: {usage.input_tokens} in / {usage.output_tokens} out",
                "green",
            )


def _json_line(item: Any) -> dict[str, Any]:
    """One stream item as JSON: ``{"type": <item class>, ...}`` like every --json output."""
    if isinstance(item, StreamEvent):
        return {"type": "StreamEvent", "event": item.data}
    if isinstance(item, AssistantMessage):
        return {
            "type": "BlockFinished",
            "block": item.content[0].to_api() if item.content else None,
        }
    assert isinstance(item, StreamResult)
    stats = item.statistics
    return {
        "type": "StreamResult",
        "message": item.message.to_api(),
        "ttft": item.ttft,
        "request_id": item.request_id,
        "statistics": {
            "events": stats.events,
            "pings": stats.pings,
            "ignored": stats.ignored,
            "stalls": stats.stalls,
            "stall_time": stats.stall_time,
            "retries": stats.retries,
        },
    }


async def _stream(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    http: httpx.AsyncClient | None = None
    if not os.environ.get("ANTHROPIC_API_KEY"):
        err.write("trio-agent: no ANTHROPIC_API_KEY set: using the embedded scripted model\n")
        http = httpx.AsyncClient(transport=_demo_model().transport())
        client = AnthropicClient(
            api_key="scripted", base_url="http://scripted.invalid", http_client=http
        )
    else:
        client = AnthropicClient()
    printer = _Printer(out)
    failure: APIError | None = None
    with RetryReporter(err) as retries:
        try:
            async with client.stream(
                model=args.model,
                max_tokens=args.max_tokens,
                messages=[UserMessage(args.prompt)],
            ) as items:
                async for item in items:
                    if args.json:
                        out.write(json.dumps(_json_line(item), ensure_ascii=False) + "\n")
                        out.flush()
                    else:
                        printer.item(item)
        except* APIError as group:
            failure = cast(APIError, group.exceptions[0])
        finally:
            if http is not None:
                with trio.move_on_after(5, shield=True):
                    await http.aclose()
    if failure is not None:
        where = client.base_url
        err.write(prefixed(describe_error(failure, base_url=where, attempts=retries.attempts)))
        return 1
    return 0


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
        from .. import __version__

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
    from ._agent import add_agent_commands
    from ._chat import add_chat_command

    add_agent_commands(commands)  # demo, run, replay
    add_chat_command(commands)
    from ._worker import add_worker_commands

    add_worker_commands(commands)  # worker, submit
    stream = commands.add_parser(
        "stream",
        help="stream one model answer, raw: text, blocks, TTFT, usage",
        description="Stream one answer of the Messages API without tools. Without "
        "ANTHROPIC_API_KEY it runs on an embedded scripted model.",
    )
    stream.add_argument("prompt", nargs="?", default=DEMO_PROMPT, help="the user prompt")
    stream.add_argument("--model", default=DEFAULT_MODEL, help="the model")
    stream.add_argument(
        "--max-tokens", type=positive_int, default=1024, help="output tokens at most"
    )
    stream.add_argument(
        "--json", action="store_true", help="print one JSON event per line (each has a 'type')"
    )
    stream.set_defaults(handler=_stream)
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
