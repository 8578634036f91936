"""Typed results (issue 28): ``TurnOptions(output_type=...)`` on the provider's
structured output and on the final-result tool, validators that reject, a model
that never complies, and PartialOutput events, in virtual time over the scripted
model."""

from __future__ import annotations

import dataclasses
import enum
import json
from pathlib import Path
from typing import Any, Literal, TypedDict

import attrs
import httpx
import pytest
import trio

from trio_agent import (
    OpenAIClient,
    OutputRejected,
    OutputValidationError,
    PartialOutput,
    RetryPolicy,
    Session,
    TextBlock,
    Tool,
    ToolResult,
    ToolUseBlock,
    TransitionReason,
    TurnControl,
    TurnEndReason,
    TurnOptions,
    read_transcript,
    run,
    tool,
)
from trio_agent._loop._output import ACCEPTED
from trio_agent.testing import ScriptedAnswer, ScriptedModel, Timing, check_history

from .conftest import PERSON, Person, final, text, transitions, turn


def openai_client(model: ScriptedModel, api: str) -> OpenAIClient:
    http = httpx.AsyncClient(transport=model.transport())
    return OpenAIClient(
        api_key="sk-test",
        base_url="http://scripted/v1",
        http_client=http,
        api=api,  # pyright: ignore[reportArgumentType]
        retry=RetryPolicy.never(),
    )


# -- the two paths ---------------------------------------------------------------------


async def test_structured_output_on_anthropic(autojump_clock: Any) -> None:
    model = ScriptedModel([text(PERSON)])
    events, end = await turn(model.client(), TurnOptions(output_type=Person))
    assert end.reason is TurnEndReason.COMPLETED
    assert end.output == Person("Ada", 36)
    body = model.requests[0].body
    assert body["output_config"]["format"]["type"] == "json_schema"
    assert body["output_config"]["format"]["schema"]["required"] == ["name", "age"]
    assert "tools" not in body  # no final-result tool on this path
    assert transitions(events) == []


@pytest.mark.parametrize("api", ["responses", "chat"])
async def test_structured_output_on_openai(autojump_clock: Any, api: str) -> None:
    protocol = {"responses": "openai-responses", "chat": "openai-chat"}[api]
    model = ScriptedModel([text(PERSON)], protocol=protocol)  # pyright: ignore[reportArgumentType]
    _, end = await turn(openai_client(model, api), TurnOptions(output_type=Person), model="gpt-5")
    assert end.output == Person("Ada", 36)
    body = model.requests[0].body
    if api == "responses":
        fmt = body["text"]["format"]
        assert (fmt["type"], fmt["name"]) == ("json_schema", "final_result")
        assert fmt["schema"]["properties"]["age"] == {"type": "integer"}
    else:
        fmt = body["response_format"]
        assert fmt["type"] == "json_schema"
        assert fmt["json_schema"]["schema"]["properties"]["name"] == {"type": "string"}


@tool(concurrency_safe=True)
async def lookup(name: str) -> str:
    """Look a person up."""
    await trio.sleep(1)
    return f"{name} was born in 1815"


async def test_the_final_result_tool_ends_the_turn_while_other_tools_run(
    autojump_clock: Any,
) -> None:
    """An older model has no structured output: the final-result tool is used; the
    other tool of the same answer runs too, and no second model call is made."""
    answer = ScriptedAnswer(
        blocks=[
            TextBlock("Here it is."),
            ToolUseBlock("t1", "lookup", {"name": "Ada"}),
            ToolUseBlock("f1", "final_result", PERSON),
        ]
    )
    model = ScriptedModel([answer])
    events, end = await turn(
        model.client(),
        TurnOptions(output_type=Person),
        tools=[lookup],
        model="claude-3-5-haiku-20241022",
    )
    assert end.reason is TurnEndReason.COMPLETED
    assert end.output == Person("Ada", 36)
    assert len(model.requests) == 1
    body = model.requests[0].body
    assert "output_config" not in body
    (final_tool,) = [t for t in body["tools"] if t["name"] == "final_result"]
    assert final_tool["input_schema"]["required"] == ["name", "age"]
    results = {e.tool_use_id: e for e in events if isinstance(e, ToolResult)}
    assert results["t1"].content == "Ada was born in 1815"
    assert results["f1"].content == ACCEPTED
    assert end.messages[-1].role == "user"  # the answer's results close the history


@pytest.mark.parametrize("mode", ["tool", "native"])
async def test_output_mode_forces_a_path(autojump_clock: Any, mode: Any) -> None:
    model = ScriptedModel([final(PERSON) if mode == "tool" else text(PERSON)])
    _, end = await turn(
        model.client(), TurnOptions(output_type=Person, output_mode=mode), model="claude-3-haiku"
    )
    assert end.output == Person("Ada", 36)
    assert ("output_config" in model.requests[0].body) is (mode == "native")


