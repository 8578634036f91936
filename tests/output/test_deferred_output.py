"""A final result accepted in an answer whose other calls await approval (issue 28):
the value is the turn's output once the approvals are given, in this Session or in
one resumed from the transcript, with no new model call; a refused one is retried
then, as in an unpaused turn."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest

from trio_agent import (
    Allow,
    Defer,
    Deny,
    PermissionDecision,
    Session,
    Tool,
    ToolContext,
    ToolUseBlock,
    TurnEndReason,
    TurnOptions,
)
from trio_agent.testing import ScriptedAnswer, ScriptedModel, check_history

from .conftest import Person

ran: list[str] = []


async def deploy(input: Mapping[str, Any], ctx: ToolContext) -> str:
    ran.append(ctx.tool_use_id)
    return "deployed"


DEPLOY = Tool("deploy", "Deploy.", {"type": "object"}, deploy)


async def ask_later(tool: Tool, input: Mapping[str, Any], ctx: ToolContext) -> PermissionDecision:
    return Defer()


OPTIONS = TurnOptions(output_type=Person, output_mode="tool", can_use_tool=ask_later)


def both(person: Any, final_id: str = "f1") -> ScriptedAnswer:
    return ScriptedAnswer(
        blocks=[ToolUseBlock("d1", "deploy", {}), ToolUseBlock(final_id, "final_result", person)]
    )


@pytest.mark.parametrize("decision", [Allow(), Deny("no")], ids=["allowed", "denied"])
async def test_the_accepted_value_is_the_output_after_approval(
    autojump_clock: Any, decision: PermissionDecision
) -> None:
    ran.clear()
    model = ScriptedModel([both({"name": "Ada", "age": 36})])
    async with Session(model.client(), [DEPLOY], model="m", options=OPTIONS) as session:
        first = await session.run("deploy and report")
        assert first.reason is TurnEndReason.AWAITING_APPROVAL
        assert first.output is None
        second = await session.run(approvals={"d1": decision})
    assert second.reason is TurnEndReason.COMPLETED
    assert second.output == Person("Ada", 36)
    assert len(model.requests) == 1  # the final result was given: no new model call
    assert ran == (["d1"] if isinstance(decision, Allow) else [])
    check_history(second.end.messages)


async def test_the_accepted_value_survives_a_resume_from_the_transcript(
    autojump_clock: Any, tmp_path: Path
) -> None:
    ran.clear()
    path = tmp_path / "t.jsonl"
    model = ScriptedModel([both({"name": "Ada", "age": 36})])
    async with Session(
        model.client(), [DEPLOY], model="m", options=OPTIONS, transcript_path=path
    ) as session:
        first = await session.run("deploy and report")
    assert first.reason is TurnEndReason.AWAITING_APPROVAL
    async with Session.resume(path, model.client(), [DEPLOY], options=OPTIONS) as resumed:
        second = await resumed.run(approvals={"d1": Allow()})
    assert second.output == Person("Ada", 36)
    assert len(model.requests) == 1
    assert ran == ["d1"]


async def test_a_refused_final_result_is_retried_after_approval(autojump_clock: Any) -> None:
    ran.clear()
    model = ScriptedModel(
        [
            both({"name": "Ada", "age": "old"}),  # refused: age is no int
            ScriptedAnswer(blocks=[ToolUseBlock("f2", "final_result", {"name": "Ada", "age": 36})]),
        ]
    )
    async with Session(model.client(), [DEPLOY], model="m", options=OPTIONS) as session:
        first = await session.run("deploy and report")
        assert first.reason is TurnEndReason.AWAITING_APPROVAL
        second = await session.run(approvals={"d1": Allow()})
    assert second.reason is TurnEndReason.COMPLETED
    assert second.output == Person("Ada", 36)
    assert len(model.requests) == 2
    assert ran == ["d1"]
    check_history(second.end.messages)


@attrs.frozen
class Count:
    n: int


async def test_a_value_that_no_longer_builds_is_refused_and_retried(
    autojump_clock: Any, tmp_path: Path
) -> None:
    # Resumed with another output type, the recorded final result (accepted as a
    # Person) does not build: it is refused with the reason, and the model is
    # asked again, never a crash nor a value of the wrong type.
    ran.clear()
    path = tmp_path / "t.jsonl"
    model = ScriptedModel(
        [
            both({"name": "Ada", "age": 36}),
            ScriptedAnswer(blocks=[ToolUseBlock("f2", "final_result", {"n": 3})]),
        ]
    )
    async with Session(
        model.client(), [DEPLOY], model="m", options=OPTIONS, transcript_path=path
    ) as session:
        first = await session.run("deploy and report")
    assert first.reason is TurnEndReason.AWAITING_APPROVAL
    counting = attrs.evolve(OPTIONS, output_type=Count)
    async with Session.resume(path, model.client(), [DEPLOY], options=counting) as resumed:
        second = await resumed.run(approvals={"d1": Allow()})
    assert second.reason is TurnEndReason.COMPLETED
    assert second.output == Count(3)
    assert len(model.requests) == 2
    retry = model.requests[1].body["messages"][-1]
    assert retry["role"] == "user"
    assert "does not match its schema" in json.dumps(retry)
    check_history(second.end.messages)
