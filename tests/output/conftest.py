"""What the typed-output tests share: the prompt, the ``Person`` output type, scripted
answers (a text, a final-result call) and one turn run to its end with its history
checked."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import attrs

from trio_agent import (
    Message,
    ModelClient,
    TextBlock,
    Tool,
    ToolUseBlock,
    Transition,
    TransitionReason,
    TurnControl,
    TurnEnd,
    TurnOptions,
    UserMessage,
    query,
)
from trio_agent.testing import ScriptedAnswer, check_history

GO: tuple[Message, ...] = (UserMessage("extract the person"),)


@attrs.frozen
class Person:
    name: str
    age: int


PERSON = {"name": "Ada", "age": 36}


def text(value: Any, **kw: Any) -> ScriptedAnswer:
    return ScriptedAnswer(
        blocks=[TextBlock(value if isinstance(value, str) else json.dumps(value))], **kw
    )


def final(value: Any, id: str = "f1", **kw: Any) -> ScriptedAnswer:
    return ScriptedAnswer(blocks=[ToolUseBlock(id, "final_result", value)], **kw)


async def turn(
    client: ModelClient,
    options: TurnOptions,
    *,
    tools: Sequence[Tool] = (),
    model: str = "claude-sonnet-5-5",
    control: TurnControl | None = None,
) -> tuple[list[Any], TurnEnd]:
    """One turn of *GO*: its events, the last its TurnEnd, whose history is valid."""
    events: list[Any] = []
    async with query(
        client, GO, tools=tools, model=model, max_tokens=1000, options=options, control=control
    ) as stream:
        async for event in stream:
            events.append(event)
    end = events[-1]
    assert isinstance(end, TurnEnd)
    check_history(end.messages, strict=True)
    return events, end


def transitions(events: list[Any]) -> list[TransitionReason]:
    return [e.reason for e in events if isinstance(e, Transition)]
