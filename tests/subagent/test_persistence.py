"""A Session records each subagent turn: its usage by name (in the session's total),
a nested ``subagent`` line in the transcript that ``replay`` shows under its call and
that a resumed session does not replay."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import (
    DEFAULT_MODEL,
    Session,
    TextBlock,
    ToolUseBlock,
    TranscriptError,
    Usage,
    UserMessage,
    read_transcript,
    subagent,
)
from trio_agent._cli._main import main
from trio_agent.testing import ScriptedAnswer, ScriptedModel, check_history


def answer(*blocks: Any, inp: int, out: int) -> ScriptedAnswer:
    return ScriptedAnswer(
        blocks=list(blocks), usage=Usage(input_tokens=inp, output_tokens=out), model=DEFAULT_MODEL
    )


async def test_the_transcript_nests_each_subagent_turn(
    autojump_clock: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = ScriptedModel(
        [
            answer(ToolUseBlock("p1", "outer", {"prompt": "dig"}), inp=100, out=10),
            answer(ToolUseBlock("o1", "inner", {"prompt": "dig deeper"}), inp=20, out=2),
            answer(TextBlock("bedrock"), inp=3, out=1),
            answer(TextBlock("found bedrock"), inp=30, out=3),
            answer(TextBlock("the parent is done"), inp=200, out=20),
        ]
    )
    inner = subagent("inner", "Digs deeper.", tools=[], system="i")
    outer = subagent("outer", "Digs.", tools=[inner], system="o")
    path = tmp_path / "t.jsonl"
    session = Session(
        model.client(), [outer], model=DEFAULT_MODEL, transcript_path=path, max_tokens=50
    )
    async with session.submit("go") as events:
        async for _ in events:
            pass
    session.close()
    assert session.usage.input_tokens == 100 + 20 + 3 + 30 + 200
    assert session.usage.output_tokens == 10 + 2 + 1 + 3 + 20
    (spent,) = session.subagent_usage.values()
    assert (spent.input_tokens, spent.output_tokens) == (53, 6)
    assert spent.cost_usd is not None
    assert spent.cost_usd > 0
    assert session.cost is not None
    assert session.cost > spent.cost_usd
    # The history is the parent's alone; the children are on their own line.
    transcript = read_transcript(path)
    assert transcript.messages == session.messages
    assert len(transcript.messages) == 4
    (run,) = transcript.subagents
    assert (run.agent, run.tool_use_id, run.end.reason, run.end.turns) == (
        "outer",
        "p1",
        "completed",
        2,
    )
    check_history(run.end.messages, strict=True)
    assert run.end.usage.input_tokens == 53
    (deeper,) = run.end.subagents
    assert deeper.agent == "inner"
    assert deeper.end.messages[-1].content[0].text == "bedrock"  # type: ignore[union-attr]
    # A resumed session starts from the parent's history, the children not replayed,
    # their usage counted as their lines recorded it.
    resumed = Session.resume(path, model.client(), [outer])
    assert resumed.messages == session.messages
    assert dict(resumed.subagent_usage) == dict(session.subagent_usage)
    assert attrs.evolve(resumed.usage, cost_usd=None) == attrs.evolve(session.usage, cost_usd=None)
    assert resumed.cost == pytest.approx(session.cost, rel=1e-12)
    # replay shows each subagent's turn under the call that ran it, indented.
    assert main(["replay", str(path)]) == 0
    shown = capsys.readouterr().out
    lines = shown.splitlines()
    at = next(i for i, line in enumerate(lines) if "[subagent outer: completed]" in line)
    assert lines[at - 1].lstrip().startswith("✓ p1")
    assert "    > dig" in shown
    assert "        [subagent inner: completed]" in shown
    assert "        bedrock" in shown
    assert lines.index("the parent is done") > at


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=10,
)
_GOOD = {
    "type": "subagent",
    "agent": "a",
    "tool_use_id": "t1",
    "reason": "completed",
    "turns": 1,
    "usage": {"input_tokens": 1, "output_tokens": 1},
    "cost_usd": 0.5,
    "messages": [{"role": "user", "content": "x"}],
    "subagents": [],
}


@settings(max_examples=150, deadline=None)
@given(key=st.sampled_from(sorted(_GOOD)), value=_json)
def test_a_garbled_subagent_line_is_a_transcript_error_naming_it(
    tmp_path_factory: pytest.TempPathFactory, key: str, value: Any
) -> None:
    path = tmp_path_factory.mktemp("t") / "t.jsonl"
    record = {**_GOOD, key: value}
    if key == "subagents":
        record["subagents"] = [{**_GOOD, "turns": value}] if value is not None else value
    header = {"type": "header", "version": 1, "model": "m"}
    path.write_text(
        "\n".join(
            json.dumps(r)
            for r in (
                header,
                record,
                {"type": "user", "message": {"role": "user", "content": "hi"}},
            )
        )
        + "\n"
    )
    error: TranscriptError | None = None
    try:
        transcript = read_transcript(path)
    except TranscriptError as exc:
        error = exc
    if error is not None:
        assert str(error).startswith("line 2: ")
        return
    assert transcript.messages == (UserMessage("hi"),)
    assert len(transcript.subagents) == (1 if record["type"] == "subagent" else 0)
