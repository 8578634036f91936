"""``trio-agent stream [PROMPT]``: one model answer, raw, without tools.

``trio-agent stream [PROMPT] [--model M] [--max-tokens N] [--json]`` streams one
answer: text live, then each finished block, TTFT, stop reason and usage, against
the API ``run`` uses (``ANTHROPIC_API_KEY`` or ``ANTHROPIC_AUTH_TOKEN``,
``ANTHROPIC_BASE_URL`` or ``--base-url``). With none of them it plays an embedded
scripted answer, and says so on stderr ("scripted answer, no key").
"""

from __future__ import annotations

import argparse
import json
import os
from typing import TYPE_CHECKING, Any, TextIO, cast

import httpx
import trio

from .._exceptions import APIError
from .._messages import AssistantMessage, TextBlock, ThinkingBlock, ToolUseBlock, UserMessage
from .._model import AnthropicClient, StreamEvent, StreamResult
from ._args import positive_int
from ._errors import RetryReporter, describe_error, prefixed
from ._plain import rich_console
from ._provider import endpoint_of
from ._session_options import DEFAULT_MODEL

if TYPE_CHECKING:
    from ..testing import ScriptedModel

__all__ = ["add_stream_command"]

_PROMPT = "Look around this project and tell me what it does."


def add_stream_command(subparsers: Any) -> None:
    """Add ``stream`` to an argparse subparsers object."""
    stream = subparsers.add_parser(
        "stream",
        help="stream one model answer, raw: text, blocks, TTFT, usage",
        description="Stream one answer of the Messages API without tools. Without "
        "ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN or a base URL it plays a scripted answer.",
    )
    stream.add_argument("prompt", nargs="?", default=_PROMPT, help="the user prompt")
    stream.add_argument("--model", default=DEFAULT_MODEL, help="the model")
    stream.add_argument(
        "--base-url",
        default=None,
        help="the API's base URL (default: $ANTHROPIC_BASE_URL, else Anthropic's)",
    )
    stream.add_argument(
        "--max-tokens", type=positive_int, default=1024, help="output tokens at most"
    )
    stream.add_argument(
        "--json", action="store_true", help="print one JSON event per line (each has a 'type')"
    )
    stream.set_defaults(handler=_stream)


def _scripted_model() -> ScriptedModel:
    """The embedded scripted model: text, thinking and two tool calls, a few ms per token."""
    # Lazy: the scripted model (trio_agent.testing) takes ~140 ms to import, which
    # `trio-agent --version` and a stream against the API need not pay.
    from ..testing import ScriptedAnswer, ScriptedModel, Timing

    answer = ScriptedAnswer(
        blocks=[
            ThinkingBlock(
                "The user wants an overview. Reading the README and listing the package "
                "will tell me what this project does.",
                "scripted-signature",
            ),
            TextBlock(
                "I'll start by reading the README and listing the package, "
                "both at once, while I keep talking."
            ),
            ToolUseBlock("toolu_demo_1", "Read", {"path": "README.md"}),
            ToolUseBlock("toolu_demo_2", "Glob", {"pattern": "trio_agent/**/*.py"}),
        ],
        timing=Timing(first_event_delay=0.05, token_delay=0.004, json_chunk_size=6),
    )
    return ScriptedModel([answer])


class _Printer:
    """Plain (or rich, when installed) output of a stream."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.in_text = False
        self.console = rich_console(out)  # None on a core-only install: plain text

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
    configured = any(
        os.environ.get(name)
        for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL")
    )
    if not configured and args.base_url is None:  # as `run` would refuse, but show something
        err.write(
            "trio-agent: scripted answer, no key (ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN "
            "or --base-url talks to a real API)\n"
        )
        http = httpx.AsyncClient(transport=_scripted_model().transport())
        client = AnthropicClient(
            api_key="scripted", base_url="http://scripted.invalid", http_client=http
        )
    else:  # the key, the token and the base URL are read as `run` reads them
        client = AnthropicClient(base_url=args.base_url)
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
        where = endpoint_of(client)
        err.write(prefixed(describe_error(failure, endpoint=where, attempts=retries.attempts)))
        return 1
    return 0
