"""``trio-agent replay FILE``: print a transcript, or replay a recorded SSE stream.

A transcript (the JSONL that ``run`` / ``chat --transcript`` write) is printed as a
conversation: prompts, answers, tool calls and results (:func:`print_transcript`).
A recorded Messages API SSE stream is decoded and printed as it would have
streamed (:func:`replay_sse`). ``--json`` prints one JSON record per line instead.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from typing import IO, Any, Protocol, final

import httpx
import httpx_sse
import trio

from .._exceptions import StreamTruncatedError, TrioAgentError
from .._loop import SubagentTurn
from .._messages import (
    AssistantMessage,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
)
from .._model import MessageAccumulator
from .._session import read_transcript
from ._errors import print_error
from ._render import preview

__all__ = ["add_replay_command", "print_transcript", "replay_sse"]

_TRANSCRIPT_TYPES = frozenset({"header", "user", "assistant", "history"})


def add_replay_command(subparsers: Any) -> None:
    """Add ``replay`` to an argparse subparsers object."""
    replay = subparsers.add_parser(
        "replay",
        help="replay a recorded SSE stream or print a transcript (JSONL)",
        description="Print a transcript written by run/chat --transcript, or replay a "
        "recorded Messages API SSE stream as it would have streamed.",
    )
    replay.add_argument("file", help="a transcript (.jsonl) or an SSE recording")
    replay.add_argument("--json", action="store_true", help="print one JSON event per line")
    replay.set_defaults(func=_replay_command)


def _is_transcript(data: bytes) -> bool:
    first = data.lstrip().split(b"\n", 1)[0]
    try:
        record = json.loads(first)
    except ValueError:
        return False
    return isinstance(record, dict) and record.get("type") in _TRANSCRIPT_TYPES


def _is_sse(data: bytes) -> bool:
    """Whether *data* holds at least one SSE field line (``event:`` or ``data:``)."""
    for line in data.removeprefix(b"\xef\xbb\xbf").splitlines():
        if line.startswith((b"data:", b"event:")):
            return True
    return False


def _replay_command(args: argparse.Namespace) -> int:
    try:
        with open(args.file, "rb") as f:
            data = f.read()
    except OSError as exc:
        return print_error(f"cannot read {args.file}: {exc.strerror}")
    try:
        if _is_transcript(data):
            transcript = read_transcript(args.file)
            print_transcript(
                transcript.messages, sys.stdout, as_json=args.json, subagents=transcript.subagents
            )
        elif _is_sse(data):
            trio.run(replay_sse, data, sys.stdout, args.json)
        else:
            return print_error(
                f"{args.file} is neither a transcript (the JSONL of run/chat --transcript) "
                "nor an SSE recording (event:/data: lines)"
            )
    except TrioAgentError as exc:
        return print_error(f"{type(exc).__name__}: {exc}")
    return 0


def print_transcript(
    messages: Sequence[Message],
    out: IO[str],
    *,
    as_json: bool = False,
    subagents: Sequence[SubagentTurn] = (),
) -> None:
    """Print a conversation: prompts, answers, tool calls and results; a subagent's
    turn (*subagents*) indented under the result of the call that ran it."""
    _print(messages, out, as_json, subagents)


class _Out(Protocol):
    def write(self, text: str, /) -> int: ...


@final
class _Indented:
    """*out* with every line it is given started with *indent*."""

    def __init__(self, out: _Out, indent: str) -> None:
        self._out, self._indent = out, indent

    def write(self, text: str, /) -> int:
        lines = text.split("\n")
        return self._out.write("\n".join(self._indent + x if x else x for x in lines))


def _print(
    messages: Sequence[Message], out: _Out, as_json: bool, subagents: Sequence[SubagentTurn]
) -> None:
    runs = {r.tool_use_id: r for r in subagents}
    for m in messages:
        if as_json:
            record = {"type": type(m).__name__, "message": m.to_api()}
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
            continue
        if isinstance(m, UserMessage):
            if isinstance(m.content, str):
                out.write(f"\n> {m.content}\n")
                continue
            for b in m.content:
                if isinstance(b, ToolResultBlock):
                    mark = "✗" if b.is_error else "✓"
                    content = b.content if isinstance(b.content, str) else "[blocks]"
                    out.write(f"  {mark} {b.tool_use_id}: {preview(content)}\n")
                    run = runs.get(b.tool_use_id)
                    if run is not None:
                        out.write(f"    [subagent {run.agent}: {run.end.reason}]\n")
                        _print(run.end.messages, _Indented(out, "    "), False, run.end.subagents)
                elif isinstance(b, TextBlock):
                    out.write(f"\n> {b.text}\n")
            continue
        _print_answer(m, out)


def _print_answer(m: AssistantMessage, out: _Out) -> None:
    for b in m.content:
        if isinstance(b, TextBlock):
            out.write(f"{b.text}\n")
        elif isinstance(b, ThinkingBlock):
            out.write(f"(thinking) {preview(b.thinking)}\n")
        elif isinstance(b, ToolUseBlock):
            out.write(f"  → {b.name}({preview(dict(b.input), 60)}) [{b.id}]\n")
    if m.stop_reason is not None:
        usage = m.usage
        out.write(
            f"  [{m.stop_reason}; {usage.input_tokens} in / {usage.output_tokens} out tokens]\n"
        )


async def _decode_sse(data: bytes) -> list[tuple[str, str]]:
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
    acc = MessageAccumulator()
    for _name, raw in await _decode_sse(data):
        event = acc.decode(raw)
        completed = acc.feed(event)
        if as_json:
            out.write(
                json.dumps({"type": "StreamEvent", "event": event}, ensure_ascii=False) + "\n"
            )
            continue
        delta: Mapping[str, Any] = event.get("delta") or {}
        if event["type"] == "content_block_delta" and delta.get("type") == "text_delta":
            out.write(str(delta.get("text", "")))
        for item in completed:
            if isinstance(item, ToolUseBlock):
                out.write(f"\n  → {item.name}({preview(dict(item.input), 60)}) [{item.id}]\n")
            elif isinstance(item, AssistantMessage):
                out.write("\n")
                usage = item.usage
                out.write(
                    f"[{item.stop_reason}; {usage.input_tokens} in / "
                    f"{usage.output_tokens} out tokens]\n"
                )
    if not acc.stopped:
        raise StreamTruncatedError("the recorded stream ends before message_stop")
