"""The stop hooks on a turn the final-result tool ends (the typed-output tool path):
they run as on a text end; a block makes the turn go on with its reason, the
accepted value kept (the output unless the model calls the tool again), every
tool_use answered."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import (
    HookError,
    Hooks,
    Message,
    StopHookResult,
    ToolResultBlock,
    ToolUseBlock,
    TransitionReason,
    TurnControl,
    TurnEnd,
    TurnEndReason,
    TurnOptions,
    UserMessage,
)
from trio_agent._loop._output import ACCEPTED
from trio_agent.testing import ScriptedAnswer, ScriptedModel

from .conftest import Person, final, text, transitions, turn

#: A model without structured output: the final-result tool is used.
OLD = "claude-3-5-haiku-20241022"


def named(name: str, id: str) -> ScriptedAnswer:
    return final({"name": name, "age": 36}, id)


async def stop_turn(
    model: ScriptedModel, options: TurnOptions, control: TurnControl | None = None
) -> tuple[list[Any], TurnEnd]:
    """A turn of the final-result tool's path (output type Person unless given)."""
    if not options.output_type:
        options = attrs.evolve(options, output_type=Person)
    return await turn(model.client(), options, model=OLD, control=control)


def results_of(message: Message) -> dict[str, str]:
    return {
        b.tool_use_id: str(b.content) for b in message.content if isinstance(b, ToolResultBlock)
    }


async def test_the_stop_hook_runs_when_the_final_result_ends_the_turn(
    autojump_clock: Any,
) -> None:
    seen: list[tuple[int, bool]] = []

    async def stop(messages: tuple[Message, ...], *, stop_hook_active: bool) -> None:
        seen.append((len(messages), stop_hook_active))
        # It sees the answer and the final_result's result.
        assert results_of(messages[-1]) == {"f1": ACCEPTED}

    model = ScriptedModel([named("Ada", "f1")])
    events, end = await stop_turn(model, TurnOptions(hooks=Hooks(stop=stop)))
    assert seen == [(3, False)]
    assert end.reason is TurnEndReason.COMPLETED
    assert end.output == Person("Ada", 36)
    assert transitions(events) == []
    assert len(model.requests) == 1


async def test_a_stop_hook_that_blocks_once_then_allows_keeps_the_value(
    autojump_clock: Any,
) -> None:
    """The block's reason follows final_result's result; the model's text end then
    ends the turn with the value accepted before (not asked again, not lost)."""
    seen: list[bool] = []

    async def stop(messages: tuple[Message, ...], *, stop_hook_active: bool) -> StopHookResult:
        seen.append(stop_hook_active)
        return StopHookResult(block=not stop_hook_active, message="Check the age first.")

    model = ScriptedModel([named("Ada", "f1"), text("Checked: 36.")])
    events, end = await stop_turn(model, TurnOptions(hooks=Hooks(stop=stop)))
    assert seen == [False, True]
    assert end.reason is TurnEndReason.COMPLETED
    assert end.output == Person("Ada", 36)
    assert transitions(events) == [TransitionReason.STOP_HOOK_BLOCKING]
    roles = [m.role for m in end.messages]
    assert roles == ["user", "assistant", "user", "user", "assistant"]
    assert results_of(end.messages[2]) == {"f1": ACCEPTED}
    assert end.messages[3] == UserMessage("Check the age first.")
    # The model read the result and the reason in its second call.
    second = json.dumps(model.requests[1].body["messages"])
    assert ACCEPTED in second
    assert "Check the age first." in second
    # The hook's message was sent as an event, once.
    sent = [e for e in events if e == UserMessage("Check the age first.")]
    assert len(sent) == 1


async def test_after_a_block_a_new_final_result_is_the_output(autojump_clock: Any) -> None:
    async def stop(messages: tuple[Message, ...], *, stop_hook_active: bool) -> StopHookResult:
        return StopHookResult(block=not stop_hook_active, message="Use her full name.")

    model = ScriptedModel([named("Ada", "f1"), named("Ada Lovelace", "f2")])
    _, end = await stop_turn(model, TurnOptions(hooks=Hooks(stop=stop)))
    assert end.reason is TurnEndReason.COMPLETED
    assert end.output == Person("Ada Lovelace", 36)
    assert len(model.requests) == 2


