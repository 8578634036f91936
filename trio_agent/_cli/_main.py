"""The ``trio-agent`` command line.

``trio-agent stream [PROMPT] [--model M] [--max-tokens N] [--json]`` streams one
answer: text live, then each finished block, TTFT, stop reason and usage. Without
``ANTHROPIC_API_KEY`` it runs on an embedded scripted model (and says so on stderr).
Subcommands are registered in :func:`build_parser`; others (demo, run, replay) add
theirs there.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO

import httpx
import trio

from .._exceptions import TrioAgentError
from .._messages import AssistantMessage, ThinkingBlock, ToolUseBlock, UserMessage
from .._model import AnthropicClient, StreamEvent, StreamResult

__all__ = ["build_parser", "main"]

DEFAULT_MODEL = "claude-sonnet-4-5"
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
        except ImportError:  # pragma: no cover - rich is in the cli extra
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
    if isinstance(item, StreamEvent):
        return {"kind": "event", "type": item.type, "data": item.data}
    if isinstance(item, AssistantMessage):
        return {"kind": "block", "block": item.content[0].to_api() if item.content else None}
    assert isinstance(item, StreamResult)
    stats = item.statistics
    return {
        "kind": "result",
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


async def _stream(args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
    http: httpx.AsyncClient | None = None
    if not os.environ.get("ANTHROPIC_API_KEY"):
        err.write("trio-agent: no ANTHROPIC_API_KEY set: using the embedded scripted model\n")
        http = httpx.AsyncClient(transport=_demo_model().transport())
        client = AnthropicClient(api_key=None, base_url="http://scripted.invalid", http_client=http)
    else:
        client = AnthropicClient()
    printer = _Printer(out)
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
    finally:
        if http is not None:
            with trio.move_on_after(5, shield=True):
                await http.aclose()


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {value}")
    return value


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # a one-line error, exit status 2
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    """The ``trio-agent`` parser; each subcommand sets ``handler(args, out, err)``."""
    parser = _Parser(prog="trio-agent", description="Run LLM tool calls while the answer streams.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    stream = commands.add_parser("stream", help="stream one model answer to the terminal")
    stream.add_argument("prompt", nargs="?", default=DEMO_PROMPT, help="the user prompt")
    stream.add_argument("--model", default=DEFAULT_MODEL, help=f"model (default {DEFAULT_MODEL})")
    stream.add_argument("--max-tokens", type=_positive_int, default=1024, help="default 1024")
    stream.add_argument("--json", action="store_true", help="one JSON event per line")
    stream.set_defaults(handler=_stream)
    from ._agent import add_agent_commands

    add_agent_commands(commands)
    from ._worker import add_worker_commands

    add_worker_commands(commands)
    return parser


def main(
    argv: Sequence[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Run the command line; returns the exit status."""
    stdout: TextIO = out if out is not None else sys.stdout
    stderr: TextIO = err if err is not None else sys.stderr
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    if getattr(args, "func", None) is not None:  # demo, run, replay: (args) -> exit status
        return int(args.func(args))
    handler: Callable[[argparse.Namespace, TextIO, TextIO], Any] = args.handler
    try:
        trio.run(handler, args, stdout, stderr)
    except TrioAgentError as exc:
        stderr.write(f"trio-agent: {type(exc).__name__}: {exc}\n")
        return 1
    except KeyboardInterrupt:
        stderr.write("trio-agent: interrupted\n")
        return 130
    except BrokenPipeError:  # e.g. `trio-agent stream --json | head`
        return 141
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
