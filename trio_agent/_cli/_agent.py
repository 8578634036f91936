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

from .._exceptions import TrioAgentError
from .._messages import (
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
    run.add_argument("--mcp-config", default=None, help="add the tools of a .mcp.json's servers")
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
            from .._session import read_transcript

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
    from .._exceptions import StreamTruncatedError
    from .._model import MessageAccumulator

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
        return trio.run(run_with_mcp, args)
    except TrioAgentError as exc:
        return _error(f"{type(exc).__name__}: {exc}")


async def _ask(tool: Any, input: Mapping[str, Any], ctx: Any) -> Any:
    from .._permissions import Allow, Deny

    question = f"\nAllow {tool.name}({_preview(dict(input), 100)})? [y/N] "

    def prompt() -> str:
        return input_line(question)

    answer = await trio.to_thread.run_sync(prompt, abandon_on_cancel=True)
    return Allow() if answer.strip().lower() in ("y", "yes") else Deny("The user said no.")


def input_line(question: str) -> str:
    """Ask *question* on stderr, read the answer from stdin (runs in a thread)."""
    sys.stderr.write(question)
    sys.stderr.flush()
    return sys.stdin.readline()


async def run_with_mcp(args: argparse.Namespace) -> int:
    """:func:`run_prompt` with the tools of ``--mcp-config``'s servers, if given."""
    path = getattr(args, "mcp_config", None)
    if path is None:
        return await run_prompt(args)
    from ..mcp import load_mcp_config, open_mcp_tools

    async with open_mcp_tools(load_mcp_config(path)) as mcp_tools:
        return await run_prompt(args, extra_tools=mcp_tools)


async def run_prompt(
    args: argparse.Namespace,
    *,
    client: Any = None,
    out: IO[str] | None = None,
    extra_tools: Sequence[Any] = (),
) -> int:
    """``trio-agent run``: one prompt in a session against the API.

    Write, Edit and Bash are asked about on the terminal. The first Ctrl+C aborts
    the turn (every tool call gets its result, the transcript stays valid); a
    second one stops waiting and exits with status 130.

    Args:
        args: the parsed ``run`` arguments.
        client: the client to use (default: an ``AnthropicClient`` for
            ``args.base_url`` and ``ANTHROPIC_API_KEY``).
        out: where to print (default stdout).

    Returns:
        0 when the turn completed, 1 when it ended otherwise, 130 on a second Ctrl+C.
    """
    import signal

    from .._loop import PermissionRules, TurnEnd
    from .._model import AnthropicClient
    from .._session import Session
    from ..tools import Workspace, default_tools
    from ._timeline import TurnRecorder, instrument

    stream = out if out is not None else sys.stdout
    recorder = TurnRecorder(trio.current_time)
    session = Session(
        client if client is not None else AnthropicClient(base_url=args.base_url),
        instrument([*default_tools(Workspace(args.workspace)), *extra_tools], recorder),
        model=args.model,
        max_tokens=args.max_tokens,
        transcript_path=args.transcript,
        can_use_tool=PermissionRules.default(ask_callback=_ask),
    )
    aborted = exited = False
    try:
        with trio.open_signal_receiver(signal.SIGINT) as sigints:
            async with trio.open_nursery() as nursery:

                async def watch() -> None:
                    nonlocal aborted, exited
                    async for _ in sigints:
                        if not aborted:
                            aborted = True
                            sys.stderr.write("\n[aborting the turn; Ctrl+C again to exit]\n")
                            session.abort()
                        else:
                            exited = True
                            nursery.cancel_scope.cancel()

                nursery.start_soon(watch)
                async with session.submit(args.prompt) as events:
                    async for event in events:
                        recorder.feed(event)
                        print_event(event, stream, as_json=args.json)
                nursery.cancel_scope.cancel()
    finally:
        session.close()
    if exited:
        sys.stderr.write("trio-agent: interrupted\n")
        return 130
    end = recorder.end
    if end is None:  # pragma: no cover - a turn always ends with TurnEnd
        return 1
    if not args.json:
        usage = session.usage
        cost = session.cost
        parts = [
            str(end.reason),
            f"{end.turns} model call{'s' if end.turns != 1 else ''}",
            f"{usage.input_tokens} in / {usage.output_tokens} out tokens",
        ]
        if cost is not None:
            parts.append(f"~${cost:.4f}")
        if recorder.tools:
            parts.append(f"overlapping saved {recorder.total_saved():.2f}s")
        stream.write(f"\n[{'; '.join(parts)}]\n")
        if end.message:
            stream.write(f"{end.message}\n")
    assert isinstance(end, TurnEnd)
    return 0 if end.reason == "completed" else 1


def print_event(event: object, out: IO[str], *, as_json: bool = False) -> None:
    """Print one loop event: NDJSON, or text as it streams and tool calls and results."""
    from .._executor import ToolProgress
    from .._loop import ModelFallback, TextDelta

    if as_json:
        out.write(json.dumps({"type": type(event).__name__, **event_fields(event)}) + "\n")
    elif isinstance(event, TextDelta):
        out.write(event.text)
    elif isinstance(event, AssistantMessage):
        out.write("\n")
        for b in event.tool_uses:
            out.write(f"  → {b.name}({_preview(dict(b.input), 60)})\n")
    elif isinstance(event, ToolProgress):
        out.write(f"    {_preview(str(event.data), 76)}\n")
    elif isinstance(event, UserMessage):
        for r in event.tool_results:
            mark = "✗" if r.is_error else "✓"
            content = r.content if isinstance(r.content, str) else "[blocks]"
            out.write(f"  {mark} {_preview(content)}\n")
    elif isinstance(event, ModelFallback):
        out.write(f"\n[overloaded: switching from {event.from_model} to {event.to_model}]\n")
    out.flush()


def event_fields(event: Any) -> dict[str, Any]:
    """The JSON-ready fields of a loop event (messages and blocks in their API form;
    ``TurnEnd.messages`` left out: the message events tell the history)."""
    if isinstance(event, (AssistantMessage, UserMessage)):
        return {"message": event.to_api()}
    import attrs

    if not attrs.has(type(event)):
        return {}
    out: dict[str, Any] = {}
    for field in attrs.fields(type(event)):
        if field.name == "messages":
            continue
        value = _json_value(getattr(event, field.name))
        if value is not _SKIP:
            out[field.name] = value
    return out


_SKIP = object()


def _json_value(value: Any) -> Any:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if hasattr(value, "to_api"):
        return value.to_api()
    if isinstance(value, BaseException):
        return f"{type(value).__name__}: {value}"
    if isinstance(value, (tuple, list)):
        items = [_json_value(v) for v in value]  # pyright: ignore[reportUnknownVariableType]
        return _SKIP if any(i is _SKIP for i in items) else items
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return _SKIP
    return value


# -- demo ---------------------------------------------------------------------------


def _demo_command(args: argparse.Namespace) -> int:
    if not args.speed > 0:
        return _error("--speed must be positive")
    from ._live import run_demo

    return trio.run(run_demo, args.speed, args.json)
