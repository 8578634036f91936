"""The viewer against an audit's attacks, at the HTTP level (the ASGI app in-process):
hostile JSON values in any field it reads (a huge integer used to make every route a
500), entries that are not regular files (a FIFO hung it, a symlink to /dev/zero
filled its memory), an overlong line, and a line still being written while it reads
(shown as "not JSON" and dropped). One bad file is a note or an error row for that
file only: every other session stays viewable."""

from __future__ import annotations

import copy
import json
import os
import re
from collections.abc import MutableMapping
from pathlib import Path
from typing import IO, Any

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trio_agent._viewer import Library, ViewerApp, read_session
from trio_agent._viewer import _sources as sources  # pyright: ignore[reportPrivateUsage]


async def _get(app: ViewerApp, path: str) -> tuple[int, str]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(dict(message))

    scope = {"type": "http", "method": "GET", "path": path, "headers": [(b"host", b"v:1")]}
    await app(scope, receive, send)
    return sent[0]["status"], sent[1]["body"].decode("utf-8")


def _app(*paths: Path) -> ViewerApp:
    app = ViewerApp(Library(paths))
    app.allowed_hosts = frozenset({"v:1"})
    return app


async def _every_page(app: ViewerApp) -> dict[str, str]:
    """GET the list, its live version and every session's page and version: each must
    answer 200. Returns each session's page by id."""
    status, listing = await _get(app, "/")
    assert status == 200, listing
    assert (await _get(app, "/api/list"))[0] == 200
    ids = re.findall(r'<tr class="session" data-id="([0-9a-f]+)"', listing)
    pages: dict[str, str] = {}
    for sid in ids:
        status, page = await _get(app, f"/s/{sid}")
        assert status == 200, page
        assert (await _get(app, f"/api/session/{sid}"))[0] == 200
        pages[sid] = page
    return pages


NORMAL = [
    {"type": "header", "version": 1, "model": "m", "system": None, "ts": 1.0},
    {"type": "user", "message": {"role": "user", "content": "the normal session"}, "ts": 1.0},
    {
        "type": "assistant",
        "message": {
            "role": "assistant",
            "id": "msg_ok",
            "model": "m",
            "content": [{"type": "text", "text": "all is well"}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 3, "output_tokens": 2, "cost_usd": 0.5},
        },
        "ts": 1.0,
    },
]


def _lines(records: list[Any]) -> bytes:
    text = "".join(json.dumps(r) + "\n" for r in records)
    for mark, token in _RAW.items():
        text = text.replace(json.dumps(mark), token)
    return text.encode()


def _normal(directory: Path) -> str:
    path = directory / "normal.jsonl"
    path.write_bytes(_lines(NORMAL))
    return sources.session_id(str(path.resolve()))


async def _check_normal_beside(app: ViewerApp, normal_id: str) -> dict[str, str]:
    pages = await _every_page(app)
    assert normal_id in pages, "the normal session is not listed"
    assert "all is well" in pages[normal_id]
    assert "$0.5000" in pages[normal_id]
    return pages


# -- finding 1: hostile numbers and values ------------------------------------------


def _hostile_transcript(value: Any) -> list[dict[str, Any]]:
    use = {"type": "tool_use", "id": "t1", "name": "Read", "input": {"path": "a"}}
    return [
        {"type": "header", "version": 1, "model": "m", "system": None, "ts": 1.0},
        {"type": "user", "message": {"role": "user", "content": "hostile"}, "ts": 1.0},
        {
            "type": "assistant",
            "message": {
                "role": "assistant",
                "id": "msg_1",
                "model": "m",
                "content": [{"type": "text", "text": "x"}, use],
                "stop_reason": "tool_use",
                "usage": {"input_tokens": 1, "output_tokens": 1, "cost_usd": value},
            },
            "ts": 1.0,
        },
        {
            "type": "timeline",
            "index": 1,
            "reason": "prompt",
            "message_id": "msg_1",
            "started_at": value,
            "stream_ended_at": 1.0,
            "blocks": [{"t": value, "index": 0, "block": "text"}],
            "tools": [
                {
                    "tool_use_id": "t1",
                    "call": "Read(a)",
                    "state": "done",
                    "started_at": value,
                    "ended_at": 2.0,
                }
            ],
            "saved": value,
        },
        {
            "type": "subagent",
            "agent": "helper",
            "tool_use_id": "t1",
            "reason": "completed",
            "turns": value,
            "usage": {"input_tokens": value},
            "cost_usd": value,
            "messages": [
                {"role": "user", "content": "look"},
                {
                    "role": "assistant",
                    "id": "msg_s",
                    "content": [{"type": "text", "text": "seen"}],
                    "usage": {"output_tokens": 1, "cost_usd": value},
                },
            ],
            "subagents": [],
        },
    ]


