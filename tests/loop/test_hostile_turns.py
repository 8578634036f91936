"""Turns never raise for bad data: any malformed answer ends the turn with
``TurnEnd(reason="error")`` and a valid history, every tool_use answered.

The real client over ScriptedModel (RawAnswer: the exact bytes), in virtual time,
under a leak check.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import pytest
import trio
from hypothesis import given, settings

from trio_agent import (
    AnthropicClient,
    AssistantMessage,
    RetryPolicy,
    StreamLimitError,
    StreamProtocolError,
    TextBlock,
    Tool,
    ToolContext,
    ToolUseBlock,
    TrioAgentError,
    TurnEnd,
    TurnOptions,
    Usage,
)
from trio_agent.testing import (
    LeakCheck,
    RawAnswer,
    ScriptedAnswer,
    ScriptedModel,
    run_virtual,
    serve_scripted_model,
)
from trio_agent.testing import strategies as tst


def raw(events: list[Any]) -> bytes:
    return b"".join(b"event: e\ndata: " + json.dumps(e).encode() + b"\n\n" for e in events)


def tools(ran: list[str], delay: float = 1.0) -> list[Tool]:
    async def run(input: Mapping[str, Any], ctx: ToolContext) -> str:
        ran.append(ctx.tool_use_id)
        await trio.sleep(delay)
        return "ok"

    return [
        Tool(name, "d", {"type": "object"}, run, concurrency_safe=True)
        for name in ("Read", "Write", "Bash", "Grep", "Glob", "WebFetch", "mcp__srv__do_it")
    ]


@pytest.fixture(scope="module")
def hostile_turn(turn: Any) -> Callable[..., Awaitable[tuple[list[Any], TurnEnd, list[str]]]]:
    """``events, end, ran = await hostile_turn(answers, loopback=False)``: ``turn``
    (at most 3 model calls, the tools of ``tools()``) against *answers* then "done"
    answers, under a leak check; over a real loopback HTTP server (real time) with
    ``loopback=True``. *ran*: the ids of the tool calls that started."""

    async def hostile_turn(
        answers: list[Any], *, loopback: bool = False
    ) -> tuple[list[Any], TurnEnd, list[str]]:
        model = ScriptedModel([*answers, *[ScriptedAnswer(blocks=[TextBlock("done")])] * 3])
        ran: list[str] = []
        with LeakCheck(models=[model], processes=False, fds=False):
            async with contextlib.AsyncExitStack() as stack:
                if loopback:  # a real HTTP/1.1 server on a loopback socket, real time
                    base_url = await stack.enter_async_context(serve_scripted_model(model))
                    client: Any = AnthropicClient(
                        api_key="test", base_url=base_url, retry=RetryPolicy(max_retries=0)
                    )
                else:
                    client = model.client()
                events, end = await turn(
                    client,
                    tools=tools(ran, 0.0 if loopback else 1.0),
                    strict=False,
                    options=TurnOptions(max_turns=3),
                )
        assert model.requests  # the turn asked the model: the subject ran
        return events, end, ran

    return hostile_turn


def check_outcome(end: TurnEnd) -> None:
    """A malformed answer ends the turn with a typed error; one the mutations left
    valid ends it as any answer does (completed, or at the turn limit) with no error."""
    assert end.reason in ("error", "completed", "max_turns"), end.reason
    if end.reason == "error":
        assert isinstance(end.error, TrioAgentError), end.error
        assert end.message
    else:
        assert end.error is None
        assert isinstance(end.messages[-1], AssistantMessage)


@settings(max_examples=40, deadline=None)
@given(events=tst.mutated_event_streams())
def test_a_malformed_answer_ends_the_turn_never_raises(
    events: list[Any], hostile_turn: Any
) -> None:
    _, end, _ = run_virtual(lambda: hostile_turn([RawAnswer(chunks=[(0.0, raw(events))])]))
    check_outcome(end)


@settings(max_examples=10, deadline=None)
@given(events=tst.mutated_event_streams())
def test_a_malformed_answer_over_a_loopback_server_ends_the_turn(
    events: list[Any], hostile_turn: Any
) -> None:
    _, end, _ = trio.run(
        lambda: hostile_turn([RawAnswer(chunks=[(0.0, raw(events))])], loopback=True)
    )
    check_outcome(end)


def _start(content: list[Any] | None = None) -> dict[str, Any]:
    """A message_start as the scripted model renders it; *content* puts blocks in it."""
    answer = ScriptedAnswer(blocks=[], message_id="msg_1", model="m", usage=Usage(1, 1))
    start = answer.events()[0]
    start["message"]["content"] = content or []
    return start


def _tool(index: int, tool_id: str, partial_json: str = '{"p": 1}') -> list[dict[str, Any]]:
    return [
        {
            "type": "content_block_start",
            "index": index,
            "content_block": {"type": "tool_use", "id": tool_id, "name": "Read", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": index,
            "delta": {"type": "input_json_delta", "partial_json": partial_json},
        },
        {"type": "content_block_stop", "index": index},
    ]


_END = [
    {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 5}},
    {"type": "message_stop"},
]
_DEEP = '{"a": ' + "[" * 5000 + "]" * 5000 + "}"


@pytest.mark.parametrize(
    ("events", "error", "match"),
    [
        ([_start(), *_tool(0, "t1"), *_tool(1, "t1"), *_END], StreamProtocolError, "second tool"),
        (
            [_start([{"type": "tool_use", "id": "t1", "name": "Read", "input": {}}]), *_END],
            StreamProtocolError,
            "tool_use block in message_start",
        ),
        ([_start(), *_tool(0, "t1"), *_tool(1, "t2", _DEEP), *_END], StreamLimitError, "nested"),
        (
            [_start(), *_tool(0, "t1"), *_tool(1, "t2", '{"a": ' + "[" * 150 + "]" * 150 + "}")],
            StreamLimitError,
            "max_json_depth",
        ),
    ],
    ids=["duplicate tool_use ids", "tool_use in message_start", "deep input", "deeper than limit"],
)
async def test_malformed_answers_end_the_turn_with_an_error(
    autojump_clock: Any, events: list[Any], error: type[Exception], match: str, hostile_turn: Any
) -> None:
    stream, end, ran = await hostile_turn([RawAnswer(chunks=[(0.0, raw(events))])])
    assert end.reason == "error"
    assert isinstance(end.error, error)
    assert match in str(end.error)
    # Every tool_use in the history is answered (check_history) and none ran twice.
    uses = [b.id for m in end.messages for b in getattr(m, "tool_uses", ())]
    assert len(uses) == len(set(uses))
    assert len(ran) == len(set(ran))
    assert any(isinstance(e, TurnEnd) for e in stream)


async def test_the_tool_before_a_bad_block_is_answered(
    autojump_clock: Any, hostile_turn: Any
) -> None:
    """A tool that started before the malformed block keeps its place in the history."""
    events = [_start(), *_tool(0, "t1"), *_tool(1, "t1"), *_END]
    _, end, ran = await hostile_turn([RawAnswer(chunks=[(0.0, raw(events))])])
    (use,) = [b for m in end.messages for b in getattr(m, "tool_uses", ())]
    assert use == ToolUseBlock("t1", "Read", {"p": 1})
    assert ran in ([], ["t1"])
