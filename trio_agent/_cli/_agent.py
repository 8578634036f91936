"""The agent subcommands of ``trio-agent``: ``demo``, ``run`` and ``replay``.

``add_agent_commands(subparsers)`` registers them on the console script's parser;
each sets ``func``, a function ``(args) -> exit code``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any, cast

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
from .._model import ModelClient
from ._provider import provider_client, provider_of
from ._session_options import DEFAULT_MODEL

if TYPE_CHECKING:
    from ._interrupt import CtrlC

__all__ = [
    "add_agent_commands",
    "check_api_setup",
    "command_client",
    "event_fields",
    "input_line",
    "open_command_client",
    "positive_float",
    "preview",
    "print_event",
    "print_transcript",
    "replay_sse",
    "report_turn",
    "run_prompt",
    "run_turn",
]

_TRANSCRIPT_TYPES = frozenset({"header", "user", "assistant", "history"})


def add_agent_commands(subparsers: Any) -> None:
    """Add ``demo``, ``run`` and ``replay`` to an argparse subparsers object."""
    from ._session_options import add_session_options

    demo = subparsers.add_parser(
        "demo",
        help="a scripted agent task on a temporary project (no API key, no network)",
        description="A scripted model asks the real built-in tools for a status report "
        "on a small project in a temporary directory; the tools run while the answer "
        "streams, and a timeline shows what that saved.",
    )
    demo.add_argument("--json", action="store_true", help="print one JSON event per line")
    demo.add_argument(
        "--speed", type=positive_float, default=1.0, help="stream this many times faster"
    )
    demo.add_argument(
        "--fault",
        choices=["reset"],
        default=None,
        help="break the first answer's stream (reset: after its first tool call) to show"
        " the recovery",
    )
    demo.set_defaults(func=_demo_command)

    run = subparsers.add_parser(
        "run",
        help="run one prompt against the Anthropic API, with the built-in tools",
        description="Run one prompt in a session against the Anthropic API "
        "(ANTHROPIC_API_KEY); Write, Edit and Bash are asked about unless --allow says "
        "otherwise. Ctrl+C aborts the turn, a second Ctrl+C exits.",
    )
    run.add_argument("prompt", help="what to ask the model")
    add_session_options(run)
    run.add_argument(
        "--mcp-config",
        metavar="FILE",
        default=None,
        help="add the tools of this .mcp.json's servers (default: none)",
    )
    run.set_defaults(func=_run_command)

    replay = subparsers.add_parser(
        "replay",
        help="replay a recorded SSE stream or print a transcript (JSONL)",
        description="Print a transcript written by run/chat --transcript, or replay a "
        "recorded Messages API SSE stream as it would have streamed.",
    )
    replay.add_argument("file", help="a transcript (.jsonl) or an SSE recording")
    replay.add_argument("--json", action="store_true", help="print one JSON event per line")
    replay.set_defaults(func=_replay_command)


def positive_float(text: str) -> float:
    """An argparse type: a finite number > 0 (a usage error otherwise)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be positive: {text}")
    return value


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
        return _error(f"cannot read {args.file}: {exc.strerror}")
    try:
        if _is_transcript(data):
            from .._session import read_transcript

            print_transcript(read_transcript(args.file).messages, sys.stdout, as_json=args.json)
        elif _is_sse(data):
            trio.run(replay_sse, data, sys.stdout, args.json)
        else:
            return _error(
                f"{args.file} is neither a transcript (the JSONL of run/chat --transcript) "
                "nor an SSE recording (event:/data: lines)"
            )
    except TrioAgentError as exc:
        return _error(f"{type(exc).__name__}: {exc}")
    return 0