@pytest.mark.parametrize(
    "huge", [10**400, -(10**400), "__1e400__", "__nan__"], ids=["int", "-int", "1e400", "nan"]
)
async def test_a_huge_number_spoils_only_its_own_file(tmp_path: Path, huge: Any) -> None:
    normal = _normal(tmp_path)
    (tmp_path / "hostile.jsonl").write_bytes(_lines(_hostile_transcript(huge)))
    pages = await _check_normal_beside(_app(tmp_path), normal)
    assert len(pages) == 2
    (hostile,) = (p for sid, p in pages.items() if sid != normal)
    assert "hostile" in hostile
    assert "not a finite number" in hostile
    assert '<figure class="timeline">' in hostile  # drawn, the bad times left out


async def test_the_audit_files_overflow_no_longer(tmp_path: Path) -> None:
    """The audit's own case: a usage cost of 10**400, a timeline started at 10**400."""
    normal = _normal(tmp_path)
    hostile = _hostile_transcript(1.0)
    cost = copy.deepcopy(hostile)
    cost[2]["message"]["usage"]["cost_usd"] = 10**400
    (tmp_path / "a_cost.jsonl").write_bytes(_lines(cost))
    start = copy.deepcopy(hostile)
    start[3]["started_at"] = 10**400
    (tmp_path / "b_timeline.jsonl").write_bytes(_lines(start))
    pages = await _check_normal_beside(_app(tmp_path), normal)
    assert len(pages) == 3


#: Placeholders for JSON tokens json.dumps writes otherwise (or not at all).
_RAW = {
    "__1e400__": "1e400",
    "__nan__": "NaN",
    "__-inf__": "-Infinity",
    "__surrogates__": '"\\udfff\\ud800x"',
}

SPECIAL: list[Any] = [
    10**400,
    "__1e400__",
    "__nan__",
    "__-inf__",
    "__surrogates__",
    -1,
    [[[[[[[[]]]]]]]],
    {"type": "text"},
]

_HOSTILE = st.deferred(
    lambda: st.one_of(
        st.sampled_from(SPECIAL),  # half the values: the likeliest to break a page
        st.sampled_from(
            [
                10**400,
                -(10**400),
                2**64,
                -1,
                1e308,
                -1e308,
                5e-324,
                *_RAW,
                "NaN",
                "Infinity",
                "\ud800",
                "<script>alert(1)</script>",
                True,
                None,
                [],
                {},
                [[[[[[[[[[]]]]]]]]]],
            ]
        ),
        st.integers(),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=4),
        st.lists(_HOSTILE, max_size=2),
        st.dictionaries(st.text(max_size=3), _HOSTILE, max_size=2),
    )
)


def _event_log() -> list[dict[str, Any]]:
    message = _hostile_transcript(1.0)[2]["message"]
    call = {k: v for k, v in _hostile_transcript(1.0)[3].items() if k != "type"}
    return [
        {"type": "UserMessage", "message": {"role": "user", "content": "events"}},
        {"type": "Transition", "reason": "prompt", "turn": 1},
        {"type": "AssistantMessage", "message": message},
        {"type": "AttemptDiscarded", "model_call": 1, "reason": "x", "error": "e"},
        {"type": "ModelFallback", "from_model": "a", "to_model": "b"},
        {"type": "Compacted", "before": 3, "after": 1},
        {"type": "TurnEnd", "reason": "completed", "turns": 1, "error": None, "pending": None},
        {"type": "Timeline", "calls": [call]},
        {"type": "StreamError", "message": "boom"},
    ]