async def test_the_deprecated_stop_hooks_run_there_too(autojump_clock: Any) -> None:
    calls: list[bool] = []

    async def hook(messages: tuple[Message, ...], *, stop_hook_active: bool) -> StopHookResult:
        calls.append(stop_hook_active)
        return StopHookResult(block=not stop_hook_active, message="Go on.")

    with pytest.warns(DeprecationWarning, match="stop_hooks"):
        options = TurnOptions(stop_hooks=[hook], output_type=Person)
    _, end = await stop_turn(ScriptedModel([named("Ada", "f1"), text("ok")]), options)
    assert calls == [False, True]
    assert end.output == Person("Ada", 36)


async def test_past_max_stop_hook_blocks_the_turn_ends_with_its_value(
    autojump_clock: Any,
) -> None:
    async def stop(messages: tuple[Message, ...], *, stop_hook_active: bool) -> StopHookResult:
        return StopHookResult(block=True, message="Never done.")

    model = ScriptedModel([named("Ada", "f1"), named("Ada L.", "f2")])
    _, end = await stop_turn(model, TurnOptions(hooks=Hooks(stop=stop), max_stop_hook_blocks=1))
    assert end.reason is TurnEndReason.STOP_HOOK_LIMIT
    assert end.output == Person("Ada L.", 36)
    assert end.messages[-1].role == "user"  # f2's result closes the history


async def test_a_failing_stop_hook_is_the_turns_error(autojump_clock: Any) -> None:
    async def stop(messages: tuple[Message, ...], *, stop_hook_active: bool) -> None:
        raise RuntimeError("boom")

    _, end = await stop_turn(
        ScriptedModel([named("Ada", "f1")]), TurnOptions(hooks=Hooks(stop=stop))
    )
    assert end.reason is TurnEndReason.ERROR
    assert isinstance(end.error, HookError)
    assert end.error.hook == "stop"
    assert results_of(end.messages[-1]) == {"f1": ACCEPTED}


async def test_an_abort_while_the_stop_hook_runs(autojump_clock: Any) -> None:
    control = TurnControl()
    cancelled: list[float] = []

    async def stop(messages: tuple[Message, ...], *, stop_hook_active: bool) -> None:
        control.abort()
        try:
            await trio.sleep(1000)
        except trio.Cancelled:
            cancelled.append(trio.current_time())
            raise

    start = trio.current_time()
    model = ScriptedModel([named("Ada", "f1"), text("never asked")])
    _, end = await stop_turn(model, TurnOptions(hooks=Hooks(stop=stop)), control)
    assert cancelled
    assert cancelled[0] - start < 100
    assert end.reason is TurnEndReason.ABORTED_TOOLS
    assert end.abort_reason == "user_interrupted"
    assert results_of(end.messages[-1]) == {"f1": ACCEPTED}  # paired
    assert len(model.requests) == 1


@settings(max_examples=40, deadline=None)
@given(
    blocks=st.lists(st.booleans(), min_size=1, max_size=4),
    answers=st.lists(st.sampled_from(["final", "text"]), min_size=4, max_size=4),
)
def test_any_sequence_of_blocks_ends_with_the_last_accepted_value(
    blocks: list[bool], answers: list[str]
) -> None:
    """The hook blocks as *blocks* says (then allows); after the first final_result
    the model answers with a new final_result or text as *answers* says: the turn
    completes with the last accepted value, the history valid."""
    verdicts = iter(blocks)

    async def stop(messages: tuple[Message, ...], *, stop_hook_active: bool) -> StopHookResult:
        return StopHookResult(block=next(verdicts, False), message="again")

    script = [named("p0", "f0")] + [
        named(f"p{i}", f"f{i}") if kind == "final" else text("ok")
        for i, kind in enumerate(answers, 1)
    ]

    async def main() -> None:
        _, end = await stop_turn(
            ScriptedModel(script), TurnOptions(hooks=Hooks(stop=stop), max_stop_hook_blocks=10)
        )
        assert end.reason is TurnEndReason.COMPLETED
        leading = next((i for i, b in enumerate(blocks) if not b), len(blocks))
        calls = [m for m in end.messages if m.role == "assistant"]
        assert len(calls) == leading + 1  # one model call per block, then the end
        names = [
            b.input["name"]
            for m in calls
            for b in m.content
            if isinstance(b, ToolUseBlock) and b.name == "final_result"
        ]
        assert end.output == Person(names[-1], 36)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
