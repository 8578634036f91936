"""Hooks around every step (issue 28): each hook's allow, deny and rewrite paths,
hooks cancelled by an abort, hooks that raise or return nonsense, hooks bounded by
the tool's timeout; in virtual time over the scripted model."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

import trio_agent
from trio_agent import (
    Allow,
    Ask,
    Deny,
    HookError,
    Hooks,
    Message,
    ModelClient,
    PromptTooLongError,
    Session,
    StopHookResult,
    TextBlock,
    Tool,
    ToolCall,
    ToolOutput,
    ToolResult,
    ToolUseBlock,
    TurnControl,
    TurnEnd,
    TurnEndReason,
    TurnOptions,
    UserMessage,
    query,
    read_transcript,
    tool,
)
from trio_agent.testing import (
    HTTPErrorAnswer,
    ScriptedAnswer,
    ScriptedModel,
    check_history,
    run_virtual,
)

GO: tuple[Message, ...] = (UserMessage("go"),)
ran: list[dict[str, Any]] = []


@tool(concurrency_safe=True)
async def shell(command: str) -> str:
    """Run a command (pretend)."""
    ran.append({"command": command})
    await trio.sleep(1)
    return f"ran {command}; token=SECRET123"


@tool(concurrency_safe=True)
async def broken(command: str) -> str:
    """Always fails."""
    raise RuntimeError("disk full")


def uses(*calls: tuple[str, str, dict[str, Any]]) -> ScriptedAnswer:
    return ScriptedAnswer(blocks=[ToolUseBlock(i, n, a) for i, n, a in calls])


def done(text: str = "Done.") -> ScriptedAnswer:
    return ScriptedAnswer(blocks=[TextBlock(text)])


async def turn(
    client: ModelClient,
    hooks: Hooks,
    *,
    tools: Sequence[Tool] = (shell, broken),
    messages: Sequence[Message] = GO,
    control: TurnControl | None = None,
    **options: Any,
) -> tuple[list[Any], TurnEnd]:
    ran.clear()
    events: list[Any] = []
    async with query(
        client,
        messages,
        tools=tools,
        model="m",
        max_tokens=100,
        options=TurnOptions(hooks=hooks, **options),
        control=control,
    ) as stream:
        async for event in stream:
            events.append(event)
    end = events[-1]
    assert isinstance(end, TurnEnd)
    if end.pending is None:  # else its calls wait, unanswered, for approval
        check_history(end.messages)
    return events, end


def result_of(events: list[Any], tool_use_id: str) -> ToolResult:
    (result,) = [e for e in events if isinstance(e, ToolResult) and e.tool_use_id == tool_use_id]
    return result


def sent_results(model: ScriptedModel, request: int = 1) -> list[dict[str, Any]]:
    return model.requests[request].body["messages"][-1]["content"]


# -- pre_tool_use ----------------------------------------------------------------------


async def test_pre_tool_use_allows(autojump_clock: Any) -> None:
    seen: list[ToolCall] = []

    async def pre(call: ToolCall) -> None:
        seen.append(call)

    model = ScriptedModel([uses(("t1", "shell", {"command": "ls"})), done()])
    events, end = await turn(model.client(), Hooks(pre_tool_use=pre))
    assert [(c.name, c.id, dict(c.input)) for c in seen] == [("shell", "t1", {"command": "ls"})]
    assert ran == [{"command": "ls"}]
    assert end.reason is TurnEndReason.COMPLETED
    assert result_of(events, "t1").is_error is False


async def test_pre_tool_use_denies(autojump_clock: Any) -> None:
    async def pre(call: ToolCall) -> Deny | None:
        return Deny("rm -rf is blocked") if "rm" in call.input["command"] else None

    model = ScriptedModel(
        [uses(("t1", "shell", {"command": "rm -rf /"}), ("t2", "shell", {"command": "ls"})), done()]
    )
    events, end = await turn(model.client(), Hooks(pre_tool_use=pre))
    assert ran == [{"command": "ls"}]
    denied = result_of(events, "t1")
    assert denied.is_error
    assert denied.content == "rm -rf is blocked"
    assert sent_results(model)[0]["content"] == "rm -rf is blocked"
    assert end.reason is TurnEndReason.COMPLETED


async def test_pre_tool_use_rewrites_the_input(autojump_clock: Any) -> None:
    async def pre(call: ToolCall) -> dict[str, Any]:
        return {"command": call.input["command"] + " --dry-run"}

    model = ScriptedModel(
        [uses(("t1", "shell", {"command": "make"}), ("t2", "shell", {"command": "ls"})), done()]
    )
    events, end = await turn(model.client(), Hooks(pre_tool_use=pre))
    assert ran == [{"command": "make --dry-run"}, {"command": "ls --dry-run"}]
    assert result_of(events, "t1").content.startswith("ran make --dry-run")
    # the history (and so the next request) shows the input the tool ran with
    answer = end.messages[1]
    assert isinstance(answer, trio_agent.AssistantMessage)
    assert [dict(u.input) for u in answer.tool_uses] == [
        {"command": "make --dry-run"},
        {"command": "ls --dry-run"},
    ]
    assert answer in events  # as it was sent: a consumer's copy is the same
    sent = model.requests[1].body["messages"][1]["content"]
    assert [b["input"] for b in sent] == [
        {"command": "make --dry-run"},
        {"command": "ls --dry-run"},
    ]
    check_history(end.messages, strict=True)


async def test_a_rewrite_is_in_the_sessions_transcript(autojump_clock: Any, tmp_path: Path) -> None:
    async def pre(call: ToolCall) -> dict[str, Any]:
        return {"command": "echo safe"}

    model = ScriptedModel([uses(("t1", "shell", {"command": "curl evil"})), done()])
    path = tmp_path / "t.jsonl"
    async with Session(
        model.client(),
        [shell],
        model="m",
        transcript_path=path,
        options=TurnOptions(hooks=Hooks(pre_tool_use=pre)),
    ) as session:
        await session.run("go")
    recorded = read_transcript(path).messages
    assert recorded == session.messages
    assert "curl evil" not in json.dumps([m.to_api() for m in recorded])
    assert "echo safe" in json.dumps([m.to_api() for m in recorded])


async def test_a_rewrite_is_validated(autojump_clock: Any) -> None:
    async def pre(call: ToolCall) -> dict[str, Any]:
        return {"command": 42}

    model = ScriptedModel([uses(("t1", "shell", {"command": "make"})), done()])
    events, _ = await turn(model.client(), Hooks(pre_tool_use=pre))
    assert ran == []
    assert result_of(events, "t1").is_error
    assert "42 is not of type" in str(result_of(events, "t1").content)


async def test_pre_tool_use_runs_after_can_use_tool(autojump_clock: Any) -> None:
    seen: list[dict[str, Any]] = []

    async def permission(tool: Tool, input: Any, ctx: Any) -> Any:
        if input["command"] == "no":
            return Deny("not allowed")
        return Allow(updated_input={"command": input["command"].upper()})

    async def pre(call: ToolCall) -> None:
        seen.append(dict(call.input))

    model = ScriptedModel(
        [uses(("t1", "shell", {"command": "no"}), ("t2", "shell", {"command": "ls"})), done()]
    )
    events, _ = await turn(model.client(), Hooks(pre_tool_use=pre), can_use_tool=permission)
    assert seen == [{"command": "LS"}]  # the denied call never reached the hook
    assert ran == [{"command": "LS"}]
    assert result_of(events, "t1").content == "not allowed"


async def test_pre_tool_use_asks_and_the_user_approves(autojump_clock: Any) -> None:
    calls: list[str] = []

    async def pre(call: ToolCall) -> Ask:
        calls.append(call.id)
        return Ask()

    model = ScriptedModel([uses(("t1", "shell", {"command": "deploy"})), done("Deployed.")])
    ran.clear()
    async with Session(
        model.client(), [shell], model="m", options=TurnOptions(hooks=Hooks(pre_tool_use=pre))
    ) as session:
        first = await session.run("deploy it")
        assert first.reason is TurnEndReason.AWAITING_APPROVAL
        assert ran == []
        second = await session.run(approvals={"t1": Allow()})
    assert second.reason is TurnEndReason.COMPLETED
    assert ran == [{"command": "deploy"}]
    assert calls == ["t1", "t1"]  # asked again on approval; the user's answer stands


@pytest.mark.parametrize(
    ("hook_result", "expected"),
    [
        (
            RuntimeError("hook broke"),
            "the pre_tool_use hook of shell raised RuntimeError: hook broke",
        ),
        (3, "the pre_tool_use hook of shell returned a int"),
        ("yes", "the pre_tool_use hook of shell returned a str"),
    ],
)
async def test_a_failing_pre_tool_use_is_the_calls_error(
    autojump_clock: Any, hook_result: Any, expected: str
) -> None:
    async def pre(call: ToolCall) -> Any:
        if isinstance(hook_result, Exception):
            raise hook_result
        return hook_result

    model = ScriptedModel([uses(("t1", "shell", {"command": "ls"})), done()])
    events, end = await turn(model.client(), Hooks(pre_tool_use=pre))
    assert ran == []
    assert expected in str(result_of(events, "t1").content)
    assert end.reason is TurnEndReason.COMPLETED  # the model read the error and went on


async def test_a_hook_is_bounded_by_the_tools_timeout(autojump_clock: Any) -> None:
    async def pre(call: ToolCall) -> None:
        await trio.sleep(1000)

    model = ScriptedModel([uses(("t1", "shell", {"command": "ls"})), done()])
    start = trio.current_time()
    events, _ = await turn(model.client(), Hooks(pre_tool_use=pre), tool_timeout=5)
    assert ran == []
    assert "pre_tool_use hook of shell timed out after 5 s" in str(result_of(events, "t1").content)
    assert trio.current_time() - start < 10


# -- post_tool_use and post_tool_failure -------------------------------------------------


async def test_post_tool_use_sees_the_result_and_may_leave_it(autojump_clock: Any) -> None:
    seen: list[tuple[str, Any]] = []

    async def post(call: ToolCall, result: ToolResult) -> None:
        seen.append((call.id, result.content))

    model = ScriptedModel([uses(("t1", "shell", {"command": "ls"})), done()])
    events, _ = await turn(model.client(), Hooks(post_tool_use=post))
    assert seen == [("t1", "ran ls; token=SECRET123")]
    assert result_of(events, "t1").content == "ran ls; token=SECRET123"


async def test_post_tool_use_redacts_before_the_model_sees_it(autojump_clock: Any) -> None:
    async def redact(call: ToolCall, result: ToolResult) -> str:
        return str(result.content).replace("SECRET123", "[redacted]")

    model = ScriptedModel([uses(("t1", "shell", {"command": "ls"})), done()])
    events, end = await turn(model.client(), Hooks(post_tool_use=redact))
    assert result_of(events, "t1").content == "ran ls; token=[redacted]"
    assert "SECRET123" not in json.dumps(model.requests[1].body)
    assert "SECRET123" not in json.dumps([m.to_api() for m in end.messages])


async def test_post_tool_failure_is_told_of_failures_only(autojump_clock: Any) -> None:
    successes: list[str] = []
    failures: list[tuple[str, Any]] = []

    async def post(call: ToolCall, result: ToolResult) -> None:
        successes.append(call.id)

    async def failed(call: ToolCall, result: ToolResult) -> ToolOutput:
        failures.append((call.id, result.content))
        return ToolOutput("the disk is full: free some space and retry", is_error=True)

    model = ScriptedModel(
        [uses(("t1", "shell", {"command": "ls"}), ("t2", "broken", {"command": "x"})), done()]
    )
    events, _ = await turn(model.client(), Hooks(post_tool_use=post, post_tool_failure=failed))
    assert successes == ["t1"]
    assert [i for i, _ in failures] == ["t2"]
    assert "disk full" in str(failures[0][1])
    replaced = result_of(events, "t2")
    assert replaced.is_error
    assert replaced.content == "the disk is full: free some space and retry"


@pytest.mark.parametrize("which", ["post_tool_use", "post_tool_failure"])
@pytest.mark.parametrize("bad", ["raise", "garbage"])
async def test_a_failing_post_hook_is_the_calls_error(
    autojump_clock: Any, which: str, bad: str
) -> None:
    async def hook(call: ToolCall, result: ToolResult) -> Any:
        if bad == "raise":
            raise ValueError("nope")
        return b"bytes"

    name = "shell" if which == "post_tool_use" else "broken"
    model = ScriptedModel([uses(("t1", name, {"command": "ls"})), done()])
    events, end = await turn(model.client(), Hooks(**{which: hook}))
    content = str(result_of(events, "t1").content)
    assert f"the {which} hook of {name}" in content
    assert ("raised ValueError" if bad == "raise" else "returned bytes") in content
    assert result_of(events, "t1").is_error
    assert end.reason is TurnEndReason.COMPLETED


# -- user_prompt_submit ------------------------------------------------------------------


async def test_user_prompt_submit_adds_context(autojump_clock: Any) -> None:
    seen: list[UserMessage] = []

    async def submit(prompt: UserMessage) -> str:
        seen.append(prompt)
        return "The current branch is main."

    model = ScriptedModel([done()])
    events, end = await turn(model.client(), Hooks(user_prompt_submit=submit))
    assert seen == [UserMessage("go")]
    sent = model.requests[0].body["messages"]
    assert "The current branch is main." in json.dumps(sent)
    assert UserMessage("The current branch is main.") in events  # an event: the history has it
    assert end.messages[:2] == (UserMessage("go"), UserMessage("The current branch is main."))


async def test_user_prompt_submit_allows(autojump_clock: Any) -> None:
    calls: list[UserMessage] = []

    async def submit(prompt: UserMessage) -> None:
        calls.append(prompt)

    model = ScriptedModel([done()])
    _, end = await turn(model.client(), Hooks(user_prompt_submit=submit))
    assert calls == [UserMessage("go")]
    assert end.messages[0] == UserMessage("go")
    assert len(end.messages) == 2


async def test_user_prompt_submit_denies(autojump_clock: Any, tmp_path: Path) -> None:
    async def submit(prompt: UserMessage) -> Deny | None:
        return Deny("no secrets in prompts") if "password" in str(prompt.content) else None

    model = ScriptedModel([done("first answer")])
    path = tmp_path / "t.jsonl"
    async with Session(
        model.client(),
        model="m",
        transcript_path=path,
        options=TurnOptions(hooks=Hooks(user_prompt_submit=submit)),
    ) as session:
        await session.run("hello")
        result = await session.run("my password is hunter2")
        assert result.reason is TurnEndReason.PROMPT_DENIED
        assert result.end.message == "no secrets in prompts"
        assert result.new_messages == ()
        assert len(session.messages) == 2
    assert len(model.requests) == 1  # no model call for the denied prompt
    assert "hunter2" not in json.dumps([m.to_api() for m in read_transcript(path).messages])


@pytest.mark.parametrize("bad", ["raise", "garbage"])
async def test_a_failing_user_prompt_submit_is_the_turns_error(
    autojump_clock: Any, bad: str
) -> None:
    async def submit(prompt: UserMessage) -> Any:
        if bad == "raise":
            raise OSError("hook script missing")
        return 12

    model = ScriptedModel([done()])
    _, end = await turn(model.client(), Hooks(user_prompt_submit=submit))
    assert end.reason is TurnEndReason.ERROR
    assert isinstance(end.error, HookError)
    assert end.error.hook == "user_prompt_submit"
    assert model.requests == []
    with pytest.raises(HookError, match="user_prompt_submit"):
        await trio_agent.run(
            ScriptedModel([done()]).client(),
            "go",
            model="m",
            options=TurnOptions(hooks=Hooks(user_prompt_submit=submit)),
        )


# -- pre_compact -------------------------------------------------------------------------

TOO_LONG = HTTPErrorAnswer(
    status=400,
    body={
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "prompt is too long: 300000 tokens > 200000 maximum",
        },
    },
)


async def compactor(messages: tuple[Message, ...]) -> list[Message]:
    return [UserMessage("summary: go")]


async def test_pre_compact_sees_the_history_before_the_compactor(autojump_clock: Any) -> None:
    seen: list[tuple[Message, ...]] = []

    async def pre(history: tuple[Message, ...]) -> None:
        seen.append(history)

    model = ScriptedModel([TOO_LONG, done()])
    _, end = await turn(model.client(), Hooks(pre_compact=pre), compactor=compactor)
    assert seen == [GO]
    assert end.reason is TurnEndReason.COMPLETED
    assert end.messages[0] == UserMessage("summary: go")


async def test_a_failing_pre_compact_fails_the_compaction(autojump_clock: Any) -> None:
    async def pre(history: tuple[Message, ...]) -> None:
        raise RuntimeError("no")

    model = ScriptedModel([TOO_LONG, done()])
    _, end = await turn(model.client(), Hooks(pre_compact=pre), compactor=compactor)
    assert end.reason is TurnEndReason.ERROR
    assert isinstance(end.error, PromptTooLongError)
    assert isinstance(end.error.__cause__, HookError)


@pytest.mark.parametrize("fails", [False, True])
async def test_pre_compact_before_an_auto_compaction(autojump_clock: Any, fails: bool) -> None:
    from trio_agent import Usage

    seen: list[int] = []

    async def pre(history: tuple[Message, ...]) -> None:
        seen.append(len(history))
        if fails:
            raise RuntimeError("not now")

    heavy = ScriptedAnswer(
        blocks=[ToolUseBlock("t1", "shell", {"command": "ls"})], usage=Usage(input_tokens=900)
    )
    model = ScriptedModel([heavy, done()])
    _, end = await turn(
        model.client(),
        Hooks(pre_compact=pre),
        compactor=compactor,
        auto_compact=0.5,
        context_window=1000,
    )
    assert seen == [3]  # the prompt, the answer, its results
    if fails:
        assert end.reason is TurnEndReason.ERROR
        assert isinstance(end.error, HookError)
        assert end.error.hook == "pre_compact"
        assert len(model.requests) == 1
        assert [m.role for m in end.messages] == ["user", "assistant", "user"]
    else:
        assert end.reason is TurnEndReason.COMPLETED
        assert end.messages[0] == UserMessage("summary: go")


# -- stop and subagent_stop -------------------------------------------------------------


async def test_subagent_stop_is_the_subagents_stop_hook(autojump_clock: Any) -> None:
    seen: list[tuple[str, int, bool]] = []

    async def sub_stop(
        agent: str, history: tuple[Message, ...], *, stop_hook_active: bool
    ) -> StopHookResult:
        seen.append((agent, len(history), stop_hook_active))
        return StopHookResult(block=not stop_hook_active, message="Cite a file.")

    async def stop(history: tuple[Message, ...], *, stop_hook_active: bool) -> None:
        seen.append(("parent", len(history), stop_hook_active))

    researcher = trio_agent.subagent("researcher", "Research.", tools=[], system="You research.")
    model = ScriptedModel(
        [
            uses(("t1", "researcher", {"prompt": "find it"})),
            done("It is in a.py."),  # the subagent's first answer: blocked
            done("It is in a.py, line 3."),  # its second
            done("Found: a.py line 3."),  # the parent's answer
        ]
    )
    _, end = await turn(
        model.client(), Hooks(stop=stop, subagent_stop=sub_stop), tools=[researcher]
    )
    assert seen == [("researcher", 2, False), ("researcher", 4, True), ("parent", 4, False)]
    assert end.reason is TurnEndReason.COMPLETED
    assert end.messages[-1].text == "Found: a.py line 3."  # type: ignore[union-attr]


# -- aborts ---------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["pre_tool_use", "post_tool_use", "user_prompt_submit", "stop"])
async def test_an_abort_cancels_a_hook(autojump_clock: Any, which: str) -> None:
    control = TurnControl()
    cancelled: list[str] = []

    async def hang(*args: Any, **kwargs: Any) -> None:
        control.abort()
        try:
            await trio.sleep(1000)
        except trio.Cancelled:
            cancelled.append(which)
            raise

    model = ScriptedModel([uses(("t1", "shell", {"command": "ls"})), done()])
    start = trio.current_time()
    _, end = await turn(model.client(), Hooks(**{which: hang}), control=control)
    assert cancelled == [which]
    assert end.reason in (TurnEndReason.ABORTED_TOOLS, TurnEndReason.ABORTED_STREAMING)
    assert end.abort_reason == "user_interrupted"
    assert trio.current_time() - start < 100


# -- the values themselves ------------------------------------------------------------


def test_hooks_are_checked_when_built() -> None:
    with pytest.raises(TypeError, match="pre_tool_use"):
        Hooks(pre_tool_use=3)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    with pytest.raises(TypeError, match="hooks"):
        TurnOptions(hooks=lambda: None)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


def test_stop_hooks_are_deprecated() -> None:
    async def hook(messages: tuple[Message, ...], *, stop_hook_active: bool) -> None:
        return None

    with pytest.warns(DeprecationWarning, match=r"hooks=Hooks\(stop=\.\.\.\)"):
        options = TurnOptions(stop_hooks=[hook])
    assert options.stop_hooks == (hook,)


answers = (
    st.none()
    | st.integers()
    | st.text(max_size=5)
    | st.just(Deny("d"))
    | st.just(Ask())
    | st.dictionaries(
        st.sampled_from(["command", "x"]),
        st.none() | st.text(max_size=5) | st.integers(),
        max_size=2,
    )
    | st.just(RuntimeError("r"))
    | st.just(ToolOutput("o"))
)


@settings(max_examples=40, deadline=None)
@given(pre=answers, post=answers)
def test_any_hook_answer_leaves_a_valid_turn(pre: Any, post: Any) -> None:
    async def pre_hook(call: ToolCall) -> Any:
        if isinstance(pre, Exception):
            raise pre
        return pre

    async def post_hook(call: ToolCall, result: ToolResult) -> Any:
        if isinstance(post, Exception):
            raise post
        return post

    async def main() -> TurnEnd:
        model = ScriptedModel(
            [uses(("t1", "shell", {"command": "ls"}), ("t2", "broken", {"command": "x"})), done()]
        )
        _, end = await turn(
            model.client(),
            Hooks(pre_tool_use=pre_hook, post_tool_use=post_hook, post_tool_failure=post_hook),
        )
        return end

    end = run_virtual(main)
    assert end.reason in (TurnEndReason.COMPLETED, TurnEndReason.AWAITING_APPROVAL)
    if end.reason is TurnEndReason.COMPLETED:
        check_history(end.messages, strict=True)


@settings(max_examples=30, deadline=None)
@given(at=st.floats(min_value=0, max_value=6), interrupt=st.booleans())
def test_an_abort_at_any_time_leaves_every_call_answered(at: float, interrupt: bool) -> None:
    """Hooks on every step of a two-call answer (slow hooks, a rewrite, a redaction,
    a context), the turn aborted or interrupted at any virtual time: the history
    is valid and each tool_use announced has exactly one result."""

    async def pre(call: ToolCall) -> dict[str, Any]:
        await trio.sleep(0.7)
        return {"command": call.input["command"] + "!"}

    async def post(call: ToolCall, result: ToolResult) -> str:
        await trio.sleep(0.3)
        return "redacted"

    async def submit(prompt: UserMessage) -> str:
        await trio.sleep(0.2)
        return "context"

    async def stop(history: tuple[Message, ...], *, stop_hook_active: bool) -> None:
        await trio.sleep(0.4)

    hooks = Hooks(pre_tool_use=pre, post_tool_use=post, user_prompt_submit=submit, stop=stop)

    async def main() -> tuple[list[Any], TurnEnd]:
        control = TurnControl()
        model = ScriptedModel(
            [uses(("t1", "shell", {"command": "a"}), ("t2", "shell", {"command": "b"})), done()]
        )
        events: list[Any] = []

        async def act() -> None:
            await trio.sleep(at)
            control.interrupt() if interrupt else control.abort()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(act)
            async with query(
                model.client(),
                GO,
                tools=[shell],
                model="m",
                max_tokens=100,
                options=TurnOptions(hooks=hooks),
                control=control,
            ) as stream:
                async for event in stream:
                    events.append(event)
            nursery.cancel_scope.cancel()
        end = events[-1]
        assert isinstance(end, TurnEnd)
        return events, end

    events, end = run_virtual(main)
    check_history(end.messages, strict=True)
    announced = [
        e.block.id
        for e in events
        if type(e).__name__ == "BlockFinished" and isinstance(e.block, ToolUseBlock)
    ]
    answered = [e.tool_use_id for e in events if isinstance(e, ToolResult)]
    assert sorted(answered) == sorted(announced)