def preview(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def print_transcript(messages: Sequence[Message], out: IO[str], *, as_json: bool = False) -> None:
    """Print a conversation: prompts, answers, tool calls and results."""
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
                elif isinstance(b, TextBlock):
                    out.write(f"\n> {b.text}\n")
            continue
        _print_answer(m, out)


def _print_answer(m: AssistantMessage, out: IO[str]) -> None:
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


# -- run ----------------------------------------------------------------------------


def check_api_setup(args: argparse.Namespace) -> int | None:
    """Before ``run`` / ``chat``: the exit status of a one-line error, or None if all is
    set. Settles ``args.provider`` and strips a ``provider:`` prefix from ``args.model``."""
    try:
        args.provider, model = provider_of(args.provider, args.model or "")
    except ValueError as exc:
        return _error(str(exc))
    args.model = model or None
    keys = (
        ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
        if args.provider == "anthropic"
        else ("OPENAI_API_KEY",)
    )
    if not any(os.environ.get(key) for key in keys):
        named = " or ".join(keys)
        return _error(f"{named} is not set; export it, or try `trio-agent demo` (no key needed)")
    if not os.path.isdir(args.workspace):
        return _error(f"workspace {args.workspace!r} is not a directory")
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
        return _error(f"{type(exc).__name__}: {exc}")


async def run_with_mcp(args: argparse.Namespace) -> int:
    """:func:`run_prompt` with the tools of ``--mcp-config``'s servers, if given."""
    path = getattr(args, "mcp_config", None)
    if path is None:
        return await run_prompt(args)
    from ..mcp import load_mcp_config, open_mcp_tools

    async with open_mcp_tools(load_mcp_config(path)) as mcp_tools:
        return await run_prompt(args, extra_tools=mcp_tools)


async def _ask(tool: Any, input: Mapping[str, Any], ctx: Any) -> Any:
    from .._permissions import Allow, Deny

    question = f"\nAllow {tool.name}({preview(dict(input), 100)})? [y/N] "

    def prompt() -> str:
        return input_line(question)

    answer = await trio.to_thread.run_sync(prompt, abandon_on_cancel=True)
    return Allow() if answer.strip().lower() in ("y", "yes") else Deny("The user said no.")


def input_line(question: str) -> str:
    """Ask *question* on stderr, read the answer from stdin (runs in a thread)."""
    sys.stderr.write(question)
    sys.stderr.flush()
    return sys.stdin.readline()


def make_session(
    args: argparse.Namespace,
    client: Any,
    recorder: Any,
    err: IO[str],
    extra_tools: Sequence[Any] = (),
) -> Any:
    """The session of ``run`` / ``chat``: the built-in tools and *extra_tools*
    (instrumented for *recorder*), the permission rules of the flags, the transcript
    options."""
    from ..tools import Workspace, default_tools
    from ._session_options import open_session, permission_rules
    from ._timeline import instrument

    return open_session(
        args,
        client,
        instrument([*default_tools(Workspace(args.workspace)), *extra_tools], recorder),
        can_use_tool=permission_rules(args, _ask),
        err=err,
    )


async def run_turn(
    session: Any,
    prompt: str,
    recorder: Any,
    ctrl_c: CtrlC,
    out: IO[str],
    *,
    as_json: bool,
) -> Any:
    """One turn of *session*, printed as it goes; Ctrl+C aborts it.

    Returns:
        The turn's ``TurnEnd`` (None if a second Ctrl+C cut it short).
    """
    recorder.reset()
    with ctrl_c.aborts(session.abort):
        async with session.submit(prompt) as events:
            async for event in events:
                recorder.feed(event)
                print_event(event, out, as_json=as_json)
    return recorder.end


def report_turn(
    end: Any,
    session: Any,
    recorder: Any,
    out: IO[str],
    err: IO[str],
    *,
    as_json: bool,
    attempts: int = 1,
) -> None:
    """After a turn: a summary line on *out* (unless JSON), the error on *err*."""
    from ._errors import describe_error, prefixed

    if not as_json:
        usage = session.usage
        parts = [
            str(end.reason),
            f"{end.turns} model call{'s' if end.turns != 1 else ''}",
            f"{usage.input_tokens} in / {usage.output_tokens} out tokens",
        ]
        cost = session.cost
        if cost is not None and round(cost, 4) > 0:  # no "~$0.0000" noise
            parts.append(f"~${cost:.4f}")
        if recorder.tools:
            parts.append(f"overlapping saved {recorder.total_saved():.2f}s")
        out.write(f"\n[{'; '.join(parts)}]\n")
        out.flush()
    if end.error is not None:
        base_url = getattr(session.client, "base_url", None)
        err.write(prefixed(describe_error(end.error, base_url=base_url, attempts=attempts)))
    elif end.message and str(end.reason) != "completed":
        err.write(f"trio-agent: {end.message}\n")
    err.flush()


async def run_prompt(
    args: argparse.Namespace,
    *,
    client: Any = None,
    out: IO[str] | None = None,
    err: IO[str] | None = None,
    extra_tools: Sequence[Any] = (),
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
    from ._errors import EXIT_INTERRUPTED, RetryReporter
    from ._interrupt import open_ctrl_c
    from ._timeline import TurnRecorder

    stream = out if out is not None else sys.stdout
    errors = err if err is not None else sys.stderr
    recorder = TurnRecorder(trio.current_time)
    async with open_command_client(args, client) as model_client:
        session = make_session(args, model_client, recorder, errors, extra_tools)
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
            end, session, recorder, stream, errors, as_json=args.json, attempts=retries.attempts
        )
    if ctrl_c.pressed:
        if ctrl_c.exited:
            errors.write("trio-agent: interrupted\n")
        return EXIT_INTERRUPTED
    if end is None:  # pragma: no cover - a turn always ends with TurnEnd
        return 1
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
            out.write(f"  → {b.name}({preview(dict(b.input), 60)})\n")
    elif isinstance(event, ToolProgress):
        out.write(f"    {preview(str(event.data), 76)}\n")
    elif isinstance(event, UserMessage):
        for r in event.tool_results:
            mark = "✗" if r.is_error else "✓"
            content = r.content if isinstance(r.content, str) else "[blocks]"
            out.write(f"  {mark} {preview(content)}\n")
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

    return trio.run(run_demo, args.speed, args.json, None, args.fault)
