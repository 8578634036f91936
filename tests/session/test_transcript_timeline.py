"""A transcript's ``timeline`` lines: one per model call, written by the Session from
the events it receives and its tools' runs, in virtual time; read back, they change
nothing of the history, and a garbled one is a TranscriptError naming its line."""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import (
    AssistantMessage,
    BlockFinished,
    Session,
    TextBlock,
    Tool,
    ToolContext,
    ToolUseBlock,
    TranscriptError,
    Transition,
    TurnEnd,
    Usage,
    read_transcript,
)
from trio_agent.testing import ScriptedAnswer, ScriptedModel, Timing

SLOW = Timing(token_delay=0.1, block_delay=0.1, text_chunk_size=4, json_chunk_size=4)


def _tools(starts: dict[str, float], ends: dict[str, float]) -> list[Tool]:
    async def run(input: Mapping[str, Any], ctx: ToolContext) -> str:
        starts[ctx.tool_use_id] = trio.current_time()
        await trio.sleep(float(input["seconds"]))
        ends[ctx.tool_use_id] = trio.current_time()
        if input.get("fail"):
            raise RuntimeError("it broke")
        return f"read {input['path']}"

    schema: dict[str, Any] = {"type": "object"}
    return [Tool("Read", "Read a file.", schema, run, concurrency_safe=True)]


def _answer(*blocks: Any) -> ScriptedAnswer:
    return ScriptedAnswer(
        blocks=list(blocks), usage=Usage(input_tokens=10, output_tokens=5), timing=SLOW
    )


def _model() -> ScriptedModel:
    return ScriptedModel(
        [
            _answer(
                TextBlock("Reading both."),
                ToolUseBlock("a", "Read", {"path": "a.py", "seconds": 1.5}),
                ToolUseBlock("b", "Read", {"path": "b.py", "seconds": 0.25, "fail": True}),
            ),
            _answer(TextBlock("a is fine, b broke.")),
        ]
    )


async def write_session(
    path: Path,
) -> tuple[list[tuple[float, Any]], dict[str, float], dict[str, float], float]:
    """A two-call turn with two tools (one fails) into *path*: the events with the
    virtual time each was received, the tools' real starts and ends, the turn's start."""
    starts: dict[str, float] = {}
    ends: dict[str, float] = {}
    session = Session(_model().client(), _tools(starts, ends), model="m", transcript_path=path)
    received: list[tuple[float, Any]] = []
    began = trio.current_time()
    async with session, session.submit("Check a and b.") as events:
        async for event in events:
            received.append((trio.current_time(), event))
    return received, starts, ends, began


def _r(t: float) -> float:
    return round(t, 3)


def expected_timelines(
    received: list[tuple[float, Any]],
    starts: dict[str, float],
    ends: dict[str, float],
    began: float,
) -> list[dict[str, Any]]:
    """Each call's timeline as the events and the tools say (times since the call began)."""
    calls: list[dict[str, Any]] = []
    origin = began
    call: dict[str, Any] = {"index": 1, "reason": "prompt", "blocks": [], "tools": []}
    for at, event in received:
        if isinstance(event, Transition):
            calls.append(call)
            origin = at
            call = {"index": event.turn, "reason": str(event.reason), "blocks": [], "tools": []}
        elif isinstance(event, BlockFinished):
            call["blocks"].append(_r(at - origin))
            if isinstance(event.block, ToolUseBlock):
                i = event.block.id
                call["tools"].append((i, _r(starts[i] - origin), _r(ends[i] - origin)))
        elif isinstance(event, AssistantMessage):
            call["stream_ended_at"] = _r(at - origin)
            call["message_id"] = event.id
        elif isinstance(event, TurnEnd):
            calls.append(call)
    return calls


def timeline_lines(path: Path) -> list[dict[str, Any]]:
    records = [json.loads(line) for line in path.read_bytes().splitlines()]
    return [r for r in records if r["type"] == "timeline"]


