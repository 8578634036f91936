"""The JSONL transcript: one line per message, appended as each message completes.

File format (UTF-8, one JSON object per line)::

    {"type": "header", "version": 1, "model": "...", "system": ..., "ts": 1712345678.123}
    {"type": "user", "message": {"role": "user", "content": "..."}, "ts": ...}
    {"type": "assistant", "message": {<AssistantMessage.to_api()>}, "ts": ...}
    {"type": "history", "messages": [...], "ts": ...}
    {"type": "pending", "pending": {"calls": [...], "results": [...]}, "ts": ...}
    {"type": "subagent", "agent": "...", "tool_use_id": "...", "reason": "...",
     "turns": 2, "usage": {...}, "cost_usd": 0.0123, "messages": [...],
     "subagents": [...], "ts": ...}
    {"type": "timeline", "index": 1, "reason": "prompt", "message_id": "msg_..." | null,
     "started_at": 0.0, "stream_ended_at": 1.2 | null,
     "blocks": [{"t": 0.4, "index": 0, "block": "text (12 chars)"}, ...],
     "tools": [{"tool_use_id": "...", "call": "read(path=...)", "state": "done",
                "started_at": 0.5 | null, "ended_at": 1.5 | null}, ...],
     "saved": 0.7, "ts": ...}

A ``history`` line replaces the whole history at once (after a compaction, or when
the loop rewrote the turn's messages, e.g. dropping a failed attempt); being one
line, it is as atomic as the others. A ``pending`` line says that the tool calls
of the last message await approval (:class:`~trio_agent.PendingApprovals`): they
stay unanswered (not repaired) until a later message line answers them. A
``subagent`` line is a subagent's turn that the tool call ``tool_use_id`` ran
(:func:`trio_agent.subagent`), its own subagents' turns nested in it: it is not part
of the history (a resumed session does not replay it); :attr:`Transcript.subagents`
holds it, and ``trio-agent replay`` shows it under its call. A ``timeline`` line
is one model call's timeline (what ``trio-agent demo`` prints; the viewer draws it),
written once the call is over: when its stream ended, when each block finished
streaming, when each tool started and ended and how it ended (``state``: done,
error, cancelled...), in seconds since the call began, as the session's consumer
received the events; ``message_id`` is the call's answer, null when it gave none.
It is not part of the history either (:attr:`Transcript.timelines`).

Each line is written with a single ``os.write`` of the whole line, newline
included, on a file opened with ``O_APPEND``, so a crash leaves at most one torn
line, the last one. The writer fsyncs at the end of each turn.

Reading back (:func:`read_transcript`) tolerates exactly what a crash can do: a
torn last line is dropped, and the history is repaired so that it is valid for
the Messages API (:func:`repair_history`): every ``tool_use`` gets a
``tool_result``, synthetic where the session ended before the tool finished. A
corrupt line anywhere else is a :class:`TranscriptError` naming the line.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, cast, final

import attrs

from .._exceptions import TranscriptError, TrioAgentError, excerpt
from .._loop import PendingApprovals, SubagentTurn, TurnEnd, TurnEndReason
from .._messages import (
    AssistantMessage,
    ContentBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
    UserMessage,
    json_depth,
    message_from_api,
)
from .._util import finite

__all__ = [
    "INTERRUPTED_TOOL_MESSAGE",
    "Transcript",
    "TranscriptWriter",
    "read_transcript",
    "repair_history",
]

#: The content of a synthetic tool_result for a tool the session never finished.
INTERRUPTED_TOOL_MESSAGE: Final = "interrupted: the session ended before this tool finished"

_VERSION: Final = 1
#: The deepest nesting a record may have: a tool input's limit (``StreamLimits``),
#: plus the levels of the record, message and block around it.
_MAX_DEPTH: Final = 128


def _line(record: Mapping[str, Any]) -> bytes:
    # ensure_ascii keeps U+2028 and friends escaped: a line is always one line.
    return (json.dumps(record, ensure_ascii=True, separators=(",", ":")) + "\n").encode()


def _now() -> float:
    return round(time.time(), 3)


@final
@attrs.define(eq=False)
class TranscriptWriter:
    """Appends messages to a transcript file, one atomic line each.

    Writes are synchronous (one small ``os.write`` per message, to the page
    cache); :meth:`sync` makes them durable and is called at the end of each turn.

    Example::

        writer = TranscriptWriter.open(path, model="claude-sonnet-5-5")
        writer.append(UserMessage("hello"))
        writer.sync()
        writer.close()
    """

    path: str
    _fd: int | None = attrs.field(alias="fd")

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        model: str,
        system: Any = None,
        truncate_to: int | None = None,
    ) -> TranscriptWriter:
        """Open *path* for appending (created if missing) and write a header line.

        Args:
            path: the transcript file.
            model: the session's model, recorded in the header.
            system: the session's system prompt (a string or a list of blocks).
            truncate_to: cut the file to this many bytes first: used on resume to
                drop a torn last line, so new lines never join its fragment.
        """
        path = os.fspath(path)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            if truncate_to is not None:
                os.ftruncate(fd, truncate_to)
            writer = cls(path, fd=fd)
            writer._write(
                {
                    "type": "header",
                    "version": _VERSION,
                    "model": model,
                    "system": system,
                    "ts": _now(),
                }
            )
        except BaseException:
            os.close(fd)
            raise
        return writer

    @property
    def closed(self) -> bool:
        return self._fd is None

    def _write(self, record: Mapping[str, Any]) -> None:
        if self._fd is None:
            raise TranscriptError(f"transcript {self.path!r} is closed")
        data = _line(record)
        view = memoryview(data)
        # One write is the rule (lines stay atomic); loop only on a short write,
        # which regular files do not do short of a full disk.
        while view:
            written = os.write(self._fd, view)
            view = view[written:]

    def append(self, message: Message) -> None:
        """Append one completed message as one line."""
        kind = "user" if isinstance(message, UserMessage) else "assistant"
        self._write({"type": kind, "message": message.to_api(), "ts": _now()})

    def replace_history(self, messages: Sequence[Message]) -> None:
        """Append one line that replaces the whole history with *messages*."""
        self._write({"type": "history", "messages": [m.to_api() for m in messages], "ts": _now()})

    def append_pending(self, pending: PendingApprovals) -> None:
        """Append one line saying that the last message's *pending* calls await approval."""
        self._write({"type": "pending", "pending": pending.to_api(), "ts": _now()})

    def append_subagent(self, run: SubagentTurn) -> None:
        """Append one line recording a subagent's turn (its own subagents nested)."""
        self._write({**_subagent_record(run), "ts": _now()})

    def append_timeline(self, record: Mapping[str, Any], message_id: str | None) -> None:
        """Append one model call's ``timeline`` line (``TurnRecorder.call_record()``'s
        *record*, relative to the call's start), *message_id* the call's answer."""
        self._write({"type": "timeline", **record, "message_id": message_id, "ts": _now()})

    def sync(self) -> None:
        """Make every line written so far durable (``fsync``)."""
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        """Close the file (idempotent); does not fsync."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


@attrs.frozen
class Transcript:
    """A transcript read back: the header's facts and a valid history.

    Attributes:
        model: the model of the last header line, or None without a header.
        system: the system prompt of the last header line.
        messages: the history, repaired to be valid for the Messages API.
        valid_length: bytes of the file that hold whole lines; a writer resuming
            the file truncates it to this length first.
        torn_line: whether an incomplete last line was dropped.
        repaired_tool_use_ids: tool_use ids answered with a synthetic result.
        pending: the tool calls of the last message that await approval, if any
            (then that message's tool uses are not all answered).
        subagents: the subagents' turns the session's tool calls ran, in the order
            they were recorded (not part of *messages*).
        timelines: the ``timeline`` records, one per model call, in order (checked,
            as written; not part of *messages*).
    """

    model: str | None
    system: Any
    messages: tuple[Message, ...]
    valid_length: int
    torn_line: bool = False
    repaired_tool_use_ids: tuple[str, ...] = ()
    pending: PendingApprovals | None = None
    subagents: tuple[SubagentTurn, ...] = ()
    timelines: tuple[Mapping[str, Any], ...] = ()


def _subagent_record(run: SubagentTurn) -> dict[str, Any]:
    end = run.end
    return {
        "type": "subagent",
        "agent": run.agent,
        "tool_use_id": run.tool_use_id,
        "reason": str(end.reason),
        "turns": end.turns,
        "usage": end.usage.to_api(),
        "cost_usd": end.usage.cost_usd,
        "messages": [m.to_api() for m in end.messages],
        "subagents": [_subagent_record(r) for r in end.subagents],
    }


def _read_subagent(record: Mapping[str, Any], lineno: int, raw: bytes) -> SubagentTurn:
    """A ``subagent`` record back as a :class:`SubagentTurn` (its history as written:
    it is shown, never sent)."""
    agent, tool_use_id = record.get("agent"), record.get("tool_use_id")
    usage, turns, nested = record.get("usage"), record.get("turns"), record.get("subagents", [])
    if not (
        isinstance(agent, str)
        and isinstance(tool_use_id, str)
        and isinstance(usage, Mapping)
        and isinstance(turns, int)
        and isinstance(nested, list)
    ):
        raise TranscriptError(f"line {lineno}: a bad subagent record: {excerpt(raw)}")
    cost = record.get("cost_usd")
    if cost is not None and finite(cost) is None:
        raise TranscriptError(f"line {lineno}: a bad subagent record: cost_usd {cost!r:.40}")
    try:
        reason = TurnEndReason(record.get("reason"))
        spent = Usage.from_api(cast("Mapping[str, Any]", usage))
    except (TrioAgentError, TypeError, ValueError) as exc:
        raise TranscriptError(f"line {lineno}: a bad subagent record: {exc}") from exc
    spent = attrs.evolve(spent, cost_usd=None if cost is None else finite(cost))
    end = TurnEnd(
        reason=reason,
        usage=spent,
        messages=tuple(_history(record, lineno, raw)),
        turns=turns,
        subagents=tuple(
            _read_subagent(cast("Mapping[str, Any]", r), lineno, raw)
            if isinstance(r, Mapping)
            else _read_subagent({}, lineno, raw)
            for r in cast("list[Any]", nested)
        ),
    )
    return SubagentTurn(agent, tool_use_id, end)


def _is_time(value: object, *, optional: bool = False) -> bool:
    if value is None:
        return optional
    return finite(value) is not None


def _all(items: object, check: Callable[[Mapping[str, Any]], bool]) -> bool:
    return isinstance(items, list) and all(
        isinstance(i, Mapping) and check(cast("Mapping[str, Any]", i))
        for i in cast("list[Any]", items)
    )


def _read_timeline(record: Mapping[str, Any], lineno: int, raw: bytes) -> Mapping[str, Any]:
    """A ``timeline`` record, checked: a model call's times (see the module docstring)."""
    index, message_id = record.get("index"), record.get("message_id")
    if not (
        isinstance(index, int)
        and not isinstance(index, bool)
        and isinstance(record.get("reason"), str)
        and (message_id is None or isinstance(message_id, str))
        and _is_time(record.get("started_at"))
        and _is_time(record.get("stream_ended_at"), optional=True)
        and _is_time(record.get("saved"))
        and _all(
            record.get("blocks"),
            lambda b: (
                _is_time(b.get("t"))
                and isinstance(b.get("index"), int)
                and not isinstance(b.get("index"), bool)
                and isinstance(b.get("block"), str)
            ),
        )
        and _all(
            record.get("tools"),
            lambda t: (
                isinstance(t.get("tool_use_id"), str)
                and isinstance(t.get("call"), str)
                and isinstance(t.get("state"), str)
                and _is_time(t.get("started_at"), optional=True)
                and _is_time(t.get("ended_at"), optional=True)
            ),
        )
    ):
        raise TranscriptError(f"line {lineno}: a bad timeline record: {excerpt(raw)}")
    return record


def _parse_line(raw: bytes, lineno: int) -> Mapping[str, Any]:
    try:
        record = json.loads(raw)
    except RecursionError as exc:
        # A hostile or corrupt line nested too deep for the parser.
        raise TranscriptError(f"line {lineno}: JSON nested too deep: {excerpt(raw)}") from exc
    except (UnicodeDecodeError, ValueError) as exc:
        # ValueError covers bad JSON and integers past Python's digit limit.
        raise TranscriptError(f"line {lineno}: not JSON ({exc}): {excerpt(raw)}") from exc
    if not isinstance(record, dict):
        raise TranscriptError(f"line {lineno}: not a JSON object: {excerpt(raw)}")
    if json_depth(record, _MAX_DEPTH) > _MAX_DEPTH:
        # Parsed, but deep enough to make the code that walks it (to_api(), a
        # request) recurse out of stack later: refuse it now, naming the line.
        raise TranscriptError(f"line {lineno}: nested deeper than {_MAX_DEPTH} levels")
    return record  # pyright: ignore[reportUnknownVariableType]


def _record_message(record: Mapping[str, Any], lineno: int, raw: bytes) -> Message:
    kind = record.get("type")
    data = record.get("message")
    if not isinstance(data, Mapping):
        raise TranscriptError(f"line {lineno}: {kind} line without a message: {excerpt(raw)}")
    try:
        message = message_from_api(data)
    except (TrioAgentError, RecursionError, ValueError) as exc:
        raise TranscriptError(f"line {lineno}: bad message: {exc}") from exc
    if (kind == "user") != isinstance(message, UserMessage):
        raise TranscriptError(f"line {lineno}: a {kind} line holds a {message.role} message")
    return message


def _history(record: Mapping[str, Any], lineno: int, raw: bytes) -> list[Message]:
    items = record.get("messages")
    if not isinstance(items, list):
        raise TranscriptError(f"line {lineno}: history line without messages: {excerpt(raw)}")
    out: list[Message] = []
    for item in items:  # pyright: ignore[reportUnknownVariableType]
        if not isinstance(item, Mapping):
            raise TranscriptError(f"line {lineno}: a history entry is not an object")
        try:
            out.append(message_from_api(item))
        except (TrioAgentError, RecursionError, ValueError) as exc:
            raise TranscriptError(f"line {lineno}: bad message: {exc}") from exc
    return out


def _check_pairing(messages: Sequence[Message], lines: Sequence[int]) -> list[Message]:
    """Check how tool calls pair up, and make their ids unique.

    An error (:class:`TranscriptError`, naming the line) is what no crash can do and
    :func:`repair_history` cannot mend: a tool_use id used twice in one assistant
    turn (its results could not be told apart), a tool_result answering no tool_use
    of the assistant turn just before it (or answering one twice), a history
    starting with an answer.

    A server that repeats a tool_use id in a later turn (some reuse ``call_0`` every
    turn) is no error: each use is paired with the results just after it, which is
    unambiguous, and the session wrote it so. The Messages API wants the ids of a
    request unique, so every turn but the last to use an id gets a new one
    (``t1_2``), in its tool_use and its results; the last keeps it, as do calls
    awaiting approval, which belong to the last message.

    Returns:
        *messages*, with the repeated ids renamed.
    """
    turn_of: list[int] = []  # the assistant turn of each message (a user one: the one before)
    uses: dict[str, list[int]] = {}  # each id's turns, in order
    asked: set[str] = set()  # the tool_use ids of the assistant turn just before
    answered: set[str] = set()
    asked_at = 0  # the line of that turn's first answer
    turn = -1
    previous: str | None = None
    for message, lineno in zip(messages, lines, strict=True):
        if isinstance(message, AssistantMessage):
            if previous is None:
                raise TranscriptError(f"line {lineno}: the history starts with an answer")
            if previous != "assistant":
                asked, answered, asked_at = set[str](), set[str](), lineno
                turn += 1
            for use in message.tool_uses:
                if use.id in asked:
                    raise TranscriptError(
                        f"line {lineno}: tool_use id {use.id!r} is used twice in one turn"
                    )
                asked.add(use.id)
                uses.setdefault(use.id, []).append(turn)
        else:
            for result in message.tool_results:
                tid = result.tool_use_id
                if tid not in asked or tid in answered:
                    raise TranscriptError(
                        f"line {lineno}: a tool_result for {tid!r} answers no tool_use "
                        f"of the answer before it (line {asked_at})"
                    )
                answered.add(tid)
        turn_of.append(turn)
        previous = message.role
    taken = set(uses)
    renamed: dict[tuple[int, str], str] = {}
    for tid, turns in uses.items():
        for t in turns[:-1]:
            n = 2
            while f"{tid}_{n}" in taken:
                n += 1
            renamed[t, tid] = f"{tid}_{n}"
            taken.add(f"{tid}_{n}")
    if not renamed:
        return list(messages)
    return [
        _renamed(m, lambda tid, t=t: renamed.get((t, tid), tid))
        for m, t in zip(messages, turn_of, strict=True)
    ]


def _renamed(message: Message, new_id: Callable[[str], str]) -> Message:
    """*message* with its tool_use ids (or its tool_results' ids) mapped by *new_id*."""
    if isinstance(message.content, str):
        return message
    blocks: list[ContentBlock] = []
    for block in message.content:
        if isinstance(block, ToolUseBlock) and new_id(block.id) != block.id:
            block = attrs.evolve(block, id=new_id(block.id))
        elif isinstance(block, ToolResultBlock) and new_id(block.tool_use_id) != block.tool_use_id:
            block = attrs.evolve(block, tool_use_id=new_id(block.tool_use_id))
        blocks.append(block)
    return attrs.evolve(message, content=tuple(blocks))


def read_transcript(path: str | os.PathLike[str]) -> Transcript:
    """Read a transcript file back into a valid history.

    A last line without its newline (a crash mid-write) is dropped; blank lines
    and lines of unknown ``type`` are skipped (forward compatibility). A tool_use
    id that a server repeated in a later turn is renamed in the earlier turns
    (``t1`` -> ``t1_2``, with its results), so the ids sent to the API are unique.

    Raises:
        TranscriptError: a line other than the last is not a valid record (the
            message names the line number), or the file cannot be read.
    """
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise TranscriptError(f"cannot read transcript {os.fspath(path)!r}: {exc}") from exc
    model: str | None = None
    system: Any = None
    messages: list[Message] = []
    lines: list[int] = []  # the line of each message
    valid_length = 0
    pending: PendingApprovals | None = None
    subagents: list[SubagentTurn] = []
    timelines: list[Mapping[str, Any]] = []
    pending_line = 0
    torn = False
    offset = 0
    lineno = 0
    while offset < len(data):
        lineno += 1
        end = data.find(b"\n", offset)
        if end == -1:
            # A crash cut this last line (even a whole object lacking its
            # newline was cut mid-write): drop it.
            torn = True
            break
        raw = data[offset:end]
        offset = valid_length = end + 1
        if not raw.strip():
            continue
        record = _parse_line(raw, lineno)
        kind = record.get("type")
        if kind == "header":
            header_model = record.get("model")
            model = header_model if isinstance(header_model, str) else None
            system = record.get("system")
        elif kind in ("user", "assistant"):
            messages.append(_record_message(record, lineno, raw))
            lines.append(lineno)
            pending = None
        elif kind == "history":
            messages = _history(record, lineno, raw)
            lines = [lineno] * len(messages)
            pending = None
        elif kind == "subagent":
            subagents.append(_read_subagent(record, lineno, raw))
        elif kind == "timeline":
            timelines.append(_read_timeline(record, lineno, raw))
        elif kind == "pending":
            try:
                pending = PendingApprovals.from_api(record.get("pending"))
            except TranscriptError as exc:
                raise TranscriptError(f"line {lineno}: {exc}") from exc
            pending_line = lineno
    messages = _check_pairing(messages, lines)
    held: list[Message] = []
    if pending is not None and messages and pending.belongs_to(messages[-1]):
        held = [messages.pop()]  # its calls wait for approval: not repaired
    elif pending is not None and messages and _same_ids(pending, messages[-1]):
        # The ids of the last answer's tool uses, but another call under one of them:
        # approving that id would run a call the history does not show.
        raise TranscriptError(
            f"line {pending_line}: the pending calls are not the last answer's tool uses"
        )
    else:
        pending = None
    repaired, ids = repair_history(messages)
    repaired.extend(held)
    return Transcript(
        model=model,
        system=system,
        messages=tuple(repaired),
        valid_length=valid_length,
        torn_line=torn,
        repaired_tool_use_ids=ids,
        pending=pending,
        subagents=tuple(subagents),
        timelines=tuple(timelines),
    )


def _same_ids(pending: PendingApprovals, message: Message) -> bool:
    """Whether *pending* names exactly the tool_use ids of *message* (an answer)."""
    return isinstance(message, AssistantMessage) and sorted(
        u.id for u in message.tool_uses
    ) == sorted([*pending.ids, *(r.tool_use_id for r in pending.results)])


def repair_history(
    messages: Sequence[Message], *, reason: str = INTERRUPTED_TOOL_MESSAGE
) -> tuple[list[Message], tuple[str, ...]]:
    """Make *messages* valid for the API: every tool_use answered.

    *reason* is the content of each synthetic result.

    Each run of assistant messages must be followed by a user message whose
    tool_result blocks answer all their tool_uses; missing results are added as
    synthetic error results (before the user message's other content, where the
    API wants tool results), or as a new user message at the end.

    Returns:
        The repaired history (a new list) and the tool_use ids that were answered
        synthetically, in order.
    """
    out: list[Message] = []
    repaired: list[str] = []
    pending: list[str] = []

    def answer(user: UserMessage | None) -> UserMessage | None:
        have = {r.tool_use_id for r in user.tool_results} if user is not None else set[str]()
        missing = [i for i in pending if i not in have]
        pending.clear()
        if not missing:
            return user
        repaired.extend(missing)
        blocks: list[ContentBlock] = [ToolResultBlock(i, reason, is_error=True) for i in missing]
        if user is None:
            return UserMessage(blocks)
        if isinstance(user.content, str):
            return UserMessage([*blocks, *([TextBlock(user.content)] if user.content else [])])
        results = [b for b in user.content if isinstance(b, ToolResultBlock)]
        others = [b for b in user.content if not isinstance(b, ToolResultBlock)]
        return UserMessage([*results, *blocks, *others])

    for m in messages:
        if isinstance(m, AssistantMessage):
            pending.extend(b.id for b in m.tool_uses)
            out.append(m)
        else:
            fixed = answer(m)
            assert fixed is not None
            out.append(fixed)
    tail = answer(None)
    if tail is not None:
        out.append(tail)
    return out, tuple(repaired)