def _places(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found: list[tuple[Any, ...]] = []
    if isinstance(value, dict):
        for key, item in value.items():  # pyright: ignore[reportUnknownVariableType]
            found.append((*prefix, key))
            found.extend(_places(item, (*prefix, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):  # pyright: ignore[reportUnknownVariableType]
            found.append((*prefix, index))
            found.extend(_places(item, (*prefix, index)))
    return found


async def test_every_field_with_each_special_value_leaves_every_page_answering(
    tmp_path: Path,
) -> None:
    normal = _normal(tmp_path)
    hostile = tmp_path / "hostile.jsonl"
    app = _app(tmp_path)
    cases = 0
    for log in (_hostile_transcript(1.0), _event_log()):
        for line, record in enumerate(log):
            for place in _places(record):
                for value in SPECIAL:
                    records = copy.deepcopy(log)
                    target = records[line]
                    for step in place[:-1]:
                        target = target[step]
                    target[place[-1]] = value
                    hostile.write_bytes(_lines(records))
                    os.utime(hostile, ns=(cases, cases))  # read again, not from the cache
                    pages = await _check_normal_beside(app, normal)
                    assert len(pages) == 2
                    cases += 1
    assert cases > 1000  # every record's every field was tried


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data(), values=st.lists(_HOSTILE, min_size=1, max_size=3))
def test_any_hostile_value_anywhere_leaves_every_page_answering(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject, values: list[Any]
) -> None:
    directory = tmp_path_factory.mktemp("hostile")
    normal = _normal(directory)
    records = data.draw(st.sampled_from([_hostile_transcript(1.0), _event_log()]), label="kind")
    records = copy.deepcopy(records)
    for value in values:
        line = data.draw(st.integers(0, len(records) - 1), label="line")
        place = data.draw(st.sampled_from(_places(records[line])), label="place")
        target = records[line]
        for step in place[:-1]:
            target = target[step]
        target[place[-1]] = value
    (directory / "hostile.jsonl").write_bytes(_lines(records))
    pages = trio.run(_check_normal_beside, _app(directory), normal)
    assert len(pages) == 2  # the hostile file is listed and its page answers too


# -- finding 4: entries that are not regular files -----------------------------------


async def test_a_fifo_and_a_symlink_to_dev_zero_are_not_read(tmp_path: Path) -> None:
    viewed = tmp_path / "viewed"
    viewed.mkdir()
    normal = _normal(viewed)
    os.mkfifo(viewed / "fifo.jsonl")
    (viewed / "zero.jsonl").symlink_to("/dev/zero")
    outside = tmp_path / "outside.jsonl"
    outside.write_bytes(_lines(NORMAL))
    (viewed / "link.jsonl").symlink_to(outside)  # a link to a regular file: read
    pages = await _check_normal_beside(_app(viewed), normal)
    assert len(pages) == 2
    assert sources.session_id(str(outside)) in pages
    # named on the command line too: refused, not opened
    app = _app(viewed / "fifo.jsonl", viewed / "zero.jsonl", viewed / "normal.jsonl")
    pages = await _check_normal_beside(app, normal)
    assert len(pages) == 1


def test_a_file_swapped_for_a_fifo_after_the_walk_is_refused_on_opening(tmp_path: Path) -> None:
    path = tmp_path / "swapped.jsonl"
    os.mkfifo(path)
    with pytest.raises(OSError, match="not a regular file"):
        read_session(path)  # would block in open() without O_NONBLOCK
    zero = tmp_path / "zero.jsonl"
    zero.symlink_to("/dev/zero")
    with pytest.raises(OSError, match="not a regular file"):
        read_session(zero)


async def test_a_swapped_file_is_an_error_row_and_the_rest_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    normal = _normal(tmp_path)
    os.mkfifo(tmp_path / "fifo.jsonl")
    # the walk saw a regular file there (it was swapped since)
    monkeypatch.setattr(sources, "_is_regular", lambda path: True)  # pyright: ignore[reportUnknownLambdaType]
    status, listing = await _get(_app(tmp_path), "/")
    assert status == 200
    assert "not a regular file" in listing
    await _check_normal_beside(_app(tmp_path), normal)


def test_an_overlong_line_is_noted_and_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sources, "MAX_LINE_BYTES", 1000)
    path = tmp_path / "long.jsonl"
    long = {"type": "user", "message": {"role": "user", "content": "y" * 5000}}
    path.write_bytes(_lines([NORMAL[0], NORMAL[1], long, NORMAL[2]]))
    view = read_session(path)
    notes = [i.text for i in view.items if i.kind == "note"]
    assert notes == ["line 3 is longer than 1,000 bytes: not shown"]
    assert [i.kind for i in view.items] == ["note", "user", "assistant"]
    # a file past the total cap is shown up to there (here: within the long line)
    monkeypatch.setattr(sources, "MAX_FILE_BYTES", 300)
    view = read_session(path)
    assert [(i.kind, i.text) for i in view.items] == [
        ("note", "the file is larger than 300 bytes: shown up to there"),
        ("user", "the normal session"),
    ]


# -- finding 5: a line still being written -------------------------------------------


def _lines_of(view: sources.SessionView) -> list[tuple[str, str]]:
    return [(i.kind, i.text) for i in view.items]


def test_a_half_written_last_line_is_read_once_whole(tmp_path: Path) -> None:
    path = tmp_path / "live.jsonl"
    last = json.dumps({"type": "user", "message": {"role": "user", "content": "the last"}})
    head = _lines(NORMAL[:2]) + b"garbage\n"
    path.write_bytes(head + last[:20].encode())
    first = read_session(path)
    assert _lines_of(first) == [  # a line's note comes first, as before
        ("note", "line 3 is not JSON"),
        ("user", "the normal session"),
    ]
    path.write_bytes(head + last.encode() + b"\n" + b"more garbage\n")
    second = read_session(path)
    assert _lines_of(second) == [
        ("note", "line 3 is not JSON"),
        ("note", "line 5 is not JSON"),
        ("user", "the normal session"),
        ("user", "the last"),
    ]


class _WriterCatchesUp:
    """A file the viewer reads while its writer appends: when a read comes back with
    the torn start of the last line (the reader is at the end of the file), the writer
    finishes that line at once, so that the next read returns the rest."""

    def __init__(self, f: IO[bytes], path: Path, rest: bytes) -> None:
        self.f, self.path, self.rest = f, path, rest

    def _caught_up(self, data: bytes) -> bytes:
        if data and not data.endswith(b"\n") and self.rest:
            with self.path.open("ab") as w:
                w.write(self.rest)
            self.rest = b""
        return data

    def readline(self, size: int = -1) -> bytes:
        return self._caught_up(self.f.readline(size))

    def read(self, size: int = -1) -> bytes:
        return self._caught_up(self.f.read(size))

    def __iter__(self) -> _WriterCatchesUp:
        return self

    def __next__(self) -> bytes:
        return self._caught_up(next(self.f))

    def __enter__(self) -> _WriterCatchesUp:
        return self

    def __exit__(self, *exc: object) -> None:
        self.f.close()


def test_a_line_finished_while_it_is_read_is_not_split(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "live.jsonl"
    last = json.dumps({"type": "user", "message": {"role": "user", "content": "the last"}})
    path.write_bytes(_lines(NORMAL[:2]) + last[:20].encode())
    opened = sources.open_regular

    def open_growing(where: Path) -> Any:
        return _WriterCatchesUp(opened(where), path, last[20:].encode() + b"\n")

    monkeypatch.setattr(sources, "open_regular", open_growing)
    first = read_session(path)
    assert _lines_of(first) == [("user", "the normal session")]  # the torn line: not yet
    assert path.read_bytes().endswith(b"\n")  # the writer did catch up during the read
    second = read_session(path)
    assert _lines_of(second) == [("user", "the normal session"), ("user", "the last")]
