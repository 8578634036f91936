"""The Session observes its turn's events in the consumer's task (issue 13): the
history holds each message by the time the consumer receives it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trio_agent import Session, TextBlock, Tool, ToolContext, ToolUseBlock, TurnEnd, UserMessage
from trio_agent.testing import ScriptedAnswer, ScriptedModel, check_history

DONE = ScriptedAnswer(blocks=[TextBlock("Done.")])


async def _nap(input: Mapping[str, Any], ctx: ToolContext) -> str:
    return "ok"


def sleeper_tools() -> list[Tool]:
    return [Tool("Nap", "Nap.", {"type": "object"}, _nap, concurrency_safe=True)]


async def test_the_session_records_in_the_consumers_task(autojump_clock: Any) -> None:
    scripted = ScriptedModel([ScriptedAnswer(blocks=[ToolUseBlock("t", "Nap", {"s": 1})]), DONE])
    session = Session(scripted.client(), sleeper_tools(), model="m")
    counts: list[int] = []
    async with session.submit("go") as events:
        async for event in events:
            # The history already holds each message when the consumer gets it.
            counts.append(len(session.messages))
            if isinstance(event, UserMessage | TurnEnd):
                assert session.messages[-1] == (
                    event if isinstance(event, UserMessage) else event.messages[-1]
                )
    assert counts
    assert len(session.messages) == 4
    check_history(session.messages, strict=True)
