"""Garbled transcripts: any record with wrong types (content, citations, tool_result
content, usage...) is a TranscriptError naming its line, from ``read_transcript`` and
``Session.resume`` alike; what reads back is a valid history whose usage adds up."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import (
    AssistantMessage,
    Message,
    Session,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    TranscriptError,
    Usage,
    UserMessage,
    read_transcript,
)
from trio_agent._session._transcript import TranscriptWriter
from trio_agent.testing import check_history

HISTORY: tuple[Message, ...] = (
    UserMessage("fix it"),
    AssistantMessage(
        id="msg_1",
        model="claude-test",
        content=(
            TextBlock("look", citations=({"type": "char_location", "cited_text": "x"},)),
            ToolUseBlock("t1", "Read", {"path": "a.py", "n": [1, {"deep": True}]}),
        ),
        stop_reason="tool_use",
        usage=Usage(input_tokens=10, output_tokens=3, cache_read_input_tokens=2),
    ),
    UserMessage((ToolResultBlock("t1", (TextBlock("content"),)),)),
    AssistantMessage(id="msg_2", model="claude-test", content=(TextBlock("done"),)),
)

HOSTILE = st.one_of(
    st.integers(-2, 2),
    st.booleans(),
    st.none(),
    st.text(max_size=3),
    st.lists(st.text(max_size=2), max_size=2),
    st.lists(st.integers(), max_size=2),
    st.just({"type": ["text"]}),
    st.just([{"type": "text"}]),
    st.just({"type": "tool_result", "tool_use_id": "t", "content": 5}),
    st.just({"v": {"w": 1}}),
)


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    if isinstance(value, dict):
        for key, inner in value.items():  # pyright: ignore[reportUnknownVariableType]
            out += [(*prefix, key), *paths(inner, (*prefix, key))]
    elif isinstance(value, list):
        for i, inner in enumerate(value):  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
            out += [(*prefix, i), *paths(inner, (*prefix, i))]
    return out


def write(path: Path) -> list[dict[str, Any]]:
    writer = TranscriptWriter.open(path, model="claude-test", system=None)
    for message in HISTORY:
        writer.append(message)
    writer.close()
    return [json.loads(line) for line in path.read_bytes().splitlines()]


@st.composite
def garbled(draw: st.DrawFn) -> tuple[int, list[dict[str, Any]]]:
    """A transcript's records with one message record (its line number) changed."""
    with tempfile.TemporaryDirectory() as tmp:
        records = write(Path(tmp) / "t.jsonl")
    line = draw(st.integers(2, len(records)))  # 1 is the header
    record = records[line - 1]
    path = draw(st.sampled_from(paths(record["message"])))
    parent: Any = record["message"]
    for step in path[:-1]:
        parent = parent[step]
    if draw(st.booleans()):
        parent[path[-1]] = draw(HOSTILE)
    elif isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent.pop(path[-1])
    return line, records


@settings(max_examples=150, deadline=None)
@given(case=garbled())
def test_a_garbled_record_is_an_error_naming_its_line_or_reads_back_valid(
    case: tuple[int, list[dict[str, Any]]],
) -> None:
    line, records = case
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.jsonl"
        path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in records))
        error: str | None = None
        try:
            transcript = read_transcript(path)
        except TranscriptError as exc:
            error = str(exc)
        if error is not None:
            # The garbled line, or the line it broke the pairing of (naming both).
            assert f"line {line}" in error
            with pytest.raises(TranscriptError, match=f"line {line}"):
                Session.resume(path, None, [])
        else:
            # Still valid (e.g. a text replaced by another text): a usable history.
            check_history(transcript.messages)
            session = Session.resume(path, None, [])
            assert session.messages == transcript.messages
            assert isinstance(session.usage.input_tokens, int)
            for message in session.messages:
                json.dumps(message.to_param())


@pytest.mark.parametrize(
    ("line", "change", "match"),
    [
        (3, lambda m: m["content"].__setitem__(0, {"type": "text", "text": 5}), "text must be"),
        (3, lambda m: m["content"][0].__setitem__("citations", 7), "citations must be"),
        (3, lambda m: m["content"][0].__setitem__("citations", ["a"]), "list of objects"),
        (3, lambda m: m["usage"].__setitem__("input_tokens", "10"), "input_tokens must be"),
        (3, lambda m: m["usage"].__setitem__("output_tokens", [3]), "output_tokens must be"),
        (3, lambda m: m.__setitem__("usage", 5), "usage must be"),
        (3, lambda m: m.__setitem__("content", 5), "content must be"),
        (4, lambda m: m["content"][0].__setitem__("content", 5), "content must be"),
        (4, lambda m: m["content"][0].__setitem__("is_error", "yes"), "is_error must be"),
        (4, lambda m: m["content"].__setitem__(0, {"type": ["tool_result"]}), "string type"),
        (2, lambda m: m.__setitem__("content", {"a": 1}), "content must be"),
        (4, lambda m: m["content"][0].__setitem__("tool_use_id", "zz"), "answers no tool_use"),
        (
            3,
            lambda m: m["content"].append(
                {"type": "tool_use", "id": "t1", "name": "R", "input": {}}
            ),
            "'t1' is used twice in one turn",
        ),
    ],
)
def test_wrong_types_name_the_line(tmp_path: Path, line: int, change: Any, match: str) -> None:
    path = tmp_path / "t.jsonl"
    records = write(path)
    change(records[line - 1]["message"])
    path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in records))
    with pytest.raises(TranscriptError, match=f"line {line}: .*{match}"):
        read_transcript(path)
    with pytest.raises(TranscriptError, match=f"line {line}: .*{match}"):
        Session.resume(path, None, [])


@pytest.mark.parametrize("depth", [100, 200, 5000])
def test_deep_records_are_an_error_not_a_recursion_error(tmp_path: Path, depth: int) -> None:
    path = tmp_path / "t.jsonl"
    records = write(path)
    records[2]["message"]["content"][1]["input"] = {"a": "DEEP"}
    data = b"".join(json.dumps(r).encode() + b"\n" for r in records)
    path.write_bytes(data.replace(b'"DEEP"', b"[" * depth + b"]" * depth))
    if depth == 100:
        assert read_transcript(path).messages[1].to_api()["content"][1]["input"]["a"]
        return
    with pytest.raises(TranscriptError, match="line 3: "):
        read_transcript(path)
