"""Aborts and interrupts injected at every event of a scripted turn: the transcript stays
valid (every tool_use has its tool_result, the history is what the events said)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st
from test_loop import SLOW, Log, Run, check_run, client_for, make_tools

from trio_agent import (
    AssistantMessage,
    TextBlock,
    ToolUseBlock,
    TurnControl,
    TurnEndReason,
    UserMessage,
    query,
)
from trio_agent.testing import ScriptedAnswer, ScriptedModel

PROMPT = (UserMessage("Do the thing."),)


def script() -> list[ScriptedAnswer]:
    return [
        ScriptedAnswer(
            blocks=[
                TextBlock("First I look around."),
                ToolUseBlock("a", "Read", {"path": "a"}),
                ToolUseBlock("x", "Bash", {"command": "make"}),
                ToolUseBlock("b", "Read", {"path": "b"}),
            ],
            timing=SLOW,
        ),
        ScriptedAnswer(blocks=[ToolUseBlock("c", "Read", {"path": "c"})], timing=SLOW),
        ScriptedAnswer(blocks=[TextBlock("All done.")], timing=SLOW),
    ]


async def drive(
    at: Callable[[int, Any], bool], act: Callable[[TurnControl], None]
) -> tuple[Run, Log]:
    """Run the script; call ``act(control)`` when ``at(index, event)`` says so."""
    log = Log()
    model = ScriptedModel(script())
    control = TurnControl()
    events: list[Any] = []
    async with query(
        client_for(model),
        PROMPT,
        tools=make_tools(log, duration=1.0),
        model="big",
        max_tokens=8192,
        control=control,
    ) as stream:
        async for event in stream:
            if at(len(events), event):
                act(control)
            events.append(event)
    result = Run(events, [], model)
    check_run(result, PROMPT)
    assert model.open_streams == 0
    return result, log


async def full_length() -> tuple[int, int]:
    """The number of events of the whole turn, and the index of the final answer
    (an abort after it finds nothing left to cancel: the turn completes)."""
    result, _ = await drive(lambda i, e: False, lambda c: None)
    assert result.end.reason is TurnEndReason.COMPLETED
    final = result.events.index(result.of(AssistantMessage)[-1])
    return len(result.events), final


ABORTED = {TurnEndReason.ABORTED_STREAMING, TurnEndReason.ABORTED_TOOLS}


async def test_abort_at_every_event(autojump_clock: trio.testing.MockClock) -> None:
    total, final = await full_length()
    assert total > 30
    seen: set[TurnEndReason] = set()
    for k in range(total - 1):
        result, log = await drive(lambda i, e, k=k: i == k, TurnControl.abort)
        if k >= final:
            assert result.end.reason is TurnEndReason.COMPLETED
            continue
        assert result.end.reason in ABORTED, k
        assert result.end.abort_reason == "user_interrupted"
        seen.add(result.end.reason)
        # a cancelled tool never finished after the abort; none runs any more
        assert set(log.ends) <= set(log.starts)
        # nothing comes after the abort but the answers to what was already there
        after = result.events[k + 1 :]
        assert not any(isinstance(e, AssistantMessage) and e.stop_reason for e in after[1:])
    assert seen == ABORTED


async def test_interrupt_at_every_event(autojump_clock: trio.testing.MockClock) -> None:
    _, final = await full_length()
    for k in range(final):
        result, log = await drive(lambda i, e, k=k: i == k, TurnControl.interrupt)
        assert result.end.reason in ABORTED, k
        assert result.end.abort_reason == "interrupt"
        # Read tools ("block") that started ran to the end with a real result
        real = {
            r.tool_use_id
            for m in result.end.messages
            if isinstance(m, UserMessage)
            for r in m.tool_results
            if not r.is_error
        }
        assert {i for i in log.starts if i != "x"} <= set(log.ends)
        assert {i for i in log.ends if i != "x"} <= real | {"x"}
        # the Bash tool ("cancel") never finishes after an interrupt that found it running
        assert len(result.model.requests) <= 3


@settings(max_examples=150, deadline=None)
@given(when=st.floats(min_value=0, max_value=20), how=st.sampled_from(["abort", "interrupt"]))
def test_abort_at_any_time(when: float, how: str) -> None:
    async def main() -> None:
        log = Log()
        model = ScriptedModel(script())
        control = TurnControl()

        async def later() -> None:
            await trio.sleep(when)
            control.abort() if how == "abort" else control.interrupt()

        events: list[Any] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(later)
            async with query(
                client_for(model),
                PROMPT,
                tools=make_tools(log, duration=1.0),
                model="big",
                max_tokens=8192,
                control=control,
            ) as stream:
                events = [e async for e in stream]
        result = Run(events, [], model)
        check_run(result, PROMPT)
        assert model.open_streams == 0
        if result.end.reason is not TurnEndReason.COMPLETED:
            assert result.end.reason in ABORTED

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
