"""Where the viewer's sessions come from: transcript files, event logs, a database.

Everything is read, never written. A file is one session:

- a transcript (its first line a ``header``: what ``Session(transcript_path=...)``
  writes): the conversation, its compactions (``history`` lines), the calls that
  await approval (``pending``) and the subagents' turns (``subagent`` lines), each
  nested under the tool call that ran it, and each model call's timeline
  (``timeline`` lines, drawn on its answer);
- an event log (lines whose ``type`` is an event's class name, ``AssistantMessage``,
  ``TurnEnd``...: what ``trio-agent demo --json`` and ``run --json`` print): the conversation too, and what only events tell: each
  turn's end reason, the retries and discarded attempts, the errors, and the
  timeline of each model call (the ``Timeline`` line).

A durable database (``--database-url``) holds one session per durable session id
(:class:`DatabaseSource`). A line that cannot be read becomes an error note on the
page: a transcript is untrusted input, and the viewer shows what it can. A number
that is not a finite float (``10**400`` is valid JSON, so are ``NaN`` and ``1e400``
to Python's parser) is left out, with a note. A file that cannot be read at all is an
error row (and page) of its own: the other sessions stay viewable.

Only regular files are read (a FIFO would block the reading thread, a device such
as ``/dev/zero`` never ends): the walk skips anything else, and a file swapped for
one after the walk is refused on opening (opened non-blocking, then checked). A line
longer than :data:`MAX_LINE_BYTES` is skipped with a note, a file is read up to
:data:`MAX_FILE_BYTES`, and a last line without its newline is not read yet (its
writer is on it: the next read has it whole).

:func:`read_session` returns a :class:`SessionView`: plain data for the pages.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat as stat_module
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO, Final, cast

import attrs

from .._messages import Usage
from .._models import cost_usd
from .._util import finite

__all__ = [
    "DatabaseSource",
    "FileSource",
    "Item",
    "SessionView",
    "file_sessions",
    "finite",
    "open_regular",
    "read_session",
]

#: The most lines read from one file (a larger file is shown up to there, with a note).
MAX_LINES: Final = 200_000
#: The deepest subagent turn shown (``subagent()`` nests at most 3 by default).
MAX_SUBAGENT_DEPTH: Final = 8
#: The longest line read (a longer one is skipped, with a note). Not Final: tests lower it.
MAX_LINE_BYTES = 64 * 1024 * 1024
#: The most bytes read from one file (a larger file is shown up to there, with a note).
MAX_FILE_BYTES = 512 * 1024 * 1024
#: The largest token count taken as one (a larger one, or a negative one, is noted).
_MAX_TOKENS: Final = 2**63


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _short(value: object) -> str:
    """*value* shortened for a note (a huge integer's repr is long, but bounded)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


@attrs.define
class Item:
    """One thing on a session page.

    ``kind`` is ``"user"`` (``text``), ``"assistant"`` (``blocks``, ``model``,
    ``usage``, ``calls``: its model call's timeline rows), ``"note"`` (``text``,
    ``level``: ``"info"``, ``"warn"`` or ``"error"``) or ``"end"`` (``text``: a turn's end).
    A block is a dict: ``{"type": "text" | "thinking" | "tool_use" | "other", ...}``; a
    tool use carries its ``result`` (``{"content": str, "is_error": bool}``) once known,
    and the ``subagent`` turn it ran, if any (``agent``, ``reason``, ``turns`` and its
    own ``items``).
    """

    kind: str
    text: str = ""
    level: str = "info"
    blocks: list[dict[str, Any]] = attrs.field(factory=list[dict[str, Any]])
    model: str | None = None
    usage: dict[str, Any] | None = None
    timeline: dict[str, Any] | None = None


@attrs.define
class SessionView:
    """A session as the viewer shows it (list row and page).

    Attributes:
        id: the page's id (a hash of where the session is).
        where: the file path, or ``database:<session id>``.
        kind: ``"transcript"``, ``"events"`` or ``"database"``.
        title: the first prompt, shortened.
        model: the model of the header or of the first answer.
        turns: the user's prompts (an event log: its turn ends).
        input_tokens, output_tokens: summed over the answers (cache reads and
            writes counted in input).
        cost: USD summed over the answers, None when a price is unknown.
        end: the last turn's end reason (or what the transcript says last).
        updated: the file's modification time (seconds since the epoch).
        items: the page's content, in order.
        version: changes whenever the source changes (for the live update).
    """

    id: str
    where: str
    kind: str
    title: str = ""
    model: str | None = None
    turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = 0.0
    end: str = ""
    updated: float = 0.0
    items: list[Item] = attrs.field(factory=list[Item])
    version: str = ""


def session_id(where: str) -> str:
    """A stable id for a session's location (URL-safe)."""
    return hashlib.sha256(where.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _text_of(content: Any) -> str:
    """The text of a message's or tool result's content (a string, or blocks)."""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    if isinstance(content, list):
        for block in cast("list[Any]", content):
            if isinstance(block, dict):
                block = cast("dict[str, Any]", block)
                if block.get("type") == "text":
                    parts.append(str(block.get("text", "")))
                elif block.get("type") == "image":
                    parts.append("[image]")
                else:
                    parts.append(json.dumps(block, ensure_ascii=False))
            else:
                parts.append(str(block))
    elif content is not None:
        parts.append(json.dumps(content, ensure_ascii=False))
    return "\n".join(parts)


def _input_text(value: Any) -> str:
    """A tool input as JSON: on one line when short, else indented."""
    line = json.dumps(value, ensure_ascii=False)
    return line if len(line) <= 100 else json.dumps(value, ensure_ascii=False, indent=2)


@attrs.define
class _Builder:
    """Folds messages and events into a :class:`SessionView`'s items and totals."""

    view: SessionView
    tool_uses: dict[str, dict[str, Any]] = attrs.field(factory=dict[str, dict[str, Any]])
    #: The model calls of the turn being read, each the items its timeline belongs
    #: to (its answer; a discarded attempt's note): a Transition starts a call.
    calls: list[list[Item]] = attrs.field(factory=lambda: [[]])
    seen_ids: set[str] = attrs.field(factory=set[str])
    #: The answers by message id (a transcript's ``timeline`` line names its answer).
    answers: dict[str, Item] = attrs.field(factory=dict[str, Item])
    prompts: int = 0

    def note(self, text: str, level: str = "info") -> None:
        self.view.items.append(Item("note", text=text, level=level))

    def message(self, data: Any) -> None:
        if not isinstance(data, dict):
            self.note(f"not a message: {str(data)[:200]}", "error")
            return
        data = cast("dict[str, Any]", data)
        if data.get("role") == "assistant":
            self.assistant(data)
        else:
            self.user(data)

    def user(self, data: Mapping[str, Any]) -> None:
        content = data.get("content")
        texts: list[str] = []
        if isinstance(content, list):
            for block in cast("list[Any]", content):
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    block = cast("dict[str, Any]", block)
                    use = self.tool_uses.get(str(block.get("tool_use_id")))
                    output = _text_of(block.get("content", ""))
                    result = {"content": output, "is_error": bool(block.get("is_error", False))}
                    if use is not None:
                        use["result"] = result
                    else:
                        self.note(f"a tool result for an unknown call: {output[:200]}")
                else:
                    texts.append(_text_of([block]))
        else:
            texts.append(_text_of(content))
        text = "\n".join(t for t in texts if t)
        if text:
            self.prompts += 1
            if not self.view.title:
                self.view.title = " ".join(text.split())[:100]
            self.view.items.append(Item("user", text=text))

    def assistant(self, data: Mapping[str, Any]) -> None:
        message_id = data.get("id")
        if isinstance(message_id, str) and message_id:
            if message_id in self.seen_ids:
                return  # a history line repeats what was shown
            self.seen_ids.add(message_id)
        blocks: list[dict[str, Any]] = []
        content = data.get("content")
        for block in cast("list[Any]", content) if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            block = cast("dict[str, Any]", block)
            kind = block.get("type")
            if kind == "text":
                blocks.append({"type": "text", "text": str(block.get("text", ""))})
            elif kind == "thinking":
                blocks.append({"type": "thinking", "text": str(block.get("thinking", ""))})
            elif kind == "redacted_thinking":
                blocks.append({"type": "thinking", "text": "[redacted thinking]"})
            elif kind in ("tool_use", "server_tool_use"):
                use_id = str(block.get("id", ""))
                use: dict[str, Any] = {
                    "type": "tool_use",
                    "id": use_id,
                    "name": str(block.get("name", "")),
                    "input": _input_text(block.get("input")),
                    "result": None,
                }
                self.tool_uses[use_id] = use
                blocks.append(use)
            else:
                blocks.append({"type": "other", "text": json.dumps(block, ensure_ascii=False)})
        model = data.get("model") if isinstance(data.get("model"), str) else None
        if self.view.model is None and model:
            self.view.model = model
        usage_data = data.get("usage")
        usage: dict[str, Any] | None = None
        if isinstance(usage_data, dict):
            usage = cast("dict[str, Any]", usage_data)
            self._count(usage, model or self.view.model)
        item = Item("assistant", blocks=blocks, model=model, usage=usage)
        stop = data.get("stop_reason")
        if isinstance(stop, str):
            item.text = stop
            self.view.end = f"stop: {stop}"
        self.calls[-1].append(item)
        self.view.items.append(item)
        if isinstance(message_id, str) and message_id:
            self.answers[message_id] = item

    def check_times(self, call: Mapping[str, Any]) -> None:
        """Note a model call's times that are numbers but not finite floats (the
        drawing leaves them out)."""
        times = [call.get(k) for k in ("started_at", "stream_ended_at", "saved")]
        blocks, tools = call.get("blocks"), call.get("tools")
        for b in cast("list[Any]", blocks) if isinstance(blocks, list) else []:
            if isinstance(b, dict):
                times.append(cast("dict[str, Any]", b).get("t"))
        for t in cast("list[Any]", tools) if isinstance(tools, list) else []:
            if isinstance(t, dict):
                t = cast("dict[str, Any]", t)
                times.extend((t.get("started_at"), t.get("ended_at")))
        bad = [v for v in times if _is_number(v) and finite(v) is None]
        if bad:
            self.note(
                f"model call {str(call.get('index', '?'))[:20]}: a time that is not a finite"
                f" number ({_short(bad[0])}): left out",
                "warn",
            )

    def timeline(self, record: Mapping[str, Any]) -> None:
        """A transcript's ``timeline`` line: drawn on the answer it names, or on a note
        of its own (a model call without an answer)."""
        self.check_times(record)
        answer = self.answers.get(str(record.get("message_id")))
        if answer is not None and answer.timeline is None:
            answer.timeline = dict(record)
        else:
            self.note(f"model call {str(record.get('index', '?'))[:20]} (no answer)", "warn")
            self.view.items[-1].timeline = dict(record)

    def subagent(self, record: Mapping[str, Any], *, depth: int) -> None:
        """A ``subagent`` record: its turn nested under the tool call that ran it (its
        own subagents under theirs), its tokens and cost counted in the session's."""
        use = self.tool_uses.get(str(record.get("tool_use_id")))
        if depth >= MAX_SUBAGENT_DEPTH:
            self.note(f"subagents nested deeper than {MAX_SUBAGENT_DEPTH}: not shown", "warn")
            return
        child = _Builder(SessionView(id="", where="", kind="subagent", model=self.view.model))
        messages = record.get("messages")
        for message in cast("list[Any]", messages) if isinstance(messages, list) else []:
            child.message(message)
        nested = record.get("subagents")
        for inner in cast("list[Any]", nested) if isinstance(nested, list) else []:
            if isinstance(inner, dict):
                child.subagent(cast("dict[str, Any]", inner), depth=depth + 1)
        self.view.input_tokens += child.view.input_tokens
        self.view.output_tokens += child.view.output_tokens
        if self.view.cost is not None:
            self.view.cost = None if child.view.cost is None else self.view.cost + child.view.cost
        run = {
            "agent": str(record.get("agent", "")),
            "reason": str(record.get("reason", "")),
            "turns": record.get("turns"),
            "items": child.view.items,
        }
        if use is not None:
            use["subagent"] = run
        else:
            self.note(f"a subagent turn ({run['agent']}) for an unknown call", "warn")

    def _count(self, usage: dict[str, Any], model: str | None) -> None:
        def n(key: str) -> int:
            value = usage.get(key)
            if not isinstance(value, int) or isinstance(value, bool):
                return 0
            if not 0 <= value < _MAX_TOKENS:
                self.note(f"usage {key} {_short(value)} is not a token count: left out", "warn")
                return 0
            return value

        self.view.input_tokens += (
            n("input_tokens") + n("cache_creation_input_tokens") + n("cache_read_input_tokens")
        )
        self.view.output_tokens += n("output_tokens")
        given = usage.get("cost_usd")
        cost: float | None
        if _is_number(given):
            cost = finite(given)
            if cost is None:
                self.note(
                    f"usage cost_usd {_short(given)} is not a finite number: cost unknown",
                    "warn",
                )
        else:
            try:
                priced = cost_usd(Usage.from_api(usage), model) if model else None
            except Exception:  # an odd usage from an untrusted file: no price
                priced = None
            cost = finite(priced)
        if self.view.cost is not None:
            self.view.cost = None if cost is None else self.view.cost + cost

    # -- events --------------------------------------------------------------------

    def event(self, record: Mapping[str, Any]) -> None:
        kind = record.get("type")
        if kind in ("AssistantMessage", "UserMessage"):
            self.message(record.get("message"))
        elif kind == "Transition":
            self.calls.append([])
            reason = str(record.get("reason", ""))
            if reason not in ("next_turn", "prompt"):
                self.note(f"model call {record.get('turn', '?')}: {reason}", "warn")
        elif kind == "AttemptDiscarded":
            error = record.get("error")
            why = f" after {error}" if error else ""
            self.note(
                f"model call {record.get('model_call', '?')} discarded{why}:"
                f" {record.get('reason', '')}",
                "warn",
            )
            self.calls[-1].append(self.view.items[-1])  # its timeline goes here
        elif kind == "ModelFallback":
            self.note(
                f"overloaded: falling back from {record.get('from_model')} to"
                f" {record.get('to_model')}",
                "warn",
            )
        elif kind == "Compacted" or (isinstance(kind, str) and "Compact" in kind):
            self.note(f"history compacted ({_fields(record)})")
        elif kind == "TurnEnd":
            reason = str(record.get("reason", ""))
            self.view.end = reason
            self.view.turns += 1
            error = record.get("error")
            text = f"turn ended: {reason}"
            if record.get("turns") is not None:
                text += f" ({record.get('turns')} model calls)"
            self.view.items.append(Item("end", text=text, level="info"))
            if error:
                self.note(f"error: {error}", "error")
            pending = record.get("pending")
            if pending:
                self.note("tool calls await approval", "warn")
        elif kind == "Timeline":
            calls = record.get("calls")
            if isinstance(calls, list):
                for call in cast("list[Any]", calls):
                    if isinstance(call, dict):
                        self.check_times(cast("dict[str, Any]", call))
                for items, call in zip(self.calls, cast("list[Any]", calls), strict=False):
                    if isinstance(call, dict) and items:
                        answers = [i for i in items if i.kind == "assistant"]
                        (answers or items)[0].timeline = cast("dict[str, Any]", call)
            self.calls = [[]]
        elif isinstance(kind, str) and kind.endswith("Error"):
            self.note(f"{kind}: {_fields(record)}", "error")


def _fields(record: Mapping[str, Any]) -> str:
    shown = {k: v for k, v in record.items() if k not in ("type", "t")}
    return json.dumps(shown, ensure_ascii=False)[:300]


def _transcript(builder: _Builder, records: Iterable[Mapping[str, Any]]) -> None:
    for record in records:
        kind = record.get("type")
        if kind == "header":
            model = record.get("model")
            if isinstance(model, str) and builder.view.model is None:
                builder.view.model = model
        elif kind in ("user", "assistant"):
            builder.message(record.get("message"))
        elif kind == "history":
            messages = record.get("messages")
            count = len(cast("list[Any]", messages)) if isinstance(messages, list) else 0
            builder.note(f"history replaced ({count} messages): a compaction or a rewrite")
            for message in cast("list[Any]", messages) if isinstance(messages, list) else []:
                if isinstance(message, dict) and message.get("role") == "assistant":
                    builder.message(message)
        elif kind == "pending":
            builder.note(
                "approval requested: the last answer's tool calls await a decision", "warn"
            )
            builder.view.end = "awaiting_approval"
        elif kind == "subagent":
            builder.subagent(record, depth=0)
        elif kind == "timeline":
            builder.timeline(record)
        else:
            builder.note(f"unknown line type {str(kind)[:80]!r}", "warn")
    builder.view.turns = builder.prompts


def _is_regular(path: Path) -> bool:
    """Whether *path* is a regular file (a symlink: its target), without opening it."""
    try:
        return stat_module.S_ISREG(path.stat().st_mode)
    except OSError:
        return False


def open_regular(path: Path) -> BinaryIO:
    """*path* opened for reading, if it is a regular file.

    Opened non-blocking (opening a FIFO would wait for a writer, in a thread nothing
    can interrupt), then checked on the descriptor itself: a file swapped for a FIFO
    or a device after a check by name is refused all the same.

    Raises:
        OSError: it cannot be opened, or it is not a regular file.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        if not stat_module.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path}: not a regular file")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _records(path: Path, builder: _Builder) -> list[Mapping[str, Any]]:
    records: list[Mapping[str, Any]] = []
    total = 0
    lineno = 0
    with open_regular(path) as f:
        while True:
            raw = f.readline(MAX_LINE_BYTES + 1)
            if not raw.endswith(b"\n") and len(raw) <= MAX_LINE_BYTES:
                # The end of the file; a last line without its newline is one its
                # writer is still on: not read yet (the next read has it whole).
                break
            lineno += 1
            total += len(raw)
            if lineno > MAX_LINES:
                builder.note(f"the file has more than {MAX_LINES} lines: shown up to there", "warn")
                break
            if not raw.endswith(b"\n"):  # past MAX_LINE_BYTES: skip the rest of it
                while raw and not raw.endswith(b"\n") and total <= MAX_FILE_BYTES:
                    raw = f.readline(MAX_LINE_BYTES)
                    total += len(raw)
                if raw.endswith(b"\n") and total <= MAX_FILE_BYTES:
                    builder.note(
                        f"line {lineno} is longer than {MAX_LINE_BYTES:,} bytes: not shown"
                    )
                    continue
                if not raw:
                    break  # the file ended within that line: its writer is on it
            if total > MAX_FILE_BYTES:
                builder.note(
                    f"the file is larger than {MAX_FILE_BYTES:,} bytes: shown up to there", "warn"
                )
                break
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
            except (ValueError, RecursionError):
                builder.note(f"line {lineno} is not JSON", "error")
                continue
            if isinstance(record, dict):
                records.append(cast("dict[str, Any]", record))
            else:
                builder.note(f"line {lineno} is not a JSON object", "error")
    return records


def read_session(path: str | os.PathLike[str]) -> SessionView:
    """The session in the file at *path* (a transcript or an event log)."""
    path = Path(path)
    where = str(path.resolve())
    stat = path.stat()
    view = SessionView(
        id=session_id(where),
        where=where,
        kind="transcript",
        updated=stat.st_mtime,
        version=f"{stat.st_size}:{stat.st_mtime_ns}",
    )
    builder = _Builder(view)
    records = _records(path, builder)
    first = str(records[0].get("type", "")) if records else ""
    if not first[:1].isupper():  # a transcript's lines are lower case, events CamelCase
        _transcript(builder, records)
    else:
        view.kind = "events"
        for record in records:
            builder.event(record)
    view.title = view.title or path.name
    return view


#: Directories a directory's walk skips (tools' caches and environments, VCS data).
_SKIPPED_DIRS: Final = frozenset({"node_modules", "__pycache__", "site-packages"})
#: The most files one walk lists (a larger tree is shown up to there).
MAX_FILES: Final = 2000


@attrs.define
class FileSource:
    """Session files: the paths given, each a file or a directory (its ``*.jsonl``
    files, recursively, hidden directories and caches skipped, at most
    :data:`MAX_FILES`). A file is read again only once it changed (its size or
    modification time): the pages poll the list every second.
    """

    paths: Sequence[Path]
    _cache: dict[Path, tuple[tuple[int, int], SessionView]] = attrs.field(
        factory=dict[Path, tuple[tuple[int, int], SessionView]], init=False
    )

    def files(self) -> list[Path]:
        found: list[Path] = []
        for path in self.paths:
            if path.is_dir():
                found.extend(_walk(path, MAX_FILES - len(found)))
            elif _is_regular(path):
                found.append(path)
        return found[:MAX_FILES]

    def read(self, path: Path) -> SessionView:
        """The session in *path*, from the cache while the file is unchanged; a file
        that cannot be read (or shown) is a ``kind="error"`` view saying why.

        Raises:
            OSError: the file is gone (it cannot be stat'ed).
        """
        stat = path.stat()
        key = (stat.st_size, stat.st_mtime_ns)
        cached = self._cache.get(path)
        if cached is not None and cached[0] == key:
            return cached[1]
        try:
            view = read_session(path)
        except Exception as exc:  # an untrusted file (an OSError, or a bug): this file only
            where = str(path.resolve())
            why = f"cannot show this file: {exc!s:.300}"
            view = SessionView(
                id=session_id(where),
                where=where,
                kind="error",
                title=path.name,
                end=why,
                updated=stat.st_mtime,
                items=[Item("note", text=why, level="error")],
                version=f"{stat.st_size}:{stat.st_mtime_ns}",
            )
        self._cache[path] = (key, view)
        return view


def _walk(root: Path, limit: int) -> list[Path]:
    found: list[Path] = []
    for directory, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIPPED_DIRS)
        for name in sorted(files):
            if name.endswith(".jsonl") and _is_regular(Path(directory) / name):
                found.append(Path(directory) / name)
                if len(found) >= limit:
                    return found
    return found


def file_sessions(source: FileSource) -> list[SessionView]:
    """Every session of *source*'s files that can be read (a file that cannot is a
    row saying why)."""
    views: list[SessionView] = []
    for path in source.files():
        try:
            views.append(source.read(path))
        except OSError as exc:
            where = str(path)
            views.append(SessionView(id=session_id(where), where=where, kind="error", end=str(exc)))
    return views


class DatabaseSource:
    """The durable sessions of a database (``trio_agent.durable``'s tables), read only.

    Args:
        database_url: a SQLAlchemy URL (``sqlite:///agents.sqlite``,
            ``postgresql://...``); SQLite files are opened read-only.
    """

    def __init__(self, database_url: str) -> None:
        import sqlalchemy as sa

        url = sa.make_url(database_url)
        if url.get_backend_name() == "sqlite" and url.database:
            # Read-only at the driver: the viewer can never write the file.
            target = Path(url.database).resolve()
            engine = sa.create_engine(
                f"sqlite:///file:{target}?mode=ro&uri=true",
                connect_args={"timeout": 5},
            )
        else:
            engine = sa.create_engine(
                url,
                pool_pre_ping=True,
                execution_options={"postgresql_readonly": True},
            )
        self.engine = engine
        self.label = url.render_as_string(hide_password=True)

    def close(self) -> None:
        self.engine.dispose()

    def _turn_times(self, conn: Any, meta: Any) -> dict[str, float]:
        """When each turn's workflow was last updated (seconds since the epoch), from
        DBOS's ``workflow_status`` (none without it: a store DBOS never ran on)."""
        import sqlalchemy as sa
        import sqlalchemy.exc

        schema = None if self.engine.dialect.name == "sqlite" else "dbos"
        try:
            table = sa.Table("workflow_status", meta, autoload_with=conn, schema=schema)
            rows = conn.execute(sa.select(table.c.workflow_uuid, table.c.updated_at)).all()
        except sqlalchemy.exc.SQLAlchemyError:
            return {}
        return {
            str(uuid): float(at) / 1000
            for uuid, at in rows
            if isinstance(at, int | float) and not isinstance(at, bool)
        }

    def sessions(self) -> list[SessionView]:
        import sqlalchemy as sa
        import sqlalchemy.exc

        views: list[SessionView] = []
        meta = sa.MetaData()
        try:
            with self.engine.connect() as conn:
                messages = sa.Table("trio_agent_messages", meta, autoload_with=conn)
                turns = sa.Table("trio_agent_turns", meta, autoload_with=conn)
                rows = conn.execute(
                    sa.select(messages.c.session_id, messages.c.seq, messages.c.message).order_by(
                        messages.c.session_id, messages.c.seq
                    )
                ).all()
                summaries = conn.execute(
                    sa.select(turns.c.session_id, turns.c.summary, turns.c.turn_id)
                ).all()
                updated = self._turn_times(conn, meta)
        except sqlalchemy.exc.SQLAlchemyError as exc:
            where = f"database:{self.label}"
            return [
                SessionView(id=session_id(where), where=where, kind="error", end=str(exc)[:300])
            ]
        by_session: dict[str, list[str]] = {}
        for sid, _seq, text in rows:
            by_session.setdefault(str(sid), []).append(str(text))
        ends: dict[str, list[dict[str, Any]]] = {}
        last_update: dict[str, float] = {}
        for sid, text, turn_id in summaries:
            if str(turn_id) in updated:
                when = updated[str(turn_id)]
                last_update[str(sid)] = max(last_update.get(str(sid), 0.0), when)
            try:
                data = json.loads(text)
            except ValueError:
                continue
            if isinstance(data, dict):
                ends.setdefault(str(sid), []).append(cast("dict[str, Any]", data))
        for sid, texts in by_session.items():
            where = f"database:{sid}"
            view = SessionView(id=session_id(where), where=where, kind="database")
            builder = _Builder(view)
            for text in texts:
                try:
                    builder.message(json.loads(text))
                except (ValueError, RecursionError):
                    builder.note("a message that is not JSON", "error")
            view.turns = builder.prompts
            turn_summaries = ends.get(sid, [])
            if turn_summaries:
                view.turns = max(view.turns, len(turn_summaries))
                last = turn_summaries[-1]
                view.end = str(last.get("reason", view.end))
            view.updated = last_update.get(sid, 0.0)
            view.version = f"{len(texts)}:{len(turn_summaries)}"
            view.title = view.title or sid
            views.append(view)
        return views
