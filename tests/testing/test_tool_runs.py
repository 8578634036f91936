"""The harness for users' own tools: tool_calls, run_tool_calls, check_tool_run."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import hypothesis
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trio_agent
from trio_agent import AbortReason, Allow, Deny, ToolContext, ToolOutput, ToolResult, ToolUseBlock
from trio_agent._executor import ToolExecutor
from trio_agent.testing import (
    InvariantViolation,
    ScenarioError,
    ToolCall,
    ToolCallBatch,
    ToolRun,
    TraceEvent,
    check_tool_run,
    result_kind,
    run_tool_calls,
    tool_calls,
)
from trio_agent.tools import Glob, Grep, Read, Workspace

N_SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 4}},
    "required": ["n"],
    "additionalProperties": False,
}


@trio_agent.tool(input_schema=N_SCHEMA, concurrency_safe=True)
async def look(input: Mapping[str, Any], ctx: ToolContext) -> str:
    """Wait n seconds, reporting progress; n == 3 raises."""
    ctx.progress("looking")
    await trio.sleep(input["n"])
    if input["n"] == 3:
        raise LookupError("nothing at 3")
    return f"looked {input['n']}"


@trio_agent.tool(
    input_schema={"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]},
    concurrency_safe=lambda input: input["cmd"].startswith("ls"),
    interrupt_behavior="cancel",
    cancels_siblings_on_error=True,
)
async def shell(input: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
    """Run for len(cmd) % 4 seconds; an odd length fails."""
    await trio.sleep(len(input["cmd"]) % 4)
    failed = len(input["cmd"]) % 2 == 1
    return ToolOutput(f"ran {input['cmd']!r}", is_error=failed)


@trio_agent.tool(input_schema=N_SCHEMA)
async def write(input: Mapping[str, Any], ctx: ToolContext) -> list[trio_agent.TextBlock]:
    """Not concurrency-safe; returns content blocks."""
    await trio.sleep(input["n"] / 2)
    return [trio_agent.TextBlock(f"wrote {input['n']}")]


TOOLS = [look, shell, write]


def batch(*calls: tuple[float, str, Mapping[str, Any]], **kwargs: Any) -> ToolCallBatch:
    return ToolCallBatch(
        [
            ToolCall(ToolUseBlock(f"toolu_{i}", name, dict(input)), arrival)
            for i, (arrival, name, input) in enumerate(calls)
        ],
        **kwargs,
    )


# -- properties -------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(tool_calls(TOOLS, max_calls=8))
def test_in_test_tools_keep_every_invariant(calls: ToolCallBatch) -> None:
    for cap in (1, 3):
        run = run_tool_calls(TOOLS, calls, max_concurrency=cap)
        check_tool_run(run)
        assert len(run.results()) == len([e for e in run.events if e.kind == "added"])


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    root = tmp_path_factory.mktemp("ws")
    (root / "sub").mkdir()
    (root / "a.txt").write_text("alpha\nbeta\n")
    (root / "sub" / "b.py").write_text("def beta():\n    return 'alpha'\n")
    return Workspace(root)


PATHS = st.sampled_from(["a.txt", "sub/b.py", "missing.txt", "sub", "../outside"])


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_built_in_tools_keep_every_invariant(workspace: Workspace, data: st.DataObject) -> None:
    tools = [Read(workspace), Glob(workspace), Grep(workspace)]
    strategy = tool_calls(
        tools,
        inputs={
            "Read": st.fixed_dictionaries({"file_path": PATHS}),
            "Grep": st.fixed_dictionaries(
                {"pattern": st.sampled_from(["alpha", "^def", "(", "beta$"])},
                optional={"path": PATHS},
            ),
        },
        max_calls=5,
        time_unit=0.005,
    )
    run = run_tool_calls(tools, data.draw(strategy), clock="real", timeout=30)
    check_tool_run(run)


def test_inputs_come_from_the_schema_when_not_given() -> None:
    seen: list[Mapping[str, Any]] = []

    @given(tool_calls([look, shell], defects=False, min_calls=1))
    @settings(max_examples=50, deadline=None)
    def collect(calls: ToolCallBatch) -> None:
        for call in calls.calls:
            tool = {"look": look, "shell": shell}[call.block.name]
            assert tool.validate(call.block.input) is None
            seen.append(call.block.input)

    collect()
    assert any("n" in s for s in seen)
    assert any("cmd" in s for s in seen)


def _defect_kind(block: Any) -> str | None:
    tool = {t.name: t for t in TOOLS}.get(block.name)
    if tool is None:
        return "unknown"
    if block.invalid_input is not None:
        return "invalid_json"
    if tool.validate(block.input) is not None:
        return "schema_error"
    return None


@pytest.mark.parametrize("kind", ["unknown", "invalid_json", "schema_error"])
def test_defects_are_generated_and_answered_with_errors(kind: str) -> None:
    # Search for a batch holding this kind of defect (defects are drawn at a small rate:
    # a fixed number of random examples could miss one), then run it for real.
    batch = hypothesis.find(
        tool_calls(TOOLS, actions=False, permissions=False, min_calls=4),
        lambda calls: any(_defect_kind(c.block) == kind for c in calls.calls),
        settings=settings(max_examples=5000, database=None),
    )
    run = run_tool_calls(TOOLS, batch)
    check_tool_run(run)
    answered = 0
    for i, call in enumerate(batch.calls):
        result = run.result(i)
        assert result is not None
        if _defect_kind(call.block) is not None:
            assert result.is_error
            assert not result.started
            answered += 1
    assert answered >= 1


# -- examples -----------------------------------------------------------------------


def test_a_run_records_a_timeline() -> None:
    run = run_tool_calls(
        TOOLS, batch((0, "look", {"n": 2}), (0, "look", {"n": 1}), (1, "write", {"n": 2}))
    )
    check_tool_run(run)
    times = {(e.kind, e.index): e.time for e in run.events if e.kind in ("started", "stopped")}
    assert times == {
        ("started", 0): 0, ("started", 1): 0, ("stopped", 1): 1,
        ("stopped", 0): 2, ("started", 2): 2, ("stopped", 2): 3,
    }  # fmt: skip
    assert [r.content for r in run.results()] == [
        "looked 2",
        "looked 1",
        (trio_agent.TextBlock("wrote 2"),),
    ]
    assert run.statistics.peak_concurrency == 2
    assert run.of(0, "progress")[0].detail.data == "looking"


def test_a_raising_tool_gives_an_error_naming_the_exception() -> None:
    run = run_tool_calls(TOOLS, batch((0, "look", {"n": 3})))
    check_tool_run(run)
    (result,) = run.results()
    assert result.is_error
    assert "LookupError" in str(result.content)
    assert isinstance(run.of(0, "stopped")[0].detail, LookupError)


def test_a_cascade_cancels_its_batch_and_an_interrupt_spares_block_tools() -> None:
    run = run_tool_calls(
        TOOLS,
        batch((0, "look", {"n": 4}), (0, "shell", {"cmd": "ls -l"}), (2, "look", {"n": 1})),
    )
    check_tool_run(run)  # "ls -l" fails after a second
    assert [result_kind(r) for r in run.results()] == ["sibling_error", "error", "sibling_error"]

    run = run_tool_calls(
        TOOLS,
        batch((0, "look", {"n": 2}), (0, "shell", {"cmd": "ls -la"}), actions=[(1, "interrupt")]),
    )
    check_tool_run(run)
    assert [result_kind(r) for r in run.results()] == ["ok", "interrupt"]


def test_permissions_from_the_batch_and_from_the_user() -> None:
    calls = ToolCallBatch(
        [
            ToolCall(ToolUseBlock("toolu_a", "look", {"n": 1}), 0, "deny"),
            ToolCall(ToolUseBlock("toolu_b", "look", {"n": 2}), 0),
            ToolCall(ToolUseBlock("toolu_c", "look", {"n": 4}), 0),
        ]
    )
    asked: list[str] = []

    async def can_use_tool(tool: Any, input: Mapping[str, Any], ctx: ToolContext) -> Any:
        asked.append(ctx.tool_use_id)
        return Deny("no fours") if input["n"] == 4 else Allow()

    run = run_tool_calls(TOOLS, calls, can_use_tool=can_use_tool)
    check_tool_run(run)
    assert sorted(asked) == ["toolu_b", "toolu_c"]  # the batch's Deny comes first
    assert [(r.is_error, r.content) for r in run.results()] == [
        (True, "denied toolu_a (test batch)"),
        (False, "looked 2"),
        (True, "no fours"),
    ]

    rejected = attrs.evolve(calls, calls=[attrs.evolve(calls.calls[0], permission="reject")])
    run = run_tool_calls(TOOLS, rejected)
    check_tool_run(run)
    assert run.turn_cancelled
    assert {r.abort_reason for r in run.results()} == {AbortReason.PERMISSION_REJECTED}


def test_a_hanging_tool_is_reported() -> None:
    @trio_agent.tool(input_schema={"type": "object"})
    async def hang(input: Mapping[str, Any], ctx: ToolContext) -> str:
        """Never returns."""
        await trio.sleep_forever()
        raise AssertionError

    with pytest.raises(ScenarioError, match="did not end within 100"):
        run_tool_calls([hang], batch((0, "hang", {})), timeout=100)
    run = run_tool_calls([hang], batch((0, "hang", {}), actions=[(5, "cancel_turn")]))
    check_tool_run(run)
    assert result_kind(run.results()[0]) == "user_interrupted"


def test_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="clock"):
        run_tool_calls(TOOLS, batch(), clock="wall")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown tools"):
        tool_calls(TOOLS, inputs={"nope": st.just({})})
    with pytest.raises(ValueError, match="at least one tool"):
        tool_calls([])
    with pytest.raises(ValueError, match="time_unit"):
        tool_calls(TOOLS, time_unit=0)
    with pytest.raises(ScenarioError, match="unique"):
        ToolCallBatch(
            [ToolCall(ToolUseBlock("x", "look", {})), ToolCall(ToolUseBlock("x", "look", {}))]
        )
    with pytest.raises(ScenarioError, match="arrival order"):
        batch((1, "look", {"n": 1}), (0, "look", {"n": 1}))
    with pytest.raises(ScenarioError, match="unknown action"):
        batch(actions=[(1, "explode")])


# -- check_tool_run catches broken runs (the mutations common to check_trace are in
# test_checker_mutations.py) ---------------------------------------------------------


@pytest.fixture
def good() -> ToolRun:
    run = run_tool_calls(
        TOOLS,
        batch(
            (0, "look", {"n": 2}),
            (0, "look", {"n": 1}),
            (1, "write", {"n": 2}),
            (1, "look", {"n": 3}),
        ),
    )
    check_tool_run(run)
    return run


def edit(run: ToolRun, events: list[TraceEvent], **changes: Any) -> ToolRun:
    return attrs.evolve(run, events=tuple(events), **changes)


def find(run: ToolRun, kind: str, index: int) -> int:
    return next(p for p, e in enumerate(run.events) if e.kind == kind and e.index == index)


def with_result(run: ToolRun, index: int, **changes: Any) -> ToolRun:
    events = list(run.events)
    pos = find(run, "delivered", index)
    result: ToolResult = events[pos].detail
    events[pos] = attrs.evolve(events[pos], detail=attrs.evolve(result, **changes))
    return edit(run, events)


def test_a_raised_exception_reported_as_success_is_caught(good: ToolRun) -> None:
    broken = with_result(good, 3, content="Error: look failed")
    with pytest.raises(InvariantViolation, match="raised LookupError but the result"):
        check_tool_run(broken)


def test_a_result_that_is_not_what_the_tool_returned_is_caught(good: ToolRun) -> None:
    with pytest.raises(InvariantViolation, match="the tool returned"):
        check_tool_run(with_result(good, 1, content="looked 7"))
    with pytest.raises(InvariantViolation, match="neither text nor content blocks"):
        check_tool_run(with_result(good, 1, content=(42,)))


def test_an_interrupted_block_tool_is_caught(good: ToolRun) -> None:
    events = [*good.events]
    events.insert(0, TraceEvent(0.0, "action", -1, "interrupt"))
    broken = with_result(edit(good, events), 0, abort_reason=AbortReason.INTERRUPT, is_error=True)
    pos = find(broken, "finished", 0)
    events = list(broken.events)
    events[pos] = attrs.evolve(
        events[pos],
        detail=attrs.evolve(events[pos].detail, is_error=True, abort_reason=AbortReason.INTERRUPT),
    )
    with pytest.raises(InvariantViolation, match="interrupt cancelled block call 0"):
        check_tool_run(edit(broken, events))


def test_an_executor_that_ignores_safety_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    def start_everything(self: Any) -> None:
        for call in list(self._queue):
            if call.result is None and self._slots < self._max_concurrency:
                self._queue.remove(call)
                self._start(call)  # ignores safety

    calls = batch((0, "look", {"n": 2}), (0, "write", {"n": 2}), (0, "shell", {"cmd": "ls"}))
    check_tool_run(run_tool_calls(TOOLS, calls))
    monkeypatch.setattr(ToolExecutor, "_pump", start_everything)
    with pytest.raises(InvariantViolation, match="non-safe call 1 overlapped"):
        check_tool_run(run_tool_calls(TOOLS, calls))


def test_the_built_in_tools_really_run_on_the_real_clock(workspace: Workspace) -> None:
    tools = [Read(workspace), Glob(workspace), Grep(workspace)]
    calls = batch(
        (0, "Read", {"file_path": "a.txt"}),
        (0, "Grep", {"pattern": "alpha"}),
        (0.01, "Glob", {"pattern": "**/*.py"}),
        (0.01, "Read", {"file_path": "../outside"}),
    )
    run = run_tool_calls(tools, calls, clock="real", timeout=30)
    check_tool_run(run)
    read, grep, glob, outside = run.results()
    assert "alpha" in str(read.content)
    assert not read.is_error
    assert "a.txt" in str(grep.content)
    assert "b.py" in str(grep.content)
    assert "b.py" in str(glob.content)
    assert outside.is_error
    assert run.statistics.peak_concurrency >= 1
