"""Text the runtime cannot encode never enters the history; hostile inputs and
hostile context modifiers end as error results, never as exceptions out of a turn.

Attacked with generated values: any ``str`` (lone surrogates included), any file
name a POSIX file system takes (as bytes), inputs nested to any depth.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trio_agent import (
    Allow,
    Session,
    TextBlock,
    Tool,
    ToolContext,
    ToolOutput,
    ToolResult,
    ToolUseBlock,
    TurnEnd,
    TurnEndReason,
    TurnOptions,
    open_tool_executor,
    read_transcript,
)
from trio_agent._messages import clean_text
from trio_agent.testing import RawAnswer, ScriptedAnswer, ScriptedModel, check_history
from trio_agent.tools import Workspace, default_tools

#: Every code point, lone surrogates included (st.text() drops surrogates whatever
#: its alphabet says, so the strings are joined by hand).
any_text = st.lists(
    st.characters(exclude_categories=())
    | st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF),
    max_size=40,
).map("".join)
#: A name a POSIX file system accepts, as bytes.
file_names = st.binary(min_size=1, max_size=60).filter(
    lambda b: b"/" not in b and b"\0" not in b and b not in (b".", b"..")
)


def encodable(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@given(any_text)
def test_clean_text_always_encodes_and_keeps_what_encodes(value: str) -> None:
    cleaned = clean_text(value)
    assert encodable(cleaned)
    if encodable(value):
        assert cleaned is value
    else:  # every lone surrogate replaced, a pair joined into its character
        assert not any(0xD800 <= ord(c) <= 0xDFFF for c in cleaned)
        assert len(cleaned) <= len(value)


def turn_events(session: Session, prompt: str) -> list[Any]:
    async def main() -> list[Any]:
        async with session.submit(prompt) as events:
            return [e async for e in events]

    # The session keeps its transcript open between turns: no leak check here.
    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def assert_round_trip(session: Session, transcript: Path) -> None:
    """The history encodes, the transcript holds exactly it, and it is valid."""
    check_history(session.messages)
    json.dumps([m.to_api() for m in session.messages], ensure_ascii=False).encode("utf-8")
    session.close()
    assert read_transcript(transcript).messages == session.messages


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(returned=any_text, prompt=any_text, text=any_text)
def test_a_tool_or_a_prompt_with_unencodable_text_never_breaks_the_session(
    tmp_path: Path, returned: str, prompt: str, text: str
) -> None:
    ran: list[str] = []

    async def bad(input: Mapping[str, Any], ctx: ToolContext) -> Any:
        ran.append(ctx.tool_use_id)
        return ToolOutput([TextBlock(returned)]) if len(ran) % 2 else returned

    transcript = Path(tempfile.mkdtemp(dir=tmp_path)) / "t.jsonl"
    model = ScriptedModel(
        [
            ScriptedAnswer(blocks=[ToolUseBlock("t1", "Bad", {}), ToolUseBlock("t2", "Bad", {})]),
            ScriptedAnswer(blocks=[TextBlock("ok")]),
            ScriptedAnswer(blocks=[TextBlock("again")]),
        ]
    )
    session = Session(
        model.client(),
        [Tool("Bad", "", {"type": "object"}, bad)],
        model="m",
        transcript_path=transcript,
    )
    first = turn_events(session, prompt + text)
    assert ran == ["t1", "t2"]
    results = [e for e in first if isinstance(e, ToolResult)]
    assert all(encodable(str(r.content)) for r in results)
    assert first[-1].reason is TurnEndReason.COMPLETED
    second = turn_events(session, text)  # a later turn works too
    assert second[-1].reason is TurnEndReason.COMPLETED
    assert_round_trip(session, transcript)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(names=st.lists(file_names, min_size=1, max_size=5, unique=True))
def test_glob_over_any_file_names_leaves_a_history_that_encodes(
    tmp_path: Path, names: list[bytes]
) -> None:
    root = Path(tempfile.mkdtemp(dir=tmp_path)) / "ws"
    root.mkdir()
    made: list[bytes] = []
    for name in names:
        try:
            with open(os.path.join(os.fsencode(root), name), "wb"):
                made.append(name)
        except OSError:  # too long for this file system, say
            continue
    transcript = root.with_suffix(".jsonl")
    model = ScriptedModel(
        [
            ScriptedAnswer(blocks=[ToolUseBlock("g", "Glob", {"pattern": "*"})]),
            ScriptedAnswer(blocks=[TextBlock("listed")]),
        ]
    )
    session = Session(
        model.client(), default_tools(Workspace(root)), model="m", transcript_path=transcript
    )
    events = turn_events(session, "list")
    (result,) = [e for e in events if isinstance(e, ToolResult)]
    assert not result.is_error
    for name in made:  # each file is listed, its name as text UTF-8 can carry
        assert clean_text(os.fsdecode(name)) in str(result.content)
    assert events[-1].reason is TurnEndReason.COMPLETED
    assert_round_trip(session, transcript)


def test_the_models_own_lone_surrogate_escapes_are_replaced() -> None:
    """A stream whose JSON says ``"\\ud800"`` (valid JSON, no valid text) in a text
    delta and in a tool input."""
    start = ScriptedAnswer(blocks=[TextBlock("x")]).events()[0]
    events = [
        start,
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "a\ud800"},
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "tool_use", "id": "t1", "name": "Echo", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '{"s": "b\\udcff"}'},
        },
        {"type": "content_block_stop", "index": 1},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 3},
        },
        {"type": "message_stop"},
    ]
    raw = b"".join(b"event: e\ndata: " + json.dumps(e).encode("ascii") + b"\n\n" for e in events)
    seen: list[Any] = []

    async def echo(input: Mapping[str, Any], ctx: ToolContext) -> str:
        seen.append(input["s"])
        return input["s"]

    model = ScriptedModel([RawAnswer(chunks=[(0.0, raw)]), ScriptedAnswer(blocks=[TextBlock("k")])])
    session = Session(model.client(), [Tool("Echo", "", {"type": "object"}, echo)], model="m")
    end = turn_events(session, "go")[-1]
    assert end.reason is TurnEndReason.COMPLETED
    assert seen == ["b\ufffd"]
    json.dumps([m.to_api() for m in session.messages], ensure_ascii=False).encode("utf-8")
    check_history(session.messages)


def nested(depth: int) -> dict[str, Any]:
    root: dict[str, Any] = {}
    node = root
    for _ in range(depth):
        node["a"] = {}
        node = node["a"]
    return root


RECURSIVE = {"type": "object", "properties": {"a": {"$ref": "#"}}}


@settings(max_examples=10, deadline=None)
@given(depth=st.integers(min_value=150, max_value=60_000), via_permission=st.booleans())
def test_a_deeply_nested_input_is_an_error_result(depth: int, via_permission: bool) -> None:
    """From the block or from a permission check's ``updated_input``: an error result
    when too deep, the tool run when not, never a RecursionError."""
    ran: list[str] = []

    async def run(input: Mapping[str, Any], ctx: ToolContext) -> str:
        ran.append(ctx.tool_use_id)
        return "ran"

    deep = nested(depth)

    async def update(tool: Tool, input: Mapping[str, Any], ctx: ToolContext) -> Allow:
        return Allow(updated_input=deep)

    options = TurnOptions(can_use_tool=update if via_permission else None)

    async def main() -> list[ToolResult]:
        async with open_tool_executor([Tool("T", "", RECURSIVE, run)], options=options) as ex:
            ex.add_tool(ToolUseBlock("t1", "T", {} if via_permission else deep))
            ex.finish()
            return [r async for r in ex.results]

    (result,) = trio.run(main)
    if depth > 199:
        assert result.is_error
        assert "nested deeper than 200 levels" in str(result.content)
        assert ran == []
    else:
        assert ran == ["t1"]


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no str")

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


def test_a_context_modifier_whose_exception_cannot_be_printed_is_an_error_result() -> None:
    def modifier(context: Any) -> Any:
        raise Unprintable

    async def run(input: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        return ToolOutput("done", context_modifier=modifier)

    model = ScriptedModel(
        [
            ScriptedAnswer(blocks=[ToolUseBlock("t1", "M", {})]),
            ScriptedAnswer(blocks=[TextBlock("k")]),
        ]
    )
    session = Session(model.client(), [Tool("M", "", {"type": "object"}, run)], model="m")
    events = turn_events(session, "go")
    (result,) = [e for e in events if isinstance(e, ToolResult)]
    assert result.is_error
    assert "context modifier of M raised Unprintable" in str(result.content)
    end = events[-1]
    assert isinstance(end, TurnEnd)
    assert end.reason is TurnEndReason.COMPLETED


@pytest.mark.parametrize("bad", ["\ud800", "x\udcffy", "\udbff\udfff"])
def test_blocks_and_messages_clean_their_text(bad: str) -> None:
    from trio_agent import ThinkingBlock, ToolResultBlock, UserMessage

    for value in (
        TextBlock(bad).text,
        ThinkingBlock(bad, "sig").thinking,
        UserMessage(bad).content,
        ToolResultBlock("t", bad).content,
        ToolResult("t", bad).content,
        ToolUseBlock("t", "n", {bad: [bad, {bad: bad}]}).input,
    ):
        json.dumps(value if isinstance(value, str) else dict(value), ensure_ascii=False).encode(
            "utf-8"
        )
    assert clean_text("\udbff\udfff") == "\U0010ffff"  # a pair is the character it encodes