@dataclasses.dataclass
class Point:
    x: float
    y: float = 0.0


class Movie(TypedDict):
    title: str
    year: int


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


CASES: list[tuple[Any, Any, Any]] = [
    (Point, {"x": 1.5}, Point(1.5)),
    (Movie, {"title": "M", "year": 1931}, {"title": "M", "year": 1931}),
    (Literal["yes", "no"], {"result": "no"}, "no"),
    (Color, {"result": "green"}, Color.GREEN),
    (list[Person], {"result": [PERSON, PERSON]}, [Person("Ada", 36)] * 2),
    (int, {"result": 7}, 7),
    (
        {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        {"n": 3},
        {"n": 3},
    ),
]


@pytest.mark.parametrize(("kind", "given", "built"), CASES)
@pytest.mark.parametrize("path", ["native", "tool"])
async def test_each_kind_of_output_type(
    autojump_clock: Any, kind: Any, given: Any, built: Any, path: Any
) -> None:
    model = ScriptedModel([text(given) if path == "native" else final(given)])
    _, end = await turn(model.client(), TurnOptions(output_type=kind, output_mode=path))
    assert end.reason is TurnEndReason.COMPLETED
    assert end.output == built
    assert type(end.output) is type(built)


# -- validators and retries ------------------------------------------------------------


@pytest.mark.parametrize("path", ["native", "tool"])
async def test_a_validator_rejects_once_then_accepts(
    autojump_clock: Any, path: Any, tmp_path: Path
) -> None:
    seen: list[Person] = []

    async def adult(person: Person) -> None:
        await trio.sleep(0.5)
        seen.append(person)
        if person.age < 18:
            raise OutputRejected("age must be at least 18")

    young = {"name": "Ada", "age": 9}
    answers = (
        [text(young), text(PERSON)] if path == "native" else [final(young), final(PERSON, "f2")]
    )
    model = ScriptedModel(answers)
    options = TurnOptions(output_type=Person, output_validators=[adult], output_mode=path)
    session = Session(
        model.client(),
        model="claude-sonnet-5-5",
        options=options,
        transcript_path=tmp_path / "t.jsonl",
    )
    events: list[Any] = []
    async with session, session.submit("go") as stream:
        async for event in stream:
            events.append(event)
    end = events[-1]
    assert end.reason is TurnEndReason.COMPLETED
    assert end.output == Person("Ada", 36)
    assert seen == [Person("Ada", 9), Person("Ada", 36)]
    assert transitions(events) == [TransitionReason.OUTPUT_RETRY]
    assert len(model.requests) == 2
    # the reason went back to the model, and is in the transcript
    sent = json.dumps(model.requests[1].body["messages"][-1])
    assert "age must be at least 18" in sent
    assert "age must be at least 18" in json.dumps(
        [m.to_api() for m in read_transcript(tmp_path / "t.jsonl").messages]
    )
    check_history(session.messages, strict=True)


@pytest.mark.parametrize("retries", [0, 1, 3])
@pytest.mark.parametrize("path", ["native", "tool", "no_call"])
async def test_a_model_that_never_complies_ends_output_invalid(
    autojump_clock: Any, retries: int, path: Any
) -> None:
    bad = {"name": "Ada"}  # no age
    answer = {"native": text(bad), "tool": final(bad), "no_call": text("I refuse.")}[path]
    answers = [
        attrs.evolve(
            answer,
            blocks=[
                attrs.evolve(b, id=f"f{i}") if isinstance(b, ToolUseBlock) else b
                for b in answer.blocks
            ],
        )
        for i in range(retries + 1)
    ]
    model = ScriptedModel(answers)
    mode = "native" if path == "native" else "tool"
    events, end = await turn(
        model.client(), TurnOptions(output_type=Person, output_retries=retries, output_mode=mode)
    )
    assert end.reason is TurnEndReason.OUTPUT_INVALID
    assert isinstance(end.error, OutputValidationError)
    assert end.error.attempts == retries + 1
    assert end.output is None
    assert len(model.requests) == retries + 1
    assert transitions(events) == [TransitionReason.OUTPUT_RETRY] * retries
    expected = {
        "native": "'age' is a required property",
        "tool": "'age' is a required property",
        "no_call": "final_result",
    }[path]
    assert expected in end.error.message


async def test_run_raises_output_validation_error(autojump_clock: Any) -> None:
    model = ScriptedModel([text("nope"), text("still nope")])
    with pytest.raises(OutputValidationError, match="not the JSON"):
        await run(model.client(), "go", model="claude-sonnet-5-5", output_type=Person)
    model = ScriptedModel([text(PERSON)])
    result = await run(model.client(), "go", model="claude-sonnet-5-5", output_type=Person)
    assert result.output == Person("Ada", 36)


async def test_a_validator_that_fails_is_the_turns_error(autojump_clock: Any) -> None:
    async def broken(value: Any) -> None:
        raise KeyError("oops")

    model = ScriptedModel([text(PERSON)])
    _, end = await turn(model.client(), TurnOptions(output_type=Person, output_validators=[broken]))
    assert end.reason is TurnEndReason.ERROR
    assert isinstance(end.error, KeyError)


async def test_an_abort_cancels_a_validator(autojump_clock: Any) -> None:
    started: list[float] = []
    control = TurnControl()

    async def slow(value: Any) -> None:
        started.append(trio.current_time())
        control.abort()
        await trio.sleep(100)
        raise AssertionError("not cancelled")  # pragma: no cover

    model = ScriptedModel([text(PERSON)])
    _, end = await turn(
        model.client(), TurnOptions(output_type=Person, output_validators=[slow]), control=control
    )
    assert started
    assert end.reason is TurnEndReason.ABORTED_TOOLS
    assert trio.current_time() < 100


# -- partial output --------------------------------------------------------------------


LONG: dict[str, Any] = {"name": "Ada Lovelace, Countess of Lovelace " * 8, "age": 36}


@pytest.mark.parametrize("path", ["native", "tool"])
async def test_partial_output_events_grow_to_the_value(autojump_clock: Any, path: Any) -> None:
    timing = Timing(text_chunk_size=5, json_chunk_size=5, token_delay=0.01)
    answer = text(LONG, timing=timing) if path == "native" else final(LONG, timing=timing)
    model = ScriptedModel([answer])
    events, end = await turn(model.client(), TurnOptions(output_type=Person, output_mode=path))
    partials = [e for e in events if isinstance(e, PartialOutput)]
    assert len(partials) >= 3
    assert all(p.model_call == 1 for p in partials)
    sizes = [p.received for p in partials]
    assert sizes == sorted(sizes)
    names = [p.value.get("name", "") for p in partials]
    assert all(LONG["name"].startswith(n) for n in names)
    assert len(names[-1]) > len(names[0])
    assert end.output == Person(LONG["name"], 36)
    # every partial came before the end
    assert events.index(partials[-1]) < len(events) - 1


async def test_the_final_tool_is_not_asked_about(autojump_clock: Any) -> None:
    """can_use_tool and the tool hooks guard the model's tools, not the loop's own
    final-result tool: a deny-everything policy still lets the output through."""
    from trio_agent import Deny, Hooks

    asked: list[str] = []

    async def deny_all(tool: Tool, input: Any, ctx: Any) -> Deny:
        asked.append(tool.name)
        return Deny("no tools")

    async def pre(call: Any) -> Deny:
        asked.append("hook " + call.name)
        return Deny("no tools")

    answer = ScriptedAnswer(
        blocks=[
            ToolUseBlock("t1", "lookup", {"name": "Ada"}),
            ToolUseBlock("f1", "final_result", PERSON),
        ]
    )
    model = ScriptedModel([answer])
    events, end = await turn(
        model.client(),
        TurnOptions(
            output_type=Person,
            output_mode="tool",
            can_use_tool=deny_all,
            hooks=Hooks(pre_tool_use=pre),
        ),
        tools=[lookup],
    )
    assert end.output == Person("Ada", 36)
    assert asked == ["lookup"]  # denied by can_use_tool, so the hook never saw it
    assert result_of(events, "t1").content == "no tools"


def result_of(events: list[Any], tool_use_id: str) -> ToolResult:
    (result,) = [e for e in events if isinstance(e, ToolResult) and e.tool_use_id == tool_use_id]
    return result


@pytest.mark.parametrize("api", ["responses", "chat"])
async def test_the_final_result_tool_on_openai(autojump_clock: Any, api: str) -> None:
    protocol = {"responses": "openai-responses", "chat": "openai-chat"}[api]
    model = ScriptedModel([final(PERSON, "call_1")], protocol=protocol)  # pyright: ignore[reportArgumentType]
    _, end = await turn(
        openai_client(model, api),
        TurnOptions(output_type=Person, output_mode="tool"),
        model="gpt-5",
    )
    assert end.output == Person("Ada", 36)
    assert len(model.requests) == 1
    assert "final_result" in json.dumps(model.requests[0].body["tools"])
    assert "text" not in model.requests[0].body or "format" not in model.requests[0].body["text"]