async def test_each_model_call_has_its_timeline_line_with_the_virtual_times(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    path = tmp_path / "t.jsonl"
    received, starts, ends, began = await write_session(path)
    assert set(starts) == {"a", "b"}  # the tools ran
    lines = timeline_lines(path)
    want = expected_timelines(received, starts, ends, began)
    assert len(lines) == len(want) == 2
    for line, call in zip(lines, want, strict=True):
        assert (line["index"], line["reason"]) == (call["index"], call["reason"])
        assert line["started_at"] == 0.0
        assert line["stream_ended_at"] == call["stream_ended_at"]
        assert line["message_id"] == call["message_id"]
        assert [b["t"] for b in line["blocks"]] == call["blocks"]
        assert [(t["tool_use_id"], t["started_at"], t["ended_at"]) for t in line["tools"]] == (
            call["tools"]
        )
    first, second = lines
    assert [t["state"] for t in first["tools"]] == ["done", "error"]
    assert [t["call"][:4] for t in first["tools"]] == ["Read", "Read"]
    assert second["tools"] == []
    # the tools slept exactly their seconds, in virtual time
    a, b = first["tools"]
    assert (a["ended_at"] - a["started_at"], b["ended_at"] - b["started_at"]) == (1.5, 0.25)
    # a starts when its block finished streaming, while the stream goes on
    assert a["started_at"] == first["blocks"][1]["t"] < first["stream_ended_at"]
    # overlap saved: b ran wholly inside a's run, which outlasted the stream
    assert a["started_at"] < b["started_at"] < b["ended_at"] < a["ended_at"]
    assert first["stream_ended_at"] < a["ended_at"]
    assert first["saved"] == _r(first["stream_ended_at"] - a["started_at"])
    # the line comes after its call's messages, before the next call's answer
    types = [json.loads(x)["type"] for x in path.read_bytes().splitlines()]
    assert types == ["header", "user", "assistant", "user", "timeline", "assistant", "timeline"]


async def test_reading_back_gives_the_same_history_and_resume_is_unchanged(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    path = tmp_path / "t.jsonl"
    await write_session(path)
    with_lines = read_transcript(path)
    assert [t["index"] for t in with_lines.timelines] == [1, 2]
    bare = tmp_path / "bare.jsonl"  # the same transcript as before timelines existed
    bare.write_bytes(
        b"".join(
            line + b"\n"
            for line in path.read_bytes().splitlines()
            if json.loads(line)["type"] != "timeline"
        )
    )
    without = read_transcript(bare)
    assert without.timelines == ()
    assert with_lines.messages == without.messages
    assert len(with_lines.messages) == 4
    resumed = Session.resume(path, None, [])
    assert resumed.messages == without.messages
    assert resumed.usage == Session.resume(bare, None, []).usage


# -- garbled timeline lines ---------------------------------------------------------

GOOD: dict[str, Any] = {
    "type": "timeline",
    "index": 1,
    "reason": "prompt",
    "message_id": "msg_1",
    "started_at": 0.0,
    "stream_ended_at": 1.2,
    "blocks": [{"t": 0.4, "index": 0, "block": "text (3 chars)"}],
    "tools": [
        {"tool_use_id": "t1", "call": "Read(a)", "state": "done", "started_at": 0.5, "ended_at": 2}
    ],
    "saved": 0.7,
    "ts": 1.0,
}
HEADER = {"type": "header", "version": 1, "model": "m", "system": None, "ts": 1.0}
USER = {"type": "user", "message": {"role": "user", "content": "hi"}, "ts": 1.0}

WRONG = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.lists(st.characters(), max_size=3).map("".join),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    if isinstance(value, dict):
        for key, inner in value.items():  # pyright: ignore[reportUnknownVariableType]
            if prefix or key not in ("type", "ts"):
                out += [(*prefix, key), *_paths(inner, (*prefix, key))]
    elif isinstance(value, list):
        for i, inner in enumerate(value):  # pyright: ignore[reportUnknownVariableType]
            out += [(*prefix, i), *_paths(inner, (*prefix, i))]
    return out


def _valid(value: Any, path: tuple[Any, ...]) -> bool:
    """Whether *value* is still a good value at *path* (a wrong-typed one is not)."""
    key = path[-1]
    if key in ("started_at", "ended_at", "stream_ended_at", "t", "saved"):
        optional = key != "saved" and key != "t" and path != ("started_at",)
        if value is None:
            return optional
        return (
            isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        )
    if key == "index":
        return isinstance(value, int) and not isinstance(value, bool)
    if key == "message_id":
        return value is None or isinstance(value, str)
    if key in ("reason", "block", "tool_use_id", "call", "state"):
        return isinstance(value, str)
    if key in ("blocks", "tools"):
        return value == []  # no blocks, no tools: still a timeline
    return False  # an entry of a list replaced


@st.composite
def garbled(draw: st.DrawFn) -> tuple[dict[str, Any], bool]:
    """A timeline record with one place changed, and whether it is still good."""
    record = json.loads(json.dumps(GOOD))
    path = draw(st.sampled_from(_paths(record)))
    parent: Any = record
    for step in path[:-1]:
        parent = parent[step]
    if draw(st.booleans()):
        value = draw(WRONG)
        parent[path[-1]] = value
        ok = _valid(value, path)
    else:
        if isinstance(parent, dict):
            del parent[path[-1]]
            ok = path[-1] in ("message_id", "stream_ended_at") or (
                len(path) == 3 and path[-1] in ("started_at", "ended_at")
            )
        else:
            parent.pop(path[-1])
            ok = True  # one block or tool fewer
    return record, ok


@settings(max_examples=150, deadline=None)
@given(case=garbled(), after=st.booleans())
def test_a_garbled_timeline_line_is_a_transcript_error_naming_its_line(
    case: tuple[dict[str, Any], bool], after: bool
) -> None:
    record, ok = case
    records = [HEADER, USER, record] + ([USER] if after else [])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.jsonl"
        path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in records))
        if ok:
            transcript = read_transcript(path)
            assert transcript.timelines == (record,)
            assert len(transcript.messages) == 1 + after
        else:
            with pytest.raises(TranscriptError, match="line 3: a bad timeline record"):
                read_transcript(path)
            with pytest.raises(TranscriptError, match="line 3: a bad timeline record"):
                Session.resume(path, None, [])


