"""The agent subcommands of ``trio-agent``: ``demo``, ``run`` and ``replay``.

``add_agent_commands(subparsers)`` registers them on the console script's parser;
each sets ``func``, a function ``(args) -> exit code``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from typing import IO, Any

import trio

from ._exceptions import TrioAgentError
from ._messages import (
    AssistantMessage,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
)

__all__ = ["add_agent_commands"]

_TRANSCRIPT_TYPES = frozenset({"header", "user", "assistant", "history"})


def add_agent_commands(subparsers: Any) -> None:
    """Add ``demo``, ``run`` and ``replay`` to an argparse subparsers object."""
    demo = subparsers.add_parser(
        "demo",
        help="a scripted agent task on a temporary project (no API key, no network)",
    )
    demo.add_argument("--json", action="store_true", help="print NDJSON events")
    demo.add_argument(
        "--speed", type=float, default=1.0, help="stream this many times faster (default 1)"
    )
    demo.set_defaults(func=_demo_command)

    run = subparsers.add_parser("run", help="run one prompt against the Anthropic API")
    run.add_argument("prompt")
    run.add_argument("--model", default="claude-sonnet-4-5")
    run.add_argument("--base-url", default=None)
    run.add_argument("--workspace", default=".", help="the directory tools work in")
    run.add_argument("--transcript", default=None, help="append the conversation to this JSONL")
    run.add_argument("--max-tokens", type=int, default=8192)
    run.add_argument("--json", action="store_true", help="print NDJSON events")
    run.set_defaults(func=_run_command)

    replay = subparsers.add_parser(
        "replay", help="replay a recorded SSE stream or print a transcript (JSONL)"
    )
    replay.add_argument("file")
    replay.add_argument("--json", action="store_true", help="print NDJSON events")
    replay.set_defaults(func=_replay_command)


def _error(message: str) -> int:
    print(f"trio-agent: error: {message}", file=sys.stderr)
    return 2


# -- replay -------------------------------------------------------------------------


def _is_transcript(data: bytes) -> bool:
    first = data.lstrip().split(b"\n", 1)[0]
    try:
        record = json.loads(first)
    except ValueError:
        return False
    return isinstance(record, dict) and record.get("type") in _TRANSCRIPT_TYPES


def _replay_command(args: argparse.Namespace) -> int:
    try:
        with open(args.file, "rb") as f:
            data = f.read()
    except OSError as exc:
        return _error(f"cannot read {args.file}: {exc.strerror}")
    try:
        if _is_transcript(data):
            from ._transcript import read_transcript

            print_transcript(read_transcript(args.file).messages, sys.stdout, as_json=args.json)
        else:
            trio.run(replay_sse, data, sys.stdout, args.json)
    except TrioAgentError as exc:
        return _error(f"{type(exc).__name__}: {exc}")
    return 0


def _preview(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def print_transcript(messages: Sequence[Message], out: IO[str], *, as_json: bool = False) -> None:
    """Print a conversation: prompts, answers, tool calls and results."""
    for m in messages:
        if as_json:
            out.write(json.dumps(m.to_api()) + "\n")
            continue
        if isinstance(m, UserMessage):
            if isinstance(m.content, str):
                out.write(f"\n> {m.content}\n")
                continue
            for b in m.content:
                if isinstance(b, ToolResultBlock):
                    mark = "✗" if b.is_error else "✓"
                    content = b.content if isinstance(b.content, str) else "[blocks]"
                    out.write(f"  {mark} {b.tool_use_id}: {_preview(content)}\n")
                elif isinstance(b, TextBlock):
                    out.write(f"\n> {b.text}\n")
            continue
        _print_answer(m, out)


def _print_answer(m: AssistantMessage, out: IO[str]) -> None:
    for b in m.content:
        if isinstance(b, TextBlock):
            out.write(f"{b.text}\n")
        elif isinstance(b, ThinkingBlock):
            out.write(f"(thinking) {_preview(b.thinking)}\n")
        elif isinstance(b, ToolUseBlock):
            out.write(f"  → {b.name}({_preview(dict(b.input), 60)}) [{b.id}]\n")
    if m.stop_reason is not None:
        usage = m.usage
        out.write(
            f"  [{m.stop_reason}; {usage.input_tokens} in / {usage.output_tokens} out tokens]\n"
        )


async def _decode_sse(data: bytes) -> list[tuple[str, str]]:
    import httpx
    import httpx_sse

    def respond(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, content=data, request=request
        )

    found: list[tuple[str, str]] = []
    async with (
        httpx.AsyncClient(transport=httpx.MockTransport(respond)) as http,
        httpx_sse.aconnect_sse(http, "GET", "http://replay.invalid/") as source,
    ):
        async for sse in source.aiter_sse():
            found.append((sse.event, sse.data))
    return found


async def replay_sse(data: bytes, out: IO[str], as_json: bool = False) -> None:
    """Decode a recorded Messages API SSE stream and print it as it would stream.

    Raises:
        StreamError: the stream breaks the protocol or ends before ``message_stop``.
    """
    from ._accumulate import MessageAccumulator
    from ._exceptions import StreamTruncatedError

    acc = MessageAccumulator()
    for _name, raw in await _decode_sse(data):
        event = acc.decode(raw)
        completed = acc.feed(event)
        if as_json:
            out.write(json.dumps(event) + "\n")
            continue
        delta: Mapping[str, Any] = event.get("delta") or {}
        if event["type"] == "content_block_delta" and delta.get("type") == "text_delta":
            out.write(str(delta.get("text", "")))
        for item in completed:
            if isinstance(item, ToolUseBlock):
                out.write(f"\n  → {item.name}({_preview(dict(item.input), 60)}) [{item.id}]\n")
            elif isinstance(item, AssistantMessage):
                out.write("\n")
                usage = item.usage
                out.write(
                    f"[{item.stop_reason}; {usage.input_tokens} in / "
                    f"{usage.output_tokens} out tokens]\n"
                )
    if not acc.stopped:
        raise StreamTruncatedError("the recorded stream ends before message_stop")


# -- run ----------------------------------------------------------------------------


def _run_command(args: argparse.Namespace) -> int:
    if not os.environ.get("ANTHROPIC_API_KEY"):
        return _error(
            "ANTHROPIC_API_KEY is not set; export it, or try `trio-agent demo` (no key needed)"
        )
    if not os.path.isdir(args.workspace):
        return _error(f"workspace {args.workspace!r} is not a directory")
    try:
        return trio.run(run_prompt, args)
    except TrioAgentError as exc:
        return _error(f"{type(exc).__name__}: {exc}")


async def _ask(tool: Any, input: Mapping[str, Any], ctx: Any) -> Any:
    from ._permissions import Allow, Deny

    question = f"Allow {tool.name}({_preview(dict(input), 100)})? [y/N] "

    def prompt() -> str:
        return input_line(question)

    answer = await trio.to_thread.run_sync(prompt, abandon_on_cancel=True)
    return Allow() if answer.strip().lower() in ("y", "yes") else Deny("The user said no.")


def input_line(question: str) -> str:
    sys.stderr.write(question)
    sys.stderr.flush()
    return sys.stdin.readline()


async def run_prompt(args: argparse.Namespace) -> int:
    """``trio-agent run``: one prompt in a session against the real API.

    Ctrl+C aborts the turn (the history stays valid); a second Ctrl+C exits.
    """
    import signal

    from . import AnthropicClient, PermissionRules, Session  # pyright: ignore
    from .tools import Workspace, default_tools

    client = AnthropicClient(base_url=args.base_url)
    rules = PermissionRules.default(ask_callback=_ask)
    session = Session(
        client,
        default_tools(Workspace(args.workspace)),
        model=args.model,
        max_tokens=args.max_tokens,
        transcript_path=args.transcript,
        can_use_tool=rules,
    )
    reason = "error"
    with trio.open_signal_receiver(signal.SIGINT) as sigints:
        async with trio.open_nursery() as nursery:

            async def watch() -> None:
                count = 0
                async for _ in sigints:
                    count += 1
                    if count == 1:
                        print("\n[aborting the turn; Ctrl+C again to exit]", file=sys.stderr)
                        session.abort()
                    else:
                        raise KeyboardInterrupt

            nursery.start_soon(watch)
            async with session.submit(args.prompt) as events:
                async for event in events:
                    reason = _print_event(event, args.json) or reason
            nursery.cancel_scope.cancel()
    session.close()
    return 0 if reason == "completed" else 1


def _print_event(event: Any, as_json: bool) -> str | None:
    kind = type(event).__name__
    if as_json:
        print(json.dumps({"type": kind, **_event_fields(event)}), flush=True)
    elif kind == "TextDelta":
        print(event.text, end="", flush=True)
    elif isinstance(event, AssistantMessage):
        for b in event.tool_uses:
            print(f"\n  → {b.name}({_preview(dict(b.input), 60)})", flush=True)
    elif isinstance(event, UserMessage):
        for r in event.tool_results:
            mark = "✗" if r.is_error else "✓"
            content = r.content if isinstance(r.content, str) else "[blocks]"
            print(f"  {mark} {_preview(content)}", flush=True)
    if kind == "TurnEnd":
        if not as_json:
            print(f"\n[{event.reason}]")
        return str(event.reason)
    return None


def _event_fields(event: Any) -> dict[str, Any]:
    if isinstance(event, (AssistantMessage, UserMessage)):
        return {"message": event.to_api()}
    import attrs

    if attrs.has(type(event)):
        out: dict[str, Any] = {}
        for field in attrs.fields(type(event)):
            value = getattr(event, field.name)
            if isinstance(value, (str, int, float, bool)) or value is None:
                out[field.name] = value
            elif hasattr(value, "to_api"):
                out[field.name] = value.to_api()
        return out
    return {}


# -- demo ---------------------------------------------------------------------------


def _demo_command(args: argparse.Namespace) -> int:
    if not args.speed > 0:
        return _error("--speed must be positive")
    from ._live import run_demo

    return trio.run(run_demo, args.speed, args.json)
