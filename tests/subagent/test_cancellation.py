"""Cancellation by structure: whatever cuts a subagent's call (the parent aborted or
interrupted, a sibling's error, the subagent's timeout, a rejection inside it), the
child's turn ends with abort semantics before the call unwinds: every tool_use at
every level answered, every history valid, no task left, usage summed exactly."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

import hypothesis
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import (
    AbortReason,
    SubagentToolStarted,
    TextBlock,
    Tool,
    ToolContext,
    ToolProgress,
    ToolResult,
    ToolUseBlock,
    TurnControl,
    TurnEnd,
    Usage,
    UserMessage,
    query,
    subagent,
)
from trio_agent.testing import (
    LeakCheck,
    ScriptedAnswer,
    ScriptedModel,
    Timing,
    check_history,
    run_virtual,
)


def answer(*blocks: Any, inp: int = 10, out: int = 5, delay: float = 0.1) -> ScriptedAnswer:
    return ScriptedAnswer(
        blocks=list(blocks),
        usage=Usage(input_tokens=inp, output_tokens=out),
        timing=Timing(token_delay=delay),
    )


async def wait(input: Mapping[str, Any], ctx: ToolContext) -> str:
    ctx.progress("waiting")
    await trio.sleep(float(input.get("s", 1)))
    return "waited"


async def fail(input: Mapping[str, Any], ctx: ToolContext) -> str:
    await trio.sleep(float(input.get("s", 0.5)))
    raise RuntimeError("it broke")


WAIT = Tool(
    "wait", "Wait.", {"type": "object"}, wait, concurrency_safe=True, interrupt_behavior="cancel"
)
BLOCKING_WAIT = Tool(
    "block_wait",
    "Wait; an interrupt lets it finish.",
    {"type": "object"},
    wait,
    concurrency_safe=True,
)
FAIL = Tool(
    "fail", "Fail.", {"type": "object"}, fail, concurrency_safe=True, cancels_siblings_on_error=True
)


def tokens(usage: Usage) -> tuple[int, int]:
    return usage.input_tokens, usage.output_tokens


def check_turn(end: TurnEnd, client: Any, models: Sequence[str]) -> None:
    """Every history valid at every level, and the usage summed exactly: the turn's
    is what the calls of *models* (its own first, then its subagents') were billed,
    each child's what its own model and the models below it were billed."""
    check_history(end.messages, strict=True)
    total = sum((client.billed[name] for name in models), Usage())
    assert tokens(end.usage) == tokens(total), (end.usage, total)
    for run in end.subagents:
        check_history(run.end.messages, strict=True)
    if len(models) > 1 and len(end.subagents) == 1:
        check_turn(end.subagents[0].end, client, models[1:])


async def test_two_subagents_run_side_by_side(
    autojump_clock: Any, routed: Any, parent_turn: Any
) -> None:
    parent = ScriptedModel(
        [
            answer(
                ToolUseBlock("pa", "a", {"prompt": "task a"}),
                ToolUseBlock("pb", "b", {"prompt": "task b"}),
            ),
            answer(TextBlock("both done")),
        ]
    )
    kids = {
        name: ScriptedModel(
            [answer(ToolUseBlock(f"{name}1", "wait", {"s": 5})), answer(TextBlock(f"{name} done"))]
        )
        for name in ("ca", "cb")
    }
    a = subagent("a", "A.", tools=[WAIT], system="a", model="ca")
    b = subagent("b", "B.", tools=[WAIT], system="b", model="cb")
    client = routed({"parent": parent, **kids})
    start = trio.current_time()
    with LeakCheck(models=[parent, *kids.values()], processes=False, fds=False):
        events, end = await parent_turn(client, [a, b])
    elapsed = trio.current_time() - start
    results = {e.tool_use_id: e.content for e in events if isinstance(e, ToolResult)}
    assert results == {"pa": "ca done", "pb": "cb done"}
    # Side by side: each child waits 5 s, the whole turn takes well under 10.
    assert 5 < elapsed < 7, elapsed
    assert sorted(r.agent for r in end.subagents) == ["a", "b"]
    assert end.subagent_turns == 2
    check_turn(end, client, ["parent", "ca", "cb"])
    for run in end.subagents:
        check_turn(run.end, client, ["c" + run.agent])


async def test_a_sibling_error_in_the_parent_aborts_the_child(
    autojump_clock: Any, routed: Any, parent_turn: Any
) -> None:
    parent = ScriptedModel(
        [
            answer(
                ToolUseBlock("pa", "a", {"prompt": "long task"}),
                ToolUseBlock("pf", "fail", {"s": 2}),
            ),
            answer(TextBlock("recovering")),
        ]
    )
    kid = ScriptedModel(
        [
            answer(TextBlock("working"), ToolUseBlock("k1", "wait", {"s": 30})),
            answer(TextBlock("no")),
        ]
    )
    a = subagent("a", "A.", tools=[WAIT], system="a", model="kid")
    client = routed({"parent": parent, "kid": kid})
    with LeakCheck(models=[parent, kid], processes=False, fds=False):
        events, end = await parent_turn(client, [a, FAIL])
    results = {e.tool_use_id: e for e in events if isinstance(e, ToolResult)}
    assert results["pa"].abort_reason is AbortReason.SIBLING_ERROR
    assert "fail" in str(results["pa"].content)
    child = end.subagents[0].end
    assert child.reason == "aborted_tools"
    assert child.abort_reason is AbortReason.SIBLING_ERROR
    # The child's own tool was answered: cut while running, its history valid.
    (cut,) = child.messages[-1].tool_results
    assert cut.tool_use_id == "k1"
    assert cut.is_error
    assert "stopped while running" in str(cut.content)
    assert len(kid.requests) == 1
    assert trio.current_time() < 10  # the child's 30 s tool did not run out
    check_turn(end, client, ["parent", "kid"])


async def test_a_child_tool_that_cancels_its_siblings(
    autojump_clock: Any, routed: Any, parent_turn: Any
) -> None:
    parent = ScriptedModel(
        [answer(ToolUseBlock("pa", "a", {"prompt": "x"})), answer(TextBlock("done"))]
    )
    kid = ScriptedModel(
        [
            answer(ToolUseBlock("k1", "wait", {"s": 30}), ToolUseBlock("k2", "fail", {"s": 1})),
            answer(TextBlock("my sibling failed")),
        ]
    )
    a = subagent("a", "A.", tools=[WAIT, FAIL], system="a", model="kid")
    assert a.concurrency_safe is True
    client = routed({"parent": parent, "kid": kid})
    events, end = await parent_turn(client, [a])
    child = end.subagents[0].end
    assert child.reason == "completed"
    assert "parallel tool call fail" in str(child.messages[2].content)
    assert next(e for e in events if isinstance(e, ToolResult)).content == "my sibling failed"
    check_turn(end, client, ["parent", "kid"])


async def test_the_subagents_timeout_aborts_its_turn(
    autojump_clock: Any, routed: Any, parent_turn: Any
) -> None:
    parent = ScriptedModel(
        [answer(ToolUseBlock("pa", "a", {"prompt": "x"})), answer(TextBlock("it timed out"))]
    )
    kid = ScriptedModel([answer(TextBlock("slow"), ToolUseBlock("k1", "wait", {"s": 60}))])
    a = subagent("a", "A.", tools=[WAIT], system="a", model="kid", timeout=5)
    client = routed({"parent": parent, "kid": kid})
    with LeakCheck(models=[parent, kid], processes=False, fds=False):
        events, end = await parent_turn(client, [a])
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.is_error
    assert "timed out after 5 s" in str(result.content)
    child = end.subagents[0].end
    assert child.reason == "aborted_tools"
    assert end.reason == "completed"
    assert 5 <= trio.current_time() < 7
    check_turn(end, client, ["parent", "kid"])


async def test_an_interrupt_lets_the_childs_blocking_tools_finish(
    autojump_clock: Any, routed: Any, parent_turn: Any
) -> None:
    parent = ScriptedModel([answer(ToolUseBlock("pa", "a", {"prompt": "x"}))])
    kid = ScriptedModel(
        [answer(ToolUseBlock("k1", "block_wait", {"s": 3}), ToolUseBlock("k2", "wait", {"s": 30}))]
    )
    a = subagent("a", "A.", tools=[BLOCKING_WAIT, WAIT], system="a", model="kid")
    control = TurnControl()

    def on_event(event: Any) -> None:
        data = event.data if isinstance(event, ToolProgress) else None
        if isinstance(data, SubagentToolStarted) and data.name == "wait":
            control.interrupt()

    client = routed({"parent": parent, "kid": kid})
    _, end = await parent_turn(client, [a], control=control, on_event=on_event)
    assert end.abort_reason is AbortReason.INTERRUPT
    child = end.subagents[0].end
    assert child.abort_reason is AbortReason.INTERRUPT
    results = {b.tool_use_id: b for b in child.messages[-1].tool_results}
    assert results["k1"].content == "waited"  # "block": ran to its end
    assert results["k2"].is_error  # "cancel": cut
    check_turn(end, client, ["parent", "kid"])


# -- the property: abort (or interrupt) the parent at any event of the child ------------

_text = st.lists(st.sampled_from("ab ✓"), min_size=1, max_size=6).map("".join)


@st.composite
def child_scripts(draw: st.DrawFn) -> list[ScriptedAnswer]:
    """One to three answers of the child: text, tool calls (waiting, failing, nested
    subagent), the last plain text."""
    answers: list[ScriptedAnswer] = []
    n = 0
    for _ in range(draw(st.integers(0, 2))):
        blocks: list[Any] = [TextBlock(draw(_text))] if draw(st.booleans()) else []
        for _ in range(draw(st.integers(1, 3))):
            n += 1
            kind = draw(st.sampled_from(["wait", "block_wait", "fail", "inner"]))
            if kind == "inner":
                blocks.append(ToolUseBlock(f"k{n}", "inner", {"prompt": "deeper"}))
            else:
                blocks.append(
                    ToolUseBlock(f"k{n}", kind, {"s": draw(st.sampled_from([0.0, 0.5, 2.0]))})
                )
        answers.append(answer(*blocks, inp=draw(st.integers(1, 50)), out=3))
    answers.append(answer(TextBlock(draw(_text)), inp=7, out=2))
    return answers


async def cut_turn(
    routed: Any, script: list[ScriptedAnswer], at: int, pause: float | None, how: str
) -> None:
    """A parent turn calling subagent ``a`` whose child follows *script*; the parent is
    aborted (or interrupted) when the *at*-th child event reaches it (after *pause*)."""
    parent = ScriptedModel(
        [answer(ToolUseBlock("pa", "a", {"prompt": "x"})), answer(TextBlock("parent done"))]
    )
    kid = ScriptedModel(script)
    grandkid = ScriptedModel([answer(TextBlock("deep"))] * 10)
    inner = subagent("inner", "Inner.", tools=[WAIT], system="i", model="grandkid")
    a = subagent("a", "A.", tools=[WAIT, BLOCKING_WAIT, FAIL, inner], system="a", model="kid")
    client = routed({"parent": parent, "kid": kid, "grandkid": grandkid})
    control = TurnControl()
    seen = 0
    events: list[Any] = []

    async with trio.open_nursery() as nursery:

        async def act() -> None:
            if pause is not None:
                await trio.sleep(pause)
            control.abort() if how == "abort" else control.interrupt()

        async with query(
            client, [UserMessage("go")], tools=[a], model="parent", max_tokens=100, control=control
        ) as stream:
            async for event in stream:
                events.append(event)
                if isinstance(event, ToolProgress) and event.tool_use_id == "pa":
                    if seen == at:
                        nursery.start_soon(act)
                    seen += 1
    end = events[-1]
    assert isinstance(end, TurnEnd)
    assert kid.requests  # the child ran
    check_turn(end, client, ["parent", "kid", "grandkid"])
    # Every tool_use the parent announced has exactly one result event.
    results = [e.tool_use_id for e in events if isinstance(e, ToolResult)]
    assert results == ["pa"]
    assert len(end.subagents) == 1
    child = end.subagents[0].end
    if end.abort_reason is not None and child.reason != "completed":
        assert child.abort_reason in (AbortReason.USER_INTERRUPTED, AbortReason.INTERRUPT)
    for m in (parent, kid, grandkid):
        assert m.open_streams == 0
    hypothesis.event(f"parent {end.reason}, child {child.reason}")


@settings(max_examples=100, deadline=None)
@given(
    script=child_scripts(),
    at=st.integers(0, 12),
    pause=st.one_of(st.none(), st.sampled_from([0.0, 0.05, 0.3, 1.0, 2.5])),
    how=st.sampled_from(["abort", "interrupt"]),
)
def test_cutting_the_parent_at_any_child_event(
    routed: Any, script: list[ScriptedAnswer], at: int, pause: float | None, how: str
) -> None:
    run_virtual(lambda: cut_turn(routed, script, at, pause, how))


async def leave_at(routed: Any, at: int, how: str) -> int:
    """A parent turn with a subagent whose consumer leaves at event *at* (``break`` or
    an exception); the number of events the turn had sent by then."""
    parent = ScriptedModel(
        [answer(ToolUseBlock("pa", "a", {"prompt": "x"})), answer(TextBlock("parent done"))]
    )
    kid = ScriptedModel(
        [
            answer(TextBlock("looking"), ToolUseBlock("k1", "wait", {"s": 1})),
            answer(TextBlock("kid done")),
        ]
    )
    a = subagent("a", "A.", tools=[WAIT], system="a", model="kid")
    client = routed({"parent": parent, "kid": kid})
    seen = 0
    try:
        async with query(
            client, [UserMessage("go")], tools=[a], model="parent", max_tokens=100
        ) as stream:
            async for _ in stream:
                if seen == at:
                    if how == "break":
                        break
                    raise LookupError("the consumer failed")
                seen += 1
    except LookupError:
        assert how == "raise"
    for m in (parent, kid):
        assert m.open_streams == 0
    return seen


def test_leaving_the_parent_at_any_event_ends_the_child_quietly(routed: Any) -> None:
    total = run_virtual(partial(leave_at, routed, 10_000, "break"))
    assert total > 8  # the parent's call, the child's progress, the results, the end
    for how in ("break", "raise"):
        for at in range(total):
            assert run_virtual(partial(leave_at, routed, at, how)) == at