def test_a_good_timeline_line_reads_back_as_written(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in (HEADER, USER, GOOD)))
    transcript = read_transcript(path)
    assert transcript.timelines == (GOOD,)
    assert [m.role for m in transcript.messages] == ["user"]


def test_replay_of_a_transcript_with_timelines_prints_the_conversation_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `trio-agent replay` reads the timeline lines (read_transcript checks them) and
    # prints the conversation: the same output, plain and --json, as without them.
    from trio_agent._cli import main

    path = tmp_path / "t.jsonl"
    trio.run(write_session, path, clock=trio.testing.MockClock(autojump_threshold=0))
    assert len(timeline_lines(path)) == 2
    bare = tmp_path / "bare.jsonl"
    bare.write_bytes(
        b"".join(
            line + b"\n"
            for line in path.read_bytes().splitlines()
            if json.loads(line)["type"] != "timeline"
        )
    )
    for flags in ([], ["--json"]):
        assert main(["replay", *flags, str(path)]) == 0
        with_lines = capsys.readouterr()
        assert main(["replay", *flags, str(bare)]) == 0
        without = capsys.readouterr()
        assert with_lines.err == without.err == ""
        assert with_lines.out == without.out
        assert "a is fine, b broke." in with_lines.out
        assert "timeline" not in with_lines.out
