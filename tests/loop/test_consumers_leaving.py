"""Consumers that leave early: ``break`` out of ``async with query(...)`` at any event
(also after an ``await``) ends the turn quietly; an exception raised in the body
propagates as itself (never an ExceptionGroup, never BrokenResourceError), and
``KeyboardInterrupt`` as ``KeyboardInterrupt``. At every event, under a leak check.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

import pytest
import trio

from trio_agent import (
    TextBlock,
    Tool,
    ToolContext,
    ToolUseBlock,
    TurnEnd,
    UserMessage,
    query,
)
from trio_agent.testing import LeakCheck, ScriptedAnswer, ScriptedModel, Timing, run_virtual


async def act(input: Mapping[str, Any], ctx: ToolContext) -> str:
    ctx.progress("working")
    await trio.sleep(input.get("d", 1))
    ctx.progress("almost")
    return "acted"


TOOLS = [Tool("Act", "d", {"type": "object"}, act, concurrency_safe=True)]


def model() -> ScriptedModel:
    return ScriptedModel(
        [
            ScriptedAnswer(
                blocks=[
                    TextBlock("hello world"),
                    ToolUseBlock("t1", "Act", {"d": 0.5}),
                    ToolUseBlock("t2", "Act", {"d": 2}),
                ],
                timing=Timing(token_delay=0.1),
            ),
            ScriptedAnswer(blocks=[TextBlock("done")], timing=Timing(token_delay=0.1)),
        ]
    )


class Boom(Exception):
    pass


async def leave(at: int, how: str, wait: float | None) -> tuple[int, BaseException | None]:
    """Run a turn, leaving at event *at* by *how* (after ``sleep(wait)`` if given);
    the number of events seen and what the ``async with`` raised."""
    scripted = model()
    seen = 0
    raised: BaseException | None = None
    with LeakCheck(models=[scripted], processes=False, fds=False):
        try:
            async with query(
                scripted.client(), [UserMessage("go")], tools=TOOLS, model="m", max_tokens=99
            ) as events:
                async for _ in events:
                    seen += 1
                    if seen - 1 == at:
                        if wait is not None:
                            await trio.sleep(wait)
                        if how == "break":
                            break
                        raise Boom if how == "raise" else KeyboardInterrupt
        except BaseException as exc:
            raised = exc
    return seen, raised


def count_events() -> int:
    async def main() -> int:
        scripted = model()
        async with query(
            scripted.client(), [UserMessage("go")], tools=TOOLS, model="m", max_tokens=99
        ) as events:
            items = [e async for e in events]
        assert isinstance(items[-1], TurnEnd)
        return len(items)

    return run_virtual(main)


EVENTS = count_events()


@pytest.mark.parametrize("wait", [None, 0.0, 0.3])
@pytest.mark.parametrize("how", ["break", "raise", "KeyboardInterrupt"])
def test_leaving_at_every_event(how: str, wait: float | None) -> None:
    assert EVENTS > 10  # text, blocks, progress, results, a second answer
    for at in range(EVENTS):
        seen, raised = run_virtual(partial(leave, at, how, wait))
        assert seen == at + 1
        if how == "break":
            assert raised is None, (at, raised)
        elif how == "raise":
            assert type(raised) is Boom, (at, raised)
        else:
            assert type(raised) is KeyboardInterrupt, (at, raised)
