"""A subagent is a tool running one nested turn: its result is the child's final
text, its events reach the parent as typed progress, its usage joins the parent's,
its permission questions go to the parent's can_use_tool, its depth is bounded."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

import trio_agent
from trio_agent import (
    Allow,
    Reject,
    SubagentText,
    SubagentToolFinished,
    SubagentToolProgress,
    SubagentToolStarted,
    TextBlock,
    Tool,
    ToolContext,
    ToolProgress,
    ToolResult,
    ToolUseBlock,
    TurnOptions,
    Usage,
    subagent,
)
from trio_agent.testing import (
    ScriptedAnswer,
    ScriptedModel,
    Timing,
    check_history,
    no_leaks,
    run_virtual,
)


def answer(*blocks: Any, inp: int = 10, out: int = 5, delay: float = 0.1) -> ScriptedAnswer:
    return ScriptedAnswer(
        blocks=list(blocks),
        usage=Usage(input_tokens=inp, output_tokens=out),
        timing=Timing(token_delay=delay),
    )


async def look(input: Mapping[str, Any], ctx: ToolContext) -> str:
    ctx.progress("looking")
    await trio.sleep(1)
    return f"saw {input.get('what', '?')}"


LOOK = Tool("look", "Look at something.", {"type": "object"}, look, concurrency_safe=True)


async def test_a_subagent_answers_with_its_final_text(
    autojump_clock: Any, routed: Any, parent_turn: Any
) -> None:
    parent = ScriptedModel(
        [
            answer(ToolUseBlock("p1", "researcher", {"prompt": "find x", "description": "x"})),
            answer(TextBlock("the parent is done"), inp=20, out=7),
        ]
    )
    child = ScriptedModel(
        [
            answer(TextBlock("let me look"), ToolUseBlock("c1", "look", {"what": "x"}), inp=3),
            answer(TextBlock("x is 42"), inp=4, out=2),
        ]
    )
    researcher = subagent(
        "researcher", "Finds facts.", tools=[LOOK], system="You research.", model="child"
    )
    client = routed({"parent": parent, "child": child})
    with no_leaks(models=[parent, child], processes=False, fds=False):
        events, end = await parent_turn(client, [researcher])
    assert end.reason == "completed"
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.content == "x is 42"
    assert not result.is_error
    # The child's own history: its prompt first, its tool paired.
    assert [run.agent for run in end.subagents] == ["researcher"]
    run = end.subagents[0]
    assert run.tool_use_id == "p1"
    assert run.end.messages[0] == trio_agent.UserMessage("find x")
    assert run.end.reason == "completed"
    assert run.end.turns == 2
    assert end.subagent_turns == 1
    # Usage summed exactly: the parent's two calls and the child's two.
    assert end.usage.input_tokens == 10 + 20 + 3 + 4
    assert end.usage.output_tokens == 5 + 7 + 5 + 2
    assert run.end.usage.input_tokens == 7
    # The child asked with its own system prompt and model, the prompt alone.
    body = child.requests[0].body
    assert body["model"] == "child"
    assert len(body["messages"]) == 1
    assert "find x" in str(body["messages"][0])
    assert "You research." in str(body["system"])
    # Progress: typed, in order, naming the subagent and its depth.
    data = [e.data for e in events if isinstance(e, ToolProgress) and e.tool_use_id == "p1"]
    kinds = [type(d) for d in data]
    assert SubagentText in kinds
    started = [d for d in data if isinstance(d, SubagentToolStarted)]
    assert started == [SubagentToolStarted("researcher", 1, "c1", "look", {"what": "x"})]
    assert SubagentToolProgress("researcher", 1, "c1", "looking") in data
    finished = [d for d in data if isinstance(d, SubagentToolFinished)]
    assert finished == [SubagentToolFinished("researcher", 1, "c1", False)]
    assert kinds.index(SubagentToolStarted) < kinds.index(SubagentToolFinished)
    text = "".join(d.text for d in data if isinstance(d, SubagentText))
    assert text == "let me lookx is 42"


async def test_the_default_model_is_the_parents_and_the_tool_is_safe_when_its_tools_are(
    autojump_clock: Any, parent_turn: Any
) -> None:
    model = ScriptedModel(
        [
            answer(ToolUseBlock("p1", "helper", {"prompt": "hi"})),
            answer(TextBlock("child says hi")),
            answer(TextBlock("done")),
        ]
    )
    helper = subagent("helper", "Helps.", tools=[LOOK], system="s")
    assert helper.concurrency_safe is True
    unsafe = subagent("u", "d", tools=[Tool("w", "d", {"type": "object"}, look)], system="s")
    assert unsafe.concurrency_safe is False
    assert subagent("none", "d", tools=[], system="s").concurrency_safe is True
    events, _end = await parent_turn(model.client(), [helper], model="parent-model")
    assert [r.body["model"] for r in model.requests] == ["parent-model"] * 3
    assert next(e for e in events if isinstance(e, ToolResult)).content == "child says hi"


async def test_the_child_asks_the_parents_can_use_tool_with_its_name(
    autojump_clock: Any, parent_turn: Any
) -> None:
    asked: list[tuple[str, str | None, int]] = []

    async def can_use_tool(tool: Tool, input: Mapping[str, Any], ctx: ToolContext) -> Any:
        turn = ctx.turn
        assert turn is not None
        asked.append((tool.name, turn.agent, turn.depth))
        return Allow()

    model = ScriptedModel(
        [
            answer(ToolUseBlock("p1", "helper", {"prompt": "look"})),
            answer(ToolUseBlock("c1", "look", {})),
            answer(TextBlock("looked")),
            answer(TextBlock("done")),
        ]
    )
    helper = subagent("helper", "Helps.", tools=[LOOK], system="s")
    await parent_turn(model.client(), [helper], options=TurnOptions(can_use_tool=can_use_tool))
    assert asked == [("helper", None, 0), ("look", "helper", 1)]


async def test_a_rejection_inside_the_child_is_the_calls_error_result(
    autojump_clock: Any, parent_turn: Any
) -> None:
    async def can_use_tool(tool: Tool, input: Mapping[str, Any], ctx: ToolContext) -> Any:
        return Reject("not that") if tool.name == "look" else Allow()

    model = ScriptedModel(
        [
            answer(ToolUseBlock("p1", "helper", {"prompt": "look"})),
            answer(TextBlock("I will look"), ToolUseBlock("c1", "look", {})),
            answer(TextBlock("the parent goes on")),
        ]
    )
    helper = subagent("helper", "Helps.", tools=[LOOK], system="s")
    events, end = await parent_turn(
        model.client(), [helper], options=TurnOptions(can_use_tool=can_use_tool)
    )
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.is_error
    assert "rejected" in str(result.content)
    assert "I will look" in str(result.content)
    child = end.subagents[0].end
    assert child.reason == "permission_rejected"
    assert end.reason == "completed"


async def test_the_depth_limit_stops_recursive_delegation(
    autojump_clock: Any, parent_turn: Any
) -> None:
    # a delegates to b, b to c, c to d: d would be the fourth level, and is refused.
    model = ScriptedModel(
        [
            *[answer(ToolUseBlock(f"to_{n}", n, {"prompt": "again"})) for n in "abcd"],
            *[answer(TextBlock("ok"))] * 4,
        ]
    )
    d = subagent("d", "Delegates.", tools=[], system="s")
    c = subagent("c", "Delegates.", tools=[d], system="s")
    b = subagent("b", "Delegates.", tools=[c], system="s")
    a = subagent("a", "Delegates.", tools=[b], system="s")
    _events, end = await parent_turn(model.client(), [a])
    assert end.subagent_turns == 3
    ends = [end.subagents[0].end]
    while ends[-1].subagents:
        ends.append(ends[-1].subagents[0].end)
    assert [e.reason for e in ends] == ["completed"] * 3
    refused = [m for m in ends[-1].messages if isinstance(m, trio_agent.UserMessage)][1]
    assert "nest at most 3" in str(refused.tool_results[0].content)
    assert refused.tool_results[0].is_error
    assert len(model.requests) == 8  # d never asked the model


async def test_outside_a_turn_the_subagent_says_so() -> None:
    helper = subagent("helper", "Helps.", tools=[], system="s")
    value = await helper.run({"prompt": "x"}, ToolContext("t", "helper"))
    assert value.is_error
    assert "inside a turn" in str(value.content)


def test_bad_definitions_are_refused() -> None:
    with pytest.raises(trio_agent.ToolDefinitionError):
        subagent("bad name", "d", tools=[], system="s")
    with pytest.raises(trio_agent.ToolDefinitionError):
        subagent("a", "d", tools=[], system="s", timeout=0)
    with pytest.raises(trio_agent.ToolDefinitionError):
        subagent("a", "d", tools=[], system="s", max_depth=0)
    with pytest.raises(trio_agent.ToolDefinitionError):
        subagent("a", "d", tools=[LOOK, LOOK], system="s")
    with pytest.raises(TypeError):
        subagent("a", "d", tools=["x"], system="s")  # type: ignore[list-item]
    with pytest.raises(TypeError):
        subagent("a", "d", tools=[], system="s", options={})  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        subagent("a", "d", tools="abc", system="s")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        subagent("a", "d", tools=[], system="s", model="")
    with pytest.raises(TypeError):
        subagent("a", "d", tools=[], system="s", max_tokens="9")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_tokens"):
        subagent("a", "d", tools=[], system="s", max_tokens=0)


@attrs.frozen
class Weather:
    city: str
    celsius: int


async def test_a_typed_subagent_answers_with_its_value_as_json(
    autojump_clock: Any, parent_turn: Any
) -> None:
    model = ScriptedModel(
        [
            answer(ToolUseBlock("p1", "forecaster", {"prompt": "Lyon?"})),
            answer(TextBlock('{"city": "Lyon", "celsius": 21}')),
            answer(TextBlock("done")),
        ]
    )
    forecaster = subagent(
        "forecaster", "d", tools=[], system="s", options=TurnOptions(output_type=Weather)
    )
    events, end = await parent_turn(model.client(), [forecaster])
    result = next(e for e in events if isinstance(e, ToolResult))
    assert json.loads(str(result.content)) == {"city": "Lyon", "celsius": 21}
    assert end.subagents[0].end.output == Weather("Lyon", 21)


async def test_a_child_that_cannot_start_is_the_calls_error_result(
    autojump_clock: Any, parent_turn: Any
) -> None:
    # A budget on a model without a known price: query() refuses to start.
    model = ScriptedModel(
        [answer(ToolUseBlock("p1", "helper", {"prompt": "x"})), answer(TextBlock("ok"))]
    )
    helper = subagent("helper", "d", tools=[], system="s", options=TurnOptions(max_budget_usd=1.0))
    events, end = await parent_turn(model.client(), [helper])
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.is_error
    assert "max_budget_usd" in str(result.content)
    assert end.reason == "completed"
    assert end.subagents == ()
    assert len(model.requests) == 2


_any_text = st.lists(st.characters(), max_size=30).map("".join)


@settings(max_examples=40, deadline=None)
@given(
    prompt=st.one_of(_any_text, st.integers(), st.none(), st.lists(st.integers(), max_size=3)),
    note=st.one_of(st.none(), _any_text),
)
def test_any_input_gives_a_valid_child_or_a_clear_error(prompt: Any, note: Any) -> None:
    """Text of any kind (lone surrogates too) starts the child with a valid history;
    anything else is refused before the child starts, naming the input."""
    call: dict[str, Any] = {"prompt": prompt}
    if note is not None:
        call["description"] = note

    async def main() -> None:
        model = ScriptedModel(
            [
                answer(ToolUseBlock("p1", "helper", call)),
                answer(TextBlock("child")),
                answer(TextBlock("ok")),
            ]
        )
        helper = subagent("helper", "d", tools=[], system="s")
        async with trio_agent.query(
            model.client(), [trio_agent.UserMessage("go")], tools=[helper], model="m", max_tokens=50
        ) as events:
            items = [e async for e in events]
        result = next(e for e in items if isinstance(e, ToolResult))
        end = items[-1]
        if isinstance(prompt, str):
            assert result.content == "child"
            (run,) = end.subagents
            check_history(run.end.messages, strict=True)
            sent = model.requests[1].body["messages"]
            assert len(sent) == 1
        else:
            assert result.is_error
            assert "InputValidationError" in str(result.content)
            assert end.subagents == ()
            assert len(model.requests) == 2

    run_virtual(main)


async def test_the_parents_subagent_stop_hook_judges_the_childs_end(
    autojump_clock: Any, parent_turn: Any
) -> None:
    seen: list[tuple[str, str, bool]] = []

    async def subagent_stop(agent: str, history: Any, *, stop_hook_active: bool) -> Any:
        text = history[-1].content[0].text
        seen.append((agent, text, stop_hook_active))
        if text == "lazy":
            return trio_agent.StopHookResult(block=True, message="Check your work.")
        return None

    model = ScriptedModel(
        [
            answer(ToolUseBlock("p1", "helper", {"prompt": "work"})),
            answer(TextBlock("lazy")),
            answer(TextBlock("checked")),
            answer(TextBlock("done")),
        ]
    )
    helper = subagent("helper", "Helps.", tools=[], system="s")
    options = TurnOptions(hooks=trio_agent.Hooks(subagent_stop=subagent_stop))
    events, end = await parent_turn(model.client(), [helper], options=options)
    # Called for the child's answers only (the parent's end is its own stop hook's).
    assert seen == [("helper", "lazy", False), ("helper", "checked", True)]
    assert next(e for e in events if isinstance(e, ToolResult)).content == "checked"
    assert end.subagents[0].end.messages[-2] == trio_agent.UserMessage("Check your work.")
