"""Deferred approvals: ``can_use_tool`` answers ``Defer()``, the turn ends
``awaiting_approval`` with the calls unanswered, and ``submit(approvals=...)`` (in
this process, or after ``Session.resume`` in another) runs or answers them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import (
    Allow,
    ApprovalError,
    AssistantMessage,
    Defer,
    Deny,
    PendingApprovals,
    PermissionDecision,
    Reject,
    Session,
    TextBlock,
    Tool,
    ToolContext,
    ToolResult,
    ToolUseBlock,
    TurnEnd,
    TurnEndReason,
    TurnOptions,
    Usage,
    UserMessage,
    read_transcript,
)
from trio_agent.testing import ScriptedAnswer, ScriptedModel, Timing, check_history

FAST = Timing(token_delay=0.01, block_delay=0.01)


@attrs.define
class Ran:
    calls: list[str] = attrs.field(factory=list[str])


def tools(ran: Ran) -> list[Tool]:
    async def run(input: Mapping[str, Any], ctx: ToolContext) -> str:
        ran.calls.append(ctx.tool_use_id)
        await trio.sleep(float(input.get("seconds", 1.0)))
        return f"{ctx.tool_name} ran {ctx.tool_use_id}"

    schema: dict[str, Any] = {"type": "object"}
    return [
        Tool("Read", "Read.", schema, run, concurrency_safe=True),
        Tool("Bash", "Run a command.", schema, run),
    ]


async def ask_later_for_bash(
    tool: Tool, input: Mapping[str, Any], ctx: ToolContext
) -> PermissionDecision:
    return Defer() if tool.name == "Bash" else Allow()


def answer(*blocks: Any) -> ScriptedAnswer:
    return ScriptedAnswer(
        blocks=list(blocks), usage=Usage(input_tokens=10, output_tokens=3), timing=FAST
    )


def bash(i: str, **input: Any) -> ToolUseBlock:
    return ToolUseBlock(i, "Bash", {"command": f"echo {i}", **input})


def read(i: str) -> ToolUseBlock:
    return ToolUseBlock(i, "Read", {"path": i})


async def test_deferred_call_waits_then_runs_when_allowed(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, drain: Any
) -> None:
    path = tmp_path / "t.jsonl"
    ran = Ran()
    model = ScriptedModel(
        [
            answer(TextBlock("Reading, then running."), read("r"), bash("b")),
            answer(TextBlock("All done.")),
        ]
    )
    session = Session(
        model.client(),
        tools(ran),
        model="m",
        # No prompt-cache marks: the request is compared with the history as it is.
        options=TurnOptions(can_use_tool=ask_later_for_bash, cache=None),
        transcript_path=path,
    )
    events = await drain(session, "go")
    end = events[-1]
    assert isinstance(end, TurnEnd)
    assert end.reason is TurnEndReason.AWAITING_APPROVAL
    assert end.pending is not None
    assert end.pending.ids == ("b",)
    assert [r.tool_use_id for r in end.pending.results] == ["r"]
    assert "Bash(echo b)" in (end.message or "")
    assert ran.calls == ["r"]  # the allowed call ran; the deferred one did not
    # the placeholder result event is marked; the history keeps the calls unanswered
    (deferred,) = [e for e in events if isinstance(e, ToolResult) and e.deferred]
    assert deferred.tool_use_id == "b"
    assert isinstance(session.messages[-1], AssistantMessage)
    assert session.messages == end.messages
    assert session.pending_approvals == end.pending
    assert len(model.requests) == 1
    # on disk too, not "repaired" as after a crash
    t = read_transcript(path)
    assert (t.messages, t.pending, t.repaired_tool_use_ids) == (session.messages, end.pending, ())
    # a prompt is refused while calls wait; nothing is recorded
    with pytest.raises(ApprovalError, match="await approval"):
        await drain(session, "hello?")
    assert session.messages == end.messages

    events = await drain(session, approvals={"b": Allow()})
    end2 = events[-1]
    assert end2.reason is TurnEndReason.COMPLETED
    assert ran.calls == ["r", "b"]
    assert session.pending_approvals is None
    check_history(session.messages, strict=True)
    results = session.messages[2]
    assert isinstance(results, UserMessage)
    assert [(r.tool_use_id, r.content) for r in results.tool_results] == [
        ("r", "Read ran r"),
        ("b", "Bash ran b"),
    ]
    # the second request answers the first answer's tool uses
    assert model.requests[1].body["messages"][-1] == results.to_param()
    assert read_transcript(path).messages == session.messages
    assert read_transcript(path).pending is None
    session.close()


async def test_denied_call_is_answered_with_the_message(
    autojump_clock: trio.testing.MockClock, drain: Any
) -> None:
    ran = Ran()
    model = ScriptedModel([answer(bash("b")), answer(TextBlock("Understood."))])
    session = Session(
        model.client(), tools(ran), model="m", options=TurnOptions(can_use_tool=ask_later_for_bash)
    )
    await drain(session, "go")
    events = await drain(session, approvals={"b": Deny("not on a Friday")})
    assert events[-1].reason is TurnEndReason.COMPLETED
    assert ran.calls == []
    check_history(session.messages, strict=True)
    (result,) = session.messages[2].tool_results
    assert (result.content, result.is_error) == ("not on a Friday", True)


async def test_calls_left_out_stay_pending(
    autojump_clock: trio.testing.MockClock, drain: Any
) -> None:
    ran = Ran()
    model = ScriptedModel([answer(bash("b1"), read("r"), bash("b2")), answer(TextBlock("ok"))])
    session = Session(
        model.client(), tools(ran), model="m", options=TurnOptions(can_use_tool=ask_later_for_bash)
    )
    end = (await drain(session, "go"))[-1]
    assert end.pending.ids == ("b1", "b2")
    end = (await drain(session, approvals={"b2": Allow()}))[-1]
    assert end.reason is TurnEndReason.AWAITING_APPROVAL
    assert end.pending.ids == ("b1",)
    assert [r.tool_use_id for r in end.pending.results] == ["r", "b2"]
    assert ran.calls == ["r", "b2"]
    assert len(model.requests) == 1
    end = (await drain(session, approvals={"b1": Deny()}))[-1]
    assert end.reason is TurnEndReason.COMPLETED
    check_history(session.messages, strict=True)
    assert [r.tool_use_id for r in session.messages[2].tool_results] == ["b1", "r", "b2"]


async def test_bad_approvals_are_refused_and_change_nothing(
    autojump_clock: trio.testing.MockClock, drain: Any
) -> None:
    model = ScriptedModel([answer(TextBlock("hi")), answer(bash("b")), answer(TextBlock("ok"))])
    session = Session(
        model.client(),
        tools(Ran()),
        model="m",
        options=TurnOptions(can_use_tool=ask_later_for_bash),
    )
    with pytest.raises(ApprovalError, match="needs a prompt"):
        await drain(session)
    await drain(session, "hello")
    with pytest.raises(ApprovalError, match="no tool call is awaiting"):
        await drain(session, approvals={"x": Allow()})
    await drain(session, "run b")
    before = session.messages
    for bad, match in (
        ({"nope": Allow()}, "not awaiting approval"),
        ({"b": "yes"}, "not Allow, Deny, Reject or Defer"),
        ({"b": True}, "not Allow, Deny, Reject or Defer"),
    ):
        with pytest.raises(ApprovalError, match=match):
            await drain(session, approvals=bad)
        assert session.messages == before
        assert session.pending_approvals is not None
        assert not session.running
    with pytest.raises(ApprovalError, match="await approval"):
        await drain(session, "both", approvals={"b": Allow()})
    assert (await drain(session, approvals={"b": Allow()}))[-1].reason is TurnEndReason.COMPLETED


async def test_reject_in_approvals_ends_the_turn(
    autojump_clock: trio.testing.MockClock, drain: Any
) -> None:
    ran = Ran()
    model = ScriptedModel([answer(bash("b1"), bash("b2"))])
    session = Session(
        model.client(), tools(ran), model="m", options=TurnOptions(can_use_tool=ask_later_for_bash)
    )
    await drain(session, "go")
    end = (await drain(session, approvals={"b1": Reject("no"), "b2": Allow()}))[-1]
    assert end.reason is TurnEndReason.PERMISSION_REJECTED
    assert ran.calls == []  # b2 was queued behind the rejected b1
    check_history(session.messages, strict=True)
    assert session.pending_approvals is None
    assert len(model.requests) == 1


async def test_abort_while_other_tools_run_answers_the_deferred_call(
    autojump_clock: trio.testing.MockClock, run_turn_acting_at: Any
) -> None:
    ran = Ran()
    model = ScriptedModel([answer(bash("b"), ToolUseBlock("r", "Read", {"seconds": 30.0}))])
    session = Session(
        model.client(), tools(ran), model="m", options=TurnOptions(can_use_tool=ask_later_for_bash)
    )
    events = await run_turn_acting_at(
        session.submit("go"), session.abort, at=lambda i, e: isinstance(e, AssistantMessage)
    )
    assert events[-1].reason is TurnEndReason.ABORTED_TOOLS
    assert ran.calls == ["r"]
    assert session.pending_approvals is None
    check_history(session.messages, strict=True)
    b, r = session.messages[-1].tool_results
    assert r.is_error
    assert b.is_error
    assert b.content == Defer().message


async def test_abort_while_approved_calls_run(
    autojump_clock: trio.testing.MockClock, run_turn_acting_at: Any, drain: Any
) -> None:
    ran = Ran()
    model = ScriptedModel([answer(bash("b", seconds=30.0)), answer(TextBlock("never"))])
    session = Session(
        model.client(), tools(ran), model="m", options=TurnOptions(can_use_tool=ask_later_for_bash)
    )
    await drain(session, "go")
    events = await run_turn_acting_at(
        session.submit(approvals={"b": Allow()}), session.abort, after=1.0
    )
    end = events[-1]
    assert (end.reason, end.abort_reason) == (TurnEndReason.ABORTED_TOOLS, "user_interrupted")
    assert ran.calls == ["b"]
    check_history(session.messages, strict=True)
    (result,) = session.messages[-1].tool_results
    assert result.is_error
    assert len(model.requests) == 1


async def test_leaving_early_keeps_the_calls_pending(
    autojump_clock: trio.testing.MockClock, drain: Any
) -> None:
    model = ScriptedModel([answer(bash("b")), answer(TextBlock("ok"))])
    session = Session(
        model.client(),
        tools(Ran()),
        model="m",
        options=TurnOptions(can_use_tool=ask_later_for_bash),
    )
    await drain(session, "go")
    async with session.submit(approvals={"b": Allow()}):
        pass  # left before the approved call was answered
    assert session.pending_approvals is not None
    assert session.pending_approvals.ids == ("b",)
    assert (await drain(session, approvals={"b": Allow()}))[-1].reason is TurnEndReason.COMPLETED
    check_history(session.messages, strict=True)


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.sampled_from(["Read", "Bash"]), min_size=1, max_size=5),
    st.data(),
)
def test_any_decisions_any_order(drain: Any, names: list[str], data: st.DataObject) -> None:
    """Whatever is deferred and in what batches it is approved, each approved call runs
    once, no denied call runs, and the history ends valid with results in order."""
    calls = [ToolUseBlock(f"c{i}", n, {"seconds": 0.5}) for i, n in enumerate(names)]
    first = {c.id: data.draw(st.sampled_from(["allow", "deny", "defer"])) for c in calls}

    async def decide(tool: Tool, input: Mapping[str, Any], ctx: ToolContext) -> Any:
        return {"allow": Allow(), "deny": Deny("no"), "defer": Defer()}[first[ctx.tool_use_id]]

    async def main() -> None:
        ran = Ran()
        model = ScriptedModel([answer(*calls), answer(TextBlock("done"))])
        session = Session(
            model.client(), tools(ran), model="m", options=TurnOptions(can_use_tool=decide)
        )
        end = (await drain(session, "go"))[-1]
        allowed = {i for i, d in first.items() if d == "allow"}
        while end.reason is TurnEndReason.AWAITING_APPROVAL:
            ids = list(end.pending.ids)
            assert set(ids) == {i for i in ids if first[i] == "defer"}
            chosen = data.draw(st.lists(st.sampled_from(ids), min_size=1, unique=True))
            approvals = {i: data.draw(st.sampled_from([Allow(), Deny("later no")])) for i in chosen}
            allowed |= {i for i, d in approvals.items() if isinstance(d, Allow)}
            for i in chosen:
                first[i] = "done"
            end = (await drain(session, approvals=approvals))[-1]
        assert end.reason is TurnEndReason.COMPLETED
        assert sorted(ran.calls) == sorted(allowed)
        check_history(session.messages, strict=True)
        assert [r.tool_use_id for r in session.messages[2].tool_results] == [c.id for c in calls]
        assert len(model.requests) == 2

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_pending_approvals_json_round_trip_and_refusals() -> None:
    pending = PendingApprovals((bash("b"),), ())
    assert PendingApprovals.from_api(json.loads(json.dumps(pending.to_api()))) == pending
    from trio_agent import TranscriptError

    for bad in (None, {}, {"calls": [], "results": []}, {"calls": [5], "results": []}, []):
        with pytest.raises(TranscriptError):
            PendingApprovals.from_api(bad)


_SECOND_PROCESS = textwrap.dedent(
    """
    import sys, trio
    from trio_agent import Allow, Session, TextBlock, Tool
    from trio_agent.testing import ScriptedAnswer, ScriptedModel, check_history

    path, marker = sys.argv[1], sys.argv[2]

    async def run(input, ctx):
        with open(marker, "a") as f:
            f.write(ctx.tool_use_id + "\\n")
        return "ran in pid-2"

    async def main():
        model = ScriptedModel([ScriptedAnswer(blocks=[TextBlock("Done.")])])
        tools = [Tool("Read", "r", {"type": "object"}, run), Tool("Bash", "b", {"type": "object"}, run)]
        session = Session.resume(path, model.client(), tools)
        assert session.pending_approvals is not None, "no pending approvals after resume"
        async with session.submit(approvals={"b": Allow()}) as events:
            async for event in events:
                pass
        print(event.reason)
        check_history(session.messages, strict=True)
        session.close()

    trio.run(main)
    """
)


def test_another_process_resumes_and_approves(tmp_path: Path, drain: Any) -> None:
    path = tmp_path / "t.jsonl"
    marker = tmp_path / "ran.txt"
    ran = Ran()

    async def first_process() -> None:
        model = ScriptedModel([answer(read("r"), bash("b"))])
        session = Session(
            model.client(),
            tools(ran),
            model="m",
            options=TurnOptions(can_use_tool=ask_later_for_bash),
            transcript_path=path,
        )
        assert (await drain(session, "go"))[-1].reason is TurnEndReason.AWAITING_APPROVAL
        session.close()

    trio.run(first_process, clock=trio.testing.MockClock(autojump_threshold=0))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", _SECOND_PROCESS, str(path), str(marker)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "completed"
    assert marker.read_text() == "b\n"  # only the approved call ran there; r is not re-run
    assert ran.calls == ["r"]
    t = read_transcript(path)
    assert t.pending is None
    check_history(t.messages, strict=True)
    results = t.messages[2]
    assert [(r.tool_use_id, r.content) for r in results.tool_results] == [
        ("r", "Read ran r"),
        ("b", "ran in pid-2"),
    ]
    assert t.messages[-1].text == "Done."


async def test_interrupt_while_approved_calls_run(
    autojump_clock: trio.testing.MockClock, run_turn_acting_at: Any, drain: Any
) -> None:
    ran = Ran()
    model = ScriptedModel([answer(bash("b", seconds=30.0)), answer(TextBlock("never"))])
    session = Session(
        model.client(), tools(ran), model="m", options=TurnOptions(can_use_tool=ask_later_for_bash)
    )
    await drain(session, "go")
    events = await run_turn_acting_at(
        session.submit(approvals={"b": Allow()}), session.interrupt, after=1.0
    )
    end = events[-1]
    # Bash here is a "block" tool: the interrupt lets it finish, then the turn ends
    assert (end.reason, end.abort_reason) == (TurnEndReason.ABORTED_TOOLS, "interrupt")
    assert ran.calls == ["b"]
    check_history(session.messages, strict=True)
    (result,) = session.messages[-1].tool_results
    assert (result.content, result.is_error) == ("Bash ran b", False)
    assert len(model.requests) == 1


async def test_a_crash_at_any_byte_resumes_pending_or_repaired(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, drain: Any
) -> None:
    """Wherever a crash cuts a transcript that ends awaiting approval, resuming gives
    a valid history: with the calls pending if the ``pending`` line survived, else
    with them answered as interrupted."""
    path = tmp_path / "t.jsonl"
    model = ScriptedModel([answer(read("r"), bash("b"))])
    session = Session(
        model.client(),
        tools(Ran()),
        model="m",
        options=TurnOptions(can_use_tool=ask_later_for_bash),
        transcript_path=path,
    )
    await drain(session, "go")
    session.close()
    data = path.read_bytes()
    assert data.endswith(b"\n")
    pending_at = data.rindex(b'{"type":"pending"')
    header_end = data.index(b"\n") + 1
    cuts = sorted({*range(header_end, len(data), 41), pending_at, len(data) - 1, len(data)})
    for cut in cuts:
        crashed = tmp_path / f"crash-{cut}.jsonl"
        crashed.write_bytes(data[:cut])
        t = read_transcript(crashed)
        if cut == len(data):
            assert t.pending == session.pending_approvals
            assert t.messages == session.messages
        else:
            assert t.pending is None
            check_history(t.messages, strict=True)
    assert len(cuts) > 5


async def test_query_checks_pending_against_the_history(
    autojump_clock: trio.testing.MockClock,
) -> None:
    from trio_agent import query

    model = ScriptedModel([answer(TextBlock("never"))])
    use = AssistantMessage(id="m1", model="m", content=(bash("b"), read("r")))
    pending = PendingApprovals((bash("b"),), ())
    for messages, bad_pending, approvals, match in (
        ([UserMessage("go")], pending, {"b": Allow()}, "not those of the last"),
        ([], pending, {}, "not those of the last"),
        ([UserMessage("go"), use], pending, {}, "not those of the last"),  # r unanswered
        ([UserMessage("go")], None, {"b": Allow()}, "no tool call is awaiting"),
    ):
        with pytest.raises(ApprovalError, match=match):
            async with query(
                model.client(),
                messages,
                tools=tools(Ran()),
                model="m",
                pending=bad_pending,
                approvals=approvals,
            ):
                pass  # pragma: no cover
    assert model.requests == []
