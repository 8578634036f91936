"""A Session records each subagent turn: its usage by name (in the session's total),
a nested ``subagent`` line in the transcript that ``replay`` shows under its call and
that a resumed session does not replay."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest

from trio_agent import (
    DEFAULT_MODEL,
    Session,
    TextBlock,
    ToolUseBlock,
    Usage,
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
