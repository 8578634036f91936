"""Where the Messages API body carries prompt-cache breakpoints (``cache_control``).

Pure: the provider's ``request_body`` of a canonical request, no I/O. The loop's
side (the option reaching the request) is at the end, over the scripted model.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from trio_agent import (
    AssistantMessage,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    TurnOptions,
    UserMessage,
    query,
)
from trio_agent._model._anthropic import MAX_CACHE_BREAKPOINTS, MessagesProvider
from trio_agent._model._provider import ModelRequest
from trio_agent.testing import ScriptedAnswer, ScriptedModel

EPHEMERAL = {"type": "ephemeral"}
HOUR = {"type": "ephemeral", "ttl": "1h"}
TOOLS = [
    {"name": "Read", "description": "read a file", "input_schema": {"type": "object"}},
    {"name": "Bash", "description": "run a command", "input_schema": {"type": "object"}},
]


def body(
    messages: Any,
    *,
    cache: Any = "5m",
    system: Any = "You are terse.",
    tools: Any = TOOLS,
    extra_body: Any = None,
) -> dict[str, Any]:
    request = ModelRequest(
        "m", messages, 100, system=system, tools=tools, extra_body=extra_body, cache=cache
    )
    return MessagesProvider().request_body(request, stream=True)


def marks(sent: dict[str, Any]) -> list[tuple[str, Any]]:
    """Every breakpoint of *sent*, in prompt order: (where, its cache_control)."""
    found: list[tuple[str, Any]] = []
    for i, tool in enumerate(sent.get("tools", ())):
        if "cache_control" in tool:
            found.append((f"tools[{i}]", tool["cache_control"]))
    system = sent.get("system")
    if isinstance(system, list):
        for i, block in enumerate(system):
            if "cache_control" in block:
                found.append((f"system[{i}]", block["cache_control"]))
    for m, message in enumerate(sent["messages"]):
        if isinstance(message["content"], list):
            for b, block in enumerate(message["content"]):
                if "cache_control" in block:
                    found.append((f"messages[{m}][{b}]", block["cache_control"]))
    return found


def loop_history(calls: int, parallel: int = 1) -> list[Any]:
    """The messages of the *calls*-th request of a tool loop."""
    history: list[Any] = [UserMessage("Fix the build.")]
    for n in range(calls - 1):
        uses = [ToolUseBlock(f"t{n}_{k}", "Read", {"path": f"f{k}"}) for k in range(parallel)]
        history.append(
            AssistantMessage(id=f"msg_{n}", model="m", content=(TextBlock("Looking."), *uses))
        )
        history.append(UserMessage(tuple(ToolResultBlock(u.id, f"contents {u.id}") for u in uses)))
    return history


def test_the_first_call_marks_the_tools_and_the_system_prompt() -> None:
    sent = body([UserMessage("Fix the build.")])
    # A string system prompt becomes one text block, to carry its mark; a string
    # message keeps its form (nothing after it to mark yet).
    assert sent["system"] == [
        {"type": "text", "text": "You are terse.", "cache_control": EPHEMERAL}
    ]
    assert sent["messages"] == [{"role": "user", "content": "Fix the build."}]
    assert marks(sent) == [("tools[1]", EPHEMERAL), ("system[0]", EPHEMERAL)]


def test_a_tool_loop_marks_the_end_and_the_previous_end() -> None:
    sent = body(loop_history(3))
    assert marks(sent) == [
        ("tools[1]", EPHEMERAL),
        ("system[0]", EPHEMERAL),
        ("messages[2][0]", EPHEMERAL),  # where the previous call ended: read back exactly
        ("messages[4][0]", EPHEMERAL),  # the end: written for the next call
    ]


@pytest.mark.parametrize("calls", [1, 2, 3, 10, 20])
def test_never_more_than_the_apis_limit(calls: int) -> None:
    assert len(marks(body(loop_history(calls, parallel=3)))) <= MAX_CACHE_BREAKPOINTS


def test_one_hour() -> None:
    sent = body(loop_history(2), cache="1h")
    assert {str(mark) for _, mark in marks(sent)} == {str(HOUR)}


def test_off_sends_the_body_as_it_was() -> None:
    sent = body(loop_history(3), cache=None)
    assert marks(sent) == []
    assert sent["system"] == "You are terse."
    assert sent["messages"] == [m.to_param() for m in loop_history(3)]


def test_the_callers_values_are_never_changed() -> None:
    history = [copy.deepcopy(m.to_param()) for m in loop_history(3)]
    system = [{"type": "text", "text": "You are terse."}]
    tools = copy.deepcopy(TOOLS)
    before = copy.deepcopy((history, system, tools))
    sent = body(history, system=system, tools=tools)
    assert len(marks(sent)) == 4
    assert (history, system, tools) == before


def test_the_users_breakpoints_count_first_and_stay() -> None:
    history = [m.to_param() for m in loop_history(3)]
    history[0] = {
        "role": "user",
        "content": [{"type": "text", "text": "Fix it.", "cache_control": HOUR}],
    }
    system = [{"type": "text", "text": "Rules.", "cache_control": HOUR}]
    sent = body(history, system=system, cache="5m")
    # Theirs: messages[0] and system[0] (kept as they are, 1h); ours fill the two
    # slots left, most valuable first: the end, then where the previous call ended.
    assert marks(sent) == [
        ("system[0]", HOUR),
        ("messages[0][0]", HOUR),
        ("messages[2][0]", EPHEMERAL),
        ("messages[4][0]", EPHEMERAL),
    ]


def test_four_of_the_users_leave_no_room() -> None:
    tools = [{**t, "cache_control": EPHEMERAL} for t in TOOLS]
    system = [{"type": "text", "text": s, "cache_control": EPHEMERAL} for s in ("a", "b")]
    sent = body(loop_history(3), system=system, tools=tools)
    assert len(marks(sent)) == 4
    assert all(where.startswith(("tools", "system")) for where, _ in marks(sent))


def test_a_block_the_user_marked_is_not_marked_twice() -> None:
    history = [m.to_param() for m in loop_history(2)]
    history[-1]["content"] = [{**history[-1]["content"][0], "cache_control": HOUR}]
    sent = body(history)
    where = [w for w, _ in marks(sent)]
    assert len(where) == len(set(where))
    assert ("messages[2][0]", HOUR) in marks(sent)


def test_a_longer_ttl_never_follows_a_shorter_one() -> None:
    # The API refuses a 1h breakpoint after a 5m one: after the user's 5m mark on
    # the system prompt, ours are 5m too, even when 1h was asked for.
    system = [{"type": "text", "text": "Rules.", "cache_control": EPHEMERAL}]
    sent = body(loop_history(3), system=system, cache="1h")
    assert marks(sent) == [
        ("tools[1]", HOUR),
        ("system[0]", EPHEMERAL),
        ("messages[2][0]", EPHEMERAL),
        ("messages[4][0]", EPHEMERAL),
    ]
    # And ours before the user's 1h mark are 1h, even when 5m was asked for.
    history = [m.to_param() for m in loop_history(3)]
    history[-1]["content"] = [{**history[-1]["content"][0], "cache_control": HOUR}]
    sent = body(history, cache="5m")
    assert [mark for _, mark in marks(sent)] == [HOUR] * 4


def test_the_apis_automatic_caching_takes_the_end() -> None:
    # A top-level cache_control (the API places that breakpoint on the last block
    # itself) takes a slot and the end: ours go elsewhere.
    sent = body(loop_history(3), extra_body={"cache_control": EPHEMERAL})
    assert marks(sent) == [
        ("tools[1]", EPHEMERAL),
        ("system[0]", EPHEMERAL),
        ("messages[2][0]", EPHEMERAL),
    ]


def test_marks_skip_thinking_empty_text_and_string_messages() -> None:
    history = [
        UserMessage("Go."),
        AssistantMessage(
            id="a",
            model="m",
            content=(TextBlock("Plan."), ThinkingBlock("hmm", "sig"), TextBlock("")),
        ),
        UserMessage("And then?"),
    ]
    sent = body(history, tools=None, system=None)
    # The end is a string: the mark goes on the last block before it that takes one.
    assert marks(sent) == [("messages[1][0]", EPHEMERAL)]
    assert sent["messages"][2] == {"role": "user", "content": "And then?"}


def test_nothing_to_mark() -> None:
    assert marks(body([UserMessage("Hi")], tools=None, system=None)) == []
    assert marks(body([UserMessage("Hi")], tools=None, system="")) == []


def test_the_non_streaming_request_is_marked_the_same() -> None:
    request = ModelRequest("m", loop_history(3), 100, "sys", TOOLS, cache="5m")
    streamed = MessagesProvider().request_body(request, stream=True)
    whole = MessagesProvider().request_body(request, stream=False)
    assert {**streamed, "stream": False} == whole


# -- the option, through the loop ---------------------------------------------------


async def test_the_loop_sends_the_option(autojump_clock: Any) -> None:
    model = ScriptedModel([ScriptedAnswer(blocks=[TextBlock("ok")])])
    options = TurnOptions(cache="1h")
    async with query(
        model.client(),
        [UserMessage("hi")],
        tools=[],
        model="m",
        max_tokens=10,
        system="sys",
        options=options,
    ) as events:
        async for _ in events:
            pass
    assert model.requests[0].body["system"] == [
        {"type": "text", "text": "sys", "cache_control": HOUR}
    ]


async def test_off_the_loop_passes_no_keyword(autojump_clock: Any) -> None:
    seen: list[dict[str, Any]] = []
    inner = ScriptedModel([ScriptedAnswer(blocks=[TextBlock("ok")])]).client()

    class Older:
        """A client written before the ``cache`` keyword."""

        def stream(
            self,
            *,
            model: str,
            messages: Any,
            max_tokens: int,
            system: Any = None,
            tools: Any = None,
            extra_body: Any = None,
        ) -> Any:
            seen.append({"model": model})
            return inner.stream(
                model=model,
                messages=messages,
                max_tokens=max_tokens,
                system=system,
                tools=tools,
                extra_body=extra_body,
            )

    async with query(
        Older(),
        [UserMessage("hi")],
        tools=[],
        model="m",
        max_tokens=10,
        options=TurnOptions(cache=None),
    ) as events:
        async for _ in events:
            pass
    assert seen == [{"model": "m"}]


def test_the_option_is_checked() -> None:
    with pytest.raises(ValueError, match="cache"):
        TurnOptions(cache="10m")  # type: ignore[arg-type]
    assert TurnOptions(cache=None).cache is None
