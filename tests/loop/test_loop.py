"""query(): every transition and terminal reason, with the scripted model in virtual time."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import (
    AnthropicClient,
    AssistantMessage,
    AttemptDiscarded,
    BlockFinished,
    Compacted,
    CompactionError,
    HookError,
    Hooks,
    InternalServerError,
    Message,
    ModelFallback,
    OverloadedError,
    PermissionRules,
    PromptTooLongError,
    Reject,
    RetryPolicy,
    StopHookResult,
    StreamTruncatedError,
    TextBlock,
    TextDelta,
    ThinkingBlock,
    ThinkingDelta,
    Tool,
    ToolContext,
    ToolFinished,
    ToolProgress,
    ToolResult,
    ToolResultBlock,
    ToolUseBlock,
    Transition,
    TransitionReason,
    TurnControl,
    TurnEnd,
    TurnEndReason,
    TurnOptions,
    Usage,
    UserMessage,
    query,
)
from trio_agent._loop._recovery import CONTINUE_PROMPT
from trio_agent.testing import (
    Faults,
    HTTPErrorAnswer,
    ScriptedAnswer,
    ScriptedModel,
    Timing,
    check_history,
)

SLOW = Timing(token_delay=0.1, block_delay=0.1, text_chunk_size=4, json_chunk_size=4)
PROMPT = (UserMessage("Look at a and b."),)


# -- helpers -------------------------------------------------------------------------


@attrs.define
class Log:
    """What the tools did, in virtual time."""

    starts: dict[str, float] = attrs.field(factory=dict[str, float])
    ends: dict[str, float] = attrs.field(factory=dict[str, float])


def make_tools(log: Log, *, duration: float = 1.0) -> list[Tool]:
    async def read(input: Mapping[str, Any], ctx: ToolContext) -> str:
        log.starts[ctx.tool_use_id] = trio.current_time()
        ctx.progress("reading")
        await trio.sleep(duration)
        log.ends[ctx.tool_use_id] = trio.current_time()
        return f"contents of {input['path']}"

    async def bash(input: Mapping[str, Any], ctx: ToolContext) -> str:
        log.starts[ctx.tool_use_id] = trio.current_time()
        await trio.sleep(duration)
        log.ends[ctx.tool_use_id] = trio.current_time()
        return f"ran {input['command']}"

    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    return [
        Tool("Read", "Read a file.", schema, read, concurrency_safe=True),
        Tool(
            "Bash",
            "Run a command.",
            {"type": "object", "properties": {"command": {"type": "string"}}},
            bash,
            interrupt_behavior="cancel",
        ),
    ]


def client_for(model: ScriptedModel, *, retries: int = 0) -> AnthropicClient:
    return model.client(retry=RetryPolicy(max_retries=retries))


def text(t: str, **kw: Any) -> ScriptedAnswer:
    return ScriptedAnswer(blocks=[TextBlock(t)], **kw)


def reads(*ids: str, prefix: str = "Let me look.", **kw: Any) -> ScriptedAnswer:
    blocks: list[Any] = [TextBlock(prefix)]
    blocks += [ToolUseBlock(i, "Read", {"path": i}) for i in ids]
    return ScriptedAnswer(blocks=blocks, **kw)


@attrs.define
class Run:
    events: list[Any]
    times: list[float]
    model: ScriptedModel

    @property
    def end(self) -> TurnEnd:
        last = self.events[-1]
        assert isinstance(last, TurnEnd)
        return last

    def of(self, kind: type[Any]) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]

    def transitions(self) -> list[TransitionReason]:
        return [t.reason for t in self.of(Transition)]

    def request(self, i: int) -> dict[str, Any]:
        return self.model.requests[i].body


async def run(
    answers: Sequence[Any],
    *,
    messages: Sequence[Message] = PROMPT,
    tools: Sequence[Tool] | None = None,
    retries: int = 0,
    model_name: str = "big",
    max_tokens: int | None = 8192,
    **kw: Any,
) -> Run:
    model = ScriptedModel(answers)
    events: list[Any] = []
    times: list[float] = []
    async with (
        query(
            client_for(model, retries=retries),
            messages,
            tools=make_tools(Log()) if tools is None else tools,
            model=model_name,
            max_tokens=max_tokens,
            **kw,
        ) as stream,
    ):
        async for event in stream:
            events.append(event)
            times.append(trio.current_time())
    result = Run(events, times, model)
    check_run(result, messages)
    return result


def check_run(result: Run, messages: Sequence[Message]) -> None:
    """The events tell the history: the input plus every message event, in order
    (a Compacted event replaces what came before); exactly one TurnEnd, last."""
    ends = result.of(TurnEnd)
    assert len(ends) == 1
    assert isinstance(result.events[-1], TurnEnd)
    history: list[Message] = list(messages)
    for event in result.events:
        if isinstance(event, AssistantMessage | UserMessage):
            history.append(event)
        elif isinstance(event, Compacted):
            history = list(event.messages)
    assert tuple(history) == result.end.messages
    check_history(result.end.messages, strict=True)
    # the input is not touched
    assert result.end.messages[: len(messages)] == tuple(messages) or result.of(Compacted)


# -- completed, next_turn --------------------------------------------------------------


async def test_completed_text_answer(autojump_clock: trio.testing.MockClock) -> None:
    result = await run([text("Hello there, friend.", timing=SLOW)])
    assert result.end.reason is TurnEndReason.COMPLETED
    assert "".join(d.text for d in result.of(TextDelta)) == "Hello there, friend."
    assert all(d.index == 0 for d in result.of(TextDelta))
    (finished,) = result.of(BlockFinished)
    assert finished == BlockFinished(0, TextBlock("Hello there, friend."))
    (answer,) = result.of(AssistantMessage)
    assert answer.text == "Hello there, friend."
    assert result.end.messages == (*PROMPT, answer)
    assert result.end.turns == 1
    assert result.end.usage == answer.usage
    assert result.transitions() == []
    assert result.request(0)["model"] == "big"
    assert result.request(0)["max_tokens"] == 8192


async def test_thinking_deltas(autojump_clock: trio.testing.MockClock) -> None:
    answer = ScriptedAnswer(blocks=[ThinkingBlock("hmm, let me see", "sig"), TextBlock("ok")])
    result = await run([answer])
    assert "".join(d.thinking for d in result.of(ThinkingDelta)) == "hmm, let me see"
    assert {d.index for d in result.of(ThinkingDelta)} == {0}
    assert [d.index for d in result.of(TextDelta)] == [0] * 0 + [1] * len(result.of(TextDelta))
    assert [b.index for b in result.of(BlockFinished)] == [0, 1]


async def test_tools_run_while_the_model_streams(autojump_clock: trio.testing.MockClock) -> None:
    log = Log()
    first = ScriptedAnswer(
        blocks=[
            ToolUseBlock("a", "Read", {"path": "a"}),
            ToolUseBlock("b", "Read", {"path": "b"}),
            TextBlock("While those run, a long explanation follows here, slowly." * 3),
        ],
        timing=SLOW,
    )
    result = await run([first, text("Both read.")], tools=make_tools(log, duration=1.0))
    assert result.end.reason is TurnEndReason.COMPLETED
    assert result.transitions() == [TransitionReason.NEXT_TURN]
    answers = result.of(AssistantMessage)
    stream_end = result.times[result.events.index(answers[0])]
    # both safe tools started at their block's stop, long before the answer ended,
    # and ran together
    assert log.starts["a"] < stream_end - 1
    assert log.starts["b"] < stream_end - 1
    assert log.ends["a"] < stream_end
    assert abs(log.starts["a"] - log.starts["b"]) < 0.5
    # results forwarded as they came, then one UserMessage in tool_use order
    results = result.of(ToolResult)
    assert [r.tool_use_id for r in results] == ["a", "b"]
    assert result.times[result.events.index(results[0])] < stream_end
    (tool_results,) = [m for m in result.of(UserMessage) if m.tool_results]
    assert [(r.tool_use_id, r.content) for r in tool_results.tool_results] == [
        ("a", "contents of a"),
        ("b", "contents of b"),
    ]
    assert result.events.index(tool_results) > result.events.index(answers[0])
    # progress and finish notices forwarded
    assert {p.tool_use_id for p in result.of(ToolProgress)} == {"a", "b"}
    assert {p.tool_use_id for p in result.of(ToolFinished)} == {"a", "b"}
    # the second request carries the tool results
    sent = result.request(1)["messages"]
    assert sent[-1]["role"] == "user"
    assert [b["tool_use_id"] for b in sent[-1]["content"]] == ["a", "b"]
    (transition,) = result.of(Transition)
    assert transition == Transition(TransitionReason.NEXT_TURN, 2, "big", 8192)
    assert result.end.turns == 2
    assert result.end.usage == answers[0].usage + answers[1].usage


async def test_the_input_messages_are_not_mutated(autojump_clock: trio.testing.MockClock) -> None:
    messages = [UserMessage("hi")]
    result = await run([reads("a"), text("done")], messages=messages)
    assert messages == [UserMessage("hi")]
    assert len(result.end.messages) == 4


# -- max_tokens ------------------------------------------------------------------------


async def test_max_tokens_escalates_once(autojump_clock: trio.testing.MockClock) -> None:
    result = await run(
        [text("cut sho", stop_reason="max_tokens"), text("the whole answer")],
        model_name="claude-sonnet-5-5",
        max_tokens=None,
    )
    assert result.transitions() == [TransitionReason.MAX_OUTPUT_TOKENS_ESCALATE]
    assert result.request(0)["max_tokens"] == 8192
    assert result.of(Transition)[0].max_tokens == 64_000
    assert result.request(1)["max_tokens"] == 64_000
    assert result.request(1)["messages"] == result.request(0)["messages"]
    # the truncated answer is dropped: never sent as a message, not in the history
    assert [m.text for m in result.of(AssistantMessage)] == ["the whole answer"]
    assert result.end.reason is TurnEndReason.COMPLETED
    assert result.end.turns == 1


async def test_max_tokens_recovers_with_continue_messages(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cut = [text(f"part {i} ", stop_reason="max_tokens") for i in range(3)]
    result = await run([*cut, text("end")], model_name="claude-sonnet-5-5", max_tokens=None)
    assert result.transitions() == [
        TransitionReason.MAX_OUTPUT_TOKENS_ESCALATE,
        TransitionReason.MAX_OUTPUT_TOKENS_RECOVERY,
        TransitionReason.MAX_OUTPUT_TOKENS_RECOVERY,
    ]
    assert result.end.reason is TurnEndReason.COMPLETED
    texts = [m.text if isinstance(m, AssistantMessage) else m.content for m in result.end.messages]
    assert texts == [
        PROMPT[0].content,
        "part 1 ",
        CONTINUE_PROMPT,
        "part 2 ",
        CONTINUE_PROMPT,
        "end",
    ]
    assert all(r.body["max_tokens"] == 64_000 for r in result.model.requests[1:])


async def test_max_tokens_exhausted_is_an_error(autojump_clock: trio.testing.MockClock) -> None:
    cut = [text(f"p{i}", stop_reason="max_tokens") for i in range(5)]
    result = await run(cut, model_name="claude-sonnet-5-5", max_tokens=None)
    assert result.transitions() == [
        TransitionReason.MAX_OUTPUT_TOKENS_ESCALATE,
        *[TransitionReason.MAX_OUTPUT_TOKENS_RECOVERY] * 3,
    ]
    assert result.end.reason is TurnEndReason.ERROR
    assert "max_tokens" in (result.end.message or "")
    assert result.end.messages[-1] == result.of(AssistantMessage)[-1]
    assert len(result.model.requests) == 5


async def test_no_escalation_when_the_caller_asks_64k(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([text("cut", stop_reason="max_tokens"), text("rest")])
    async with query(client_for(model), PROMPT, tools=[], model="big", max_tokens=64_000) as events:
        got = [e async for e in events]
    assert [t.reason for t in got if isinstance(t, Transition)] == [
        TransitionReason.MAX_OUTPUT_TOKENS_RECOVERY
    ]


async def test_max_tokens_with_tool_uses_runs_the_tools(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cut = ScriptedAnswer(
        blocks=[
            ToolUseBlock("a", "Read", {"path": "a"}),
            ToolUseBlock("b", "Read", invalid_input='{"pa'),
        ],
        stop_reason="max_tokens",
    )
    result = await run([cut, text("ok")])
    assert result.transitions() == [TransitionReason.NEXT_TURN]
    (results,) = [m for m in result.of(UserMessage) if m.tool_results]
    assert [r.is_error for r in results.tool_results] == [False, True]


# -- prompt too long -------------------------------------------------------------------

TOO_LONG = HTTPErrorAnswer(
    status=400,
    body={
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "prompt is too long: 210000 tokens > 200000 maximum",
        },
    },
)


async def test_prompt_too_long_compacts_then_retries(
    autojump_clock: trio.testing.MockClock,
) -> None:
    seen: list[tuple[Message, ...]] = []

    async def compactor(messages: tuple[Message, ...]) -> list[Message]:
        seen.append(messages)
        await trio.sleep(2)
        return [UserMessage("Summary: the user wants a and b looked at.")]

    result = await run([TOO_LONG, text("Looked.")], options=TurnOptions(compactor=compactor))
    assert seen == [PROMPT]
    assert result.transitions() == [TransitionReason.PROMPT_TOO_LONG_COMPACT]
    (compacted,) = result.of(Compacted)
    assert compacted.messages == (UserMessage("Summary: the user wants a and b looked at."),)
    assert result.request(1)["messages"] == [
        {"role": "user", "content": "Summary: the user wants a and b looked at."}
    ]
    assert result.end.reason is TurnEndReason.COMPLETED
    assert result.end.messages[0] == compacted.messages[0]


async def test_prompt_too_long_twice_is_an_error(autojump_clock: trio.testing.MockClock) -> None:
    async def compactor(messages: tuple[Message, ...]) -> list[Message]:
        return list(messages)

    result = await run([TOO_LONG, TOO_LONG], options=TurnOptions(compactor=compactor))
    assert result.transitions() == [TransitionReason.PROMPT_TOO_LONG_COMPACT]
    assert result.end.reason is TurnEndReason.ERROR
    assert isinstance(result.end.error, PromptTooLongError)


async def test_prompt_too_long_without_compactor(autojump_clock: trio.testing.MockClock) -> None:
    result = await run([TOO_LONG])
    assert result.end.reason is TurnEndReason.ERROR
    assert isinstance(result.end.error, PromptTooLongError)
    assert result.end.messages == PROMPT


async def test_a_failing_compactor_ends_the_turn(autojump_clock: trio.testing.MockClock) -> None:
    async def compactor(messages: tuple[Message, ...]) -> list[Message]:
        raise RuntimeError("no summary today")

    result = await run([TOO_LONG], options=TurnOptions(compactor=compactor))
    assert result.end.reason is TurnEndReason.ERROR
    # the original error, with the compactor's attached
    assert isinstance(result.end.error, PromptTooLongError)
    assert isinstance(result.end.error.__cause__, RuntimeError)


async def test_a_compactor_returning_garbage_ends_the_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def compactor(messages: tuple[Message, ...]) -> list[Any]:
        return [{"role": "user", "content": "summary"}]

    result = await run([TOO_LONG], options=TurnOptions(compactor=compactor))
    assert result.end.reason is TurnEndReason.ERROR
    assert isinstance(result.end.error, PromptTooLongError)
    # checked like any history (6503cf1): a dict is not a message
    assert isinstance(result.end.error.__cause__, CompactionError)
    assert "not an AssistantMessage or UserMessage" in str(result.end.error.__cause__)
    assert result.end.messages == PROMPT  # the history is not replaced
    assert len(result.model.requests) == 1


# -- overloaded and fallback -------------------------------------------------------------

OVERLOADED = HTTPErrorAnswer(status=529)


async def test_overloaded_three_times_falls_back(autojump_clock: trio.testing.MockClock) -> None:
    result = await run(
        [OVERLOADED, OVERLOADED, OVERLOADED, text("from the small model")],
        options=TurnOptions(fallback_model="small"),
    )
    assert result.transitions() == [
        TransitionReason.OVERLOADED_RETRY,
        TransitionReason.OVERLOADED_RETRY,
        TransitionReason.MODEL_FALLBACK,
    ]
    assert result.of(ModelFallback) == [ModelFallback("big", "small", ())]
    assert [r.body["model"] for r in result.model.requests] == ["big", "big", "big", "small"]
    assert result.end.reason is TurnEndReason.COMPLETED


async def test_overloaded_without_fallback_is_an_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    result = await run([OVERLOADED])
    assert result.end.reason is TurnEndReason.ERROR
    assert isinstance(result.end.error, OverloadedError)
    assert result.end.messages == PROMPT


@pytest.mark.parametrize("last", [False, True])
async def test_overloaded_mid_stream_drops_the_partial_answer(
    autojump_clock: trio.testing.MockClock, last: bool
) -> None:
    log = Log()
    # the tool block stops early; the error comes after more streaming
    broken = ScriptedAnswer(
        blocks=[
            ToolUseBlock("a", "Read", {"path": "a"}),
            TextBlock("and now a long text that will never finish" * 2),
            ToolUseBlock("b", "Read", {"path": "b"}),
        ],
        timing=SLOW,
        faults=Faults(error_event_after=12),
    )
    answers = [broken, OVERLOADED, OVERLOADED, reads("c"), text("done")]
    if last:
        answers = [OVERLOADED, OVERLOADED, broken, reads("c"), text("done")]
    result = await run(
        answers, tools=make_tools(log, duration=0.5), options=TurnOptions(fallback_model="small")
    )
    assert result.transitions()[:3] == [
        TransitionReason.OVERLOADED_RETRY,
        TransitionReason.OVERLOADED_RETRY,
        TransitionReason.MODEL_FALLBACK,
    ]
    (fallback,) = result.of(ModelFallback)
    assert [b.id for b in fallback.started_tools] == ["a"]
    assert "b" not in log.starts
    # nothing of the dropped attempt is in the history
    ids = [
        u.id for m in result.end.messages if isinstance(m, AssistantMessage) for u in m.tool_uses
    ]
    assert ids == ["c"]
    assert result.end.reason is TurnEndReason.COMPLETED
    # every tool use the consumer saw finish streaming got one ToolResult event,
    # the dropped attempt's started tool too (it may have had effects)
    announced = [e.block.id for e in result.of(BlockFinished) if isinstance(e.block, ToolUseBlock)]
    assert sorted(r.tool_use_id for r in result.of(ToolResult)) == sorted(announced)
    (dropped,) = [r for r in result.of(ToolResult) if r.tool_use_id == "a"]
    assert dropped.started


async def test_overloaded_mid_stream_that_ends_the_turn_keeps_the_partial_answer(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A retried attempt is dropped (a tombstone); when the last resort fails too, the
    turn ends with the last error and keeps what the dropped attempt had finished."""
    log = Log()
    broken = ScriptedAnswer(
        blocks=[
            ToolUseBlock("a", "Read", {"path": "a"}),
            TextBlock("and now a long text that will never finish" * 2),
            ToolUseBlock("b", "Read", {"path": "b"}),
        ],
        timing=SLOW,
        faults=Faults(error_event_after=12),
    )
    result = await run([broken], tools=make_tools(log, duration=0.5))
    assert result.transitions() == [TransitionReason.NON_STREAMING_FALLBACK]
    (tombstone,) = result.of(AttemptDiscarded)
    assert tombstone.model_call == 1
    assert isinstance(tombstone.error, OverloadedError)
    assert [b.id for b in tombstone.started_tools] == ["a"]
    assert [r.body["stream"] for r in result.model.requests] == [True, False]
    assert result.end.reason is TurnEndReason.ERROR
    assert isinstance(result.end.error, InternalServerError)  # the script is exhausted
    assert "b" not in log.starts
    _, kept, answered = result.end.messages
    assert isinstance(kept, AssistantMessage)
    assert [u.id for u in kept.tool_uses] == ["a"]
    assert isinstance(answered, UserMessage)
    assert [b.tool_use_id for b in answered.content if isinstance(b, ToolResultBlock)] == ["a"]


async def test_overloaded_on_the_fallback_too(autojump_clock: trio.testing.MockClock) -> None:
    result = await run([OVERLOADED] * 6, options=TurnOptions(fallback_model="small"))
    assert result.end.reason is TurnEndReason.ERROR
    assert len(result.model.requests) == 6


async def test_other_errors_end_the_turn(autojump_clock: trio.testing.MockClock) -> None:
    result = await run([reads("a"), HTTPErrorAnswer(status=401)])
    assert result.end.reason is TurnEndReason.ERROR
    assert result.end.error is not None
    assert result.end.message is not None
    # the tool round trip before the error stays in the history
    assert len(result.end.messages) == 3


async def test_truncated_stream_is_an_error_that_keeps_what_was_received(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log = Log()
    result = await run(
        [reads("a", faults=Faults(truncate=True))],
        tools=make_tools(log),
        options=TurnOptions(fallback_model="small"),
    )
    assert result.end.reason is TurnEndReason.ERROR
    (tombstone,) = result.of(AttemptDiscarded)
    assert isinstance(tombstone.error, StreamTruncatedError)
    assert tombstone.reason is TransitionReason.NON_STREAMING_FALLBACK
    assert isinstance(result.end.error, InternalServerError)  # the last resort failed too
    assert "a" in log.starts  # it started at its content_block_stop, then was cancelled
    # the finished blocks stay, their tool use answered: a history valid for the API
    prompt, answer, results = result.end.messages
    assert prompt == PROMPT[0]
    assert isinstance(answer, AssistantMessage)
    assert answer.stop_reason is None
    assert answer.text == "Let me look."
    assert [u.id for u in answer.tool_uses] == ["a"]
    # the input tokens message_start reported were billed: they are counted
    assert answer.usage.input_tokens > 0
    assert result.end.usage == answer.usage
    assert isinstance(results, UserMessage)
    (block,) = results.content
    assert isinstance(block, ToolResultBlock)
    assert block.tool_use_id == "a"
    assert block.is_error
    assert "may have partly completed" in str(block.content)
    (event,) = result.of(ToolResult)
    assert event.started
    # the consumer saw each of them as it was added to the history
    assert result.of(AssistantMessage) == [answer]


# -- pause_turn, stop hooks, max_turns -------------------------------------------------------


async def test_pause_turn_continues_the_same_message(
    autojump_clock: trio.testing.MockClock,
) -> None:
    result = await run([text("Searching", stop_reason="pause_turn"), text(" found it.")])
    assert result.transitions() == [TransitionReason.PAUSE_TURN]
    # the paused answer goes back as the last message of the request
    assert result.request(1)["messages"][-1]["role"] == "assistant"
    assert result.request(1)["messages"][-1]["content"][0]["text"] == "Searching"
    (answer,) = result.of(AssistantMessage)
    assert [b.text for b in answer.content] == ["Searching", " found it."]  # type: ignore[union-attr]
    assert result.end.messages == (*PROMPT, answer)
    assert result.end.reason is TurnEndReason.COMPLETED


async def test_pause_turn_cut_by_max_turns_keeps_the_paused_answer(
    autojump_clock: trio.testing.MockClock,
) -> None:
    result = await run(
        [text("Searching", stop_reason="pause_turn")], options=TurnOptions(max_turns=1)
    )
    assert result.end.reason is TurnEndReason.MAX_TURNS
    assert result.end.messages[-1].text == "Searching"  # type: ignore[union-attr]


async def test_stop_hook_blocks_then_lets_go(autojump_clock: trio.testing.MockClock) -> None:
    calls: list[int] = []

    async def hook(
        messages: tuple[Message, ...], *, stop_hook_active: bool
    ) -> StopHookResult | None:
        calls.append(len(messages))
        await trio.sleep(0.5)
        if len(calls) == 1:
            return StopHookResult(block=True, message="Run the tests before stopping.")
        return None

    async def quiet(messages: tuple[Message, ...], *, stop_hook_active: bool) -> StopHookResult:
        return StopHookResult(block=False)

    with pytest.warns(DeprecationWarning, match="hooks=Hooks"):  # the old option still works
        options = TurnOptions(hooks=Hooks(stop=hook), stop_hooks=[quiet])
    result = await run([text("Done."), text("Tests pass. Done.")], options=options)
    assert result.transitions() == [TransitionReason.STOP_HOOK_BLOCKING]
    assert calls == [2, 4]
    assert result.request(1)["messages"][-1] == {
        "role": "user",
        "content": "Run the tests before stopping.",
    }
    assert result.end.reason is TurnEndReason.COMPLETED
    assert result.end.turns == 2


async def test_a_failing_stop_hook_ends_the_turn(autojump_clock: trio.testing.MockClock) -> None:
    async def hook(messages: tuple[Message, ...], *, stop_hook_active: bool) -> StopHookResult:
        raise ValueError("hook broke")

    result = await run([text("Done.")], options=TurnOptions(hooks=Hooks(stop=hook)))
    assert result.end.reason is TurnEndReason.ERROR
    assert isinstance(result.end.error, HookError)
    assert result.end.error.hook == "stop"
    assert isinstance(result.end.error.__cause__, ValueError)
    assert result.end.messages[-1].text == "Done."  # type: ignore[union-attr]


async def test_a_stop_hook_returning_garbage_ends_the_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def hook(messages: tuple[Message, ...], *, stop_hook_active: bool) -> StopHookResult:
        return True  # type: ignore[return-value]

    result = await run([text("Done.")], options=TurnOptions(hooks=Hooks(stop=hook)))
    assert result.end.reason is TurnEndReason.ERROR
    assert isinstance(result.end.error, HookError)
    assert "StopHookResult" in str(result.end.error)
    assert result.end.messages[-1].text == "Done."  # type: ignore[union-attr]


async def test_max_turns(autojump_clock: trio.testing.MockClock) -> None:
    result = await run([reads("a"), reads("b"), text("never")], options=TurnOptions(max_turns=2))
    assert result.end.reason is TurnEndReason.MAX_TURNS
    assert result.transitions() == [TransitionReason.NEXT_TURN]
    assert len(result.model.requests) == 2
    # the last tool results are in: the conversation can go on
    assert isinstance(result.end.messages[-1], UserMessage)
    assert result.end.messages[-1].tool_results[0].tool_use_id == "b"


# -- permissions -------------------------------------------------------------------------


async def test_deny_answers_with_an_error_and_goes_on(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log = Log()
    rules = PermissionRules(allow=["Read"], deny=["Bash(rm *)"])
    answer = ScriptedAnswer(blocks=[ToolUseBlock("x", "Bash", {"command": "rm -rf /"})])
    result = await run(
        [answer, text("ok")], tools=make_tools(log), options=TurnOptions(can_use_tool=rules)
    )
    assert "x" not in log.starts
    (results,) = [m for m in result.of(UserMessage) if m.tool_results]
    assert results.tool_results[0].is_error
    assert result.end.reason is TurnEndReason.COMPLETED


async def test_reject_ends_the_turn_with_a_valid_transcript(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log = Log()

    async def ask(tool: Tool, input: Mapping[str, Any], ctx: ToolContext) -> Reject:
        await trio.sleep(0.2)
        return Reject("No bash today.")

    rules = PermissionRules(allow=["Read"], ask=["Bash"], ask_callback=ask)
    answer = ScriptedAnswer(
        blocks=[
            ToolUseBlock("x", "Bash", {"command": "make"}),
            ToolUseBlock("a", "Read", {"path": "a"}),
            TextBlock("some more text streaming after the tool calls" * 3),
            ToolUseBlock("c", "Read", {"path": "c"}),
        ],
        timing=SLOW,
    )
    result = await run(
        [answer, text("never")],
        tools=make_tools(log, duration=5),
        options=TurnOptions(can_use_tool=rules),
    )
    assert result.end.reason is TurnEndReason.PERMISSION_REJECTED
    assert result.end.abort_reason == "permission_rejected"
    assert len(result.model.requests) == 1
    assert log.starts == {}  # x was rejected, a waited behind it
    # the partial answer is kept (cut at the rejection, while it streamed) with a
    # result for each of its tool uses
    (partial,) = result.of(AssistantMessage)
    assert partial.stop_reason is None
    ids = [u.id for u in partial.tool_uses]
    assert ids[0] == "x"
    assert "c" not in ids
    (results,) = [m for m in result.of(UserMessage) if m.tool_results]
    assert "No bash today." in str(results.tool_results[0].content)
    assert all(r.is_error for r in results.tool_results)


# -- abort and interrupt -----------------------------------------------------------------------


async def test_abort_while_streaming(
    autojump_clock: trio.testing.MockClock, run_turn_acting_at: Any
) -> None:
    control = TurnControl()
    log = Log()
    answer = reads("a", "b", prefix="Let me look at both of them now.", timing=SLOW)
    model = ScriptedModel([answer, text("never")])
    turn = query(
        client_for(model),
        PROMPT,
        tools=make_tools(log, duration=10),
        model="big",
        max_tokens=8192,
        control=control,
    )
    read_a = ToolUseBlock("a", "Read", {"path": "a"})
    events = await run_turn_acting_at(
        turn, control.abort, at=lambda i, e: isinstance(e, BlockFinished) and e.block == read_a
    )
    result = Run(events, [0.0] * len(events), model)
    check_run(result, PROMPT)
    assert result.end.reason is TurnEndReason.ABORTED_STREAMING
    assert result.end.abort_reason == "user_interrupted"
    (partial,) = result.of(AssistantMessage)
    assert [u.id for u in partial.tool_uses] == ["a"]
    assert log.ends == {}
    assert model.open_streams == 0


async def test_abort_while_tools_run(
    autojump_clock: trio.testing.MockClock, run_turn_acting_at: Any
) -> None:
    control = TurnControl()
    log = Log()
    model = ScriptedModel([reads("a"), text("never")])
    turn = query(
        client_for(model),
        PROMPT,
        tools=make_tools(log, duration=10),
        model="big",
        max_tokens=8192,
        control=control,
    )
    events = await run_turn_acting_at(turn, control.abort, after=0.5)
    result = Run(events, [0.0] * len(events), model)
    check_run(result, PROMPT)
    assert result.end.reason is TurnEndReason.ABORTED_TOOLS
    assert result.end.messages[-1].tool_results[0].is_error  # type: ignore[union-attr]
    assert trio.current_time() < 1


async def test_abort_before_start(autojump_clock: trio.testing.MockClock) -> None:
    control = TurnControl()
    control.abort()
    control.abort()  # idempotent
    result = await run([text("never")], control=control)
    assert result.end.reason is TurnEndReason.ABORTED_STREAMING
    assert result.end.messages == PROMPT
    assert result.model.requests == []


async def test_interrupt_stops_cancel_tools_and_ends_the_turn(
    autojump_clock: trio.testing.MockClock, run_turn_acting_at: Any
) -> None:
    control = TurnControl()
    log = Log()
    answer = ScriptedAnswer(
        blocks=[
            ToolUseBlock("r", "Read", {"path": "a"}),
            ToolUseBlock("x", "Bash", {"command": "sleep"}),
        ],
    )
    model = ScriptedModel([answer, text("never")])

    turn = query(
        client_for(model),
        PROMPT,
        tools=make_tools(log, duration=1),
        model="big",
        max_tokens=8192,
        control=control,
    )
    # at 1.5 s Read (1 s) is done, Bash runs
    events = await run_turn_acting_at(turn, control.interrupt, after=1.5)
    result = Run(events, [0.0] * len(events), model)
    check_run(result, PROMPT)
    assert result.end.reason is TurnEndReason.ABORTED_TOOLS
    assert result.end.abort_reason == "interrupt"
    results = result.end.messages[-1].tool_results  # type: ignore[union-attr]
    assert [r.is_error for r in results] == [False, True]
    assert "x" not in log.ends
    assert len(model.requests) == 1


async def test_interrupt_lets_block_tools_finish(
    autojump_clock: trio.testing.MockClock, run_turn_acting_at: Any
) -> None:
    control = TurnControl()
    log = Log()
    model = ScriptedModel([reads("a", "b"), text("never")])
    turn = query(
        client_for(model),
        PROMPT,
        tools=make_tools(log, duration=1),
        model="big",
        max_tokens=8192,
        control=control,
    )
    events = await run_turn_acting_at(turn, control.interrupt, after=0.3)
    result = Run(events, [0.0] * len(events), model)
    check_run(result, PROMPT)
    assert result.end.reason is TurnEndReason.ABORTED_TOOLS
    assert set(log.ends) == {"a", "b"}
    assert [r.content for r in result.end.messages[-1].tool_results] == [  # type: ignore[union-attr]
        "contents of a",
        "contents of b",
    ]


async def test_leaving_early_cancels_everything(autojump_clock: trio.testing.MockClock) -> None:
    log = Log()
    model = ScriptedModel([reads("a", timing=SLOW), text("never")])
    async with query(
        client_for(model), PROMPT, tools=make_tools(log, duration=10), model="big", max_tokens=8192
    ) as stream:
        async for event in stream:
            if isinstance(event, ToolProgress):
                break
    assert log.ends == {}
    assert model.open_streams == 0


async def test_bad_arguments() -> None:
    model = ScriptedModel([])
    with pytest.raises(ValueError, match="max_tokens"):
        async with query(client_for(model), PROMPT, tools=[], model="m", max_tokens=0):
            pass  # pragma: no cover
    with pytest.raises(ValueError, match="max_turns"):
        async with query(
            client_for(model),
            PROMPT,
            tools=[],
            model="m",
            max_tokens=1,
            options=TurnOptions(max_turns=0),
        ):
            pass  # pragma: no cover
    with pytest.raises(ValueError, match="max_tool_concurrency"):
        async with query(
            client_for(model),
            PROMPT,
            tools=[],
            model="m",
            max_tokens=1,
            options=TurnOptions(max_tool_concurrency=0),
        ):
            pass  # pragma: no cover


async def test_usage_counts_every_call(autojump_clock: trio.testing.MockClock) -> None:
    result = await run(
        [
            text("cut", stop_reason="max_tokens", usage=Usage(10, 5)),
            text("whole", usage=Usage(10, 7)),
        ]
    )
    assert result.end.usage == Usage(20, 12)


async def test_abort_during_the_compactor(autojump_clock: trio.testing.MockClock) -> None:
    control = TurnControl()

    async def compactor(messages: tuple[Message, ...]) -> list[Message]:
        control.abort()
        await trio.sleep(10)
        return []  # pragma: no cover

    result = await run([TOO_LONG], options=TurnOptions(compactor=compactor), control=control)
    assert result.end.reason is TurnEndReason.ABORTED_STREAMING
    assert result.end.messages == PROMPT
    assert result.of(Compacted) == []


async def test_abort_during_a_stop_hook(autojump_clock: trio.testing.MockClock) -> None:
    control = TurnControl()

    async def hook(messages: tuple[Message, ...], *, stop_hook_active: bool) -> StopHookResult:
        control.abort()
        await trio.sleep(10)
        return StopHookResult(block=True)  # pragma: no cover

    result = await run(
        [text("Done.")], options=TurnOptions(hooks=Hooks(stop=hook)), control=control
    )
    assert result.end.reason is TurnEndReason.ABORTED_TOOLS
    assert result.end.messages[-1].text == "Done."  # type: ignore[union-attr]


async def test_interrupt_before_start(autojump_clock: trio.testing.MockClock) -> None:
    control = TurnControl()
    control.interrupt()
    result = await run([text("never")], control=control)
    assert result.end.reason is TurnEndReason.ABORTED_STREAMING
    assert result.end.abort_reason == "interrupt"
    assert control.interrupted
    assert not control.aborted


async def test_errors_are_raised_as_themselves(autojump_clock: trio.testing.MockClock) -> None:
    model = ScriptedModel([text("hello")])

    async def consume(client: Any, fail: bool) -> None:
        async with query(client, PROMPT, tools=[], model="m", max_tokens=10) as events:
            async for _ in events:
                if fail:
                    raise KeyError("consumer")

    with pytest.raises(KeyError, match="consumer"):
        await consume(client_for(model), True)

    class Broken:
        def stream(self, **kwargs: Any) -> Any:
            raise TypeError("not a client")

    with pytest.raises(TypeError, match="not a client"):
        await consume(Broken(), False)


# -- aborts and interrupts injected at every event of a scripted turn ------------------
# The transcript stays valid (every tool_use has its tool_result, the history is what
# the events said).

ABORT_PROMPT = (UserMessage("Do the thing."),)


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
    run_turn_acting_at: Any,
    *,
    at: Callable[[int, Any], bool] | None = None,
    after: float | None = None,
    act: Callable[[TurnControl], None] = TurnControl.abort,
) -> tuple[Run, Log]:
    """Run the script; call ``act(control)`` at the event ``at(index, event)`` picks,
    or ``after`` seconds."""
    log = Log()
    model = ScriptedModel(script())
    control = TurnControl()
    turn = query(
        client_for(model),
        ABORT_PROMPT,
        tools=make_tools(log, duration=1.0),
        model="big",
        max_tokens=8192,
        control=control,
    )
    events = await run_turn_acting_at(turn, lambda: act(control), at=at, after=after)
    result = Run(events, [], model)
    check_run(result, ABORT_PROMPT)
    assert model.open_streams == 0
    return result, log


async def full_length(run_turn_acting_at: Any) -> tuple[int, int]:
    """The number of events of the whole turn, and the index of the final answer
    (an abort after it finds nothing left to cancel: the turn completes)."""
    result, _ = await drive(run_turn_acting_at, at=lambda i, e: False)
    assert result.end.reason is TurnEndReason.COMPLETED
    final = result.events.index(result.of(AssistantMessage)[-1])
    return len(result.events), final


ABORTED = {TurnEndReason.ABORTED_STREAMING, TurnEndReason.ABORTED_TOOLS}


async def test_abort_at_every_event(
    autojump_clock: trio.testing.MockClock, run_turn_acting_at: Any
) -> None:
    total, final = await full_length(run_turn_acting_at)
    assert total > 30
    seen: set[TurnEndReason] = set()
    for k in range(total - 1):
        result, log = await drive(run_turn_acting_at, at=lambda i, e, k=k: i == k)
        if k >= final:
            assert result.end.reason is TurnEndReason.COMPLETED
            continue
        assert result.end.reason in ABORTED, k
        assert result.end.abort_reason == "user_interrupted"
        seen.add(result.end.reason)
        # a cancelled tool never finished after the abort; none runs any more
        assert set(log.ends) <= set(log.starts)
        # nothing comes after the abort but what was already there: no new model call,
        # no new text, at most the answer whose stream had ended (its tools were
        # running: the stream and the tools' notices race to the consumer)
        after = result.events[k + 1 :]
        assert not any(isinstance(e, Transition) for e in after[1:])
        assert not any(isinstance(e, TextDelta) for e in after[1:])
        assert len([e for e in after if isinstance(e, AssistantMessage) and e.stop_reason]) <= 1
    assert seen == ABORTED


async def test_interrupt_at_every_event(
    autojump_clock: trio.testing.MockClock, run_turn_acting_at: Any
) -> None:
    _, final = await full_length(run_turn_acting_at)
    for k in range(final):
        result, log = await drive(
            run_turn_acting_at, at=lambda i, e, k=k: i == k, act=TurnControl.interrupt
        )
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


async def final_answer_time(run_turn_acting_at: Any) -> float:
    """Virtual seconds from the start of the turn to its final answer's event (an
    abort or interrupt before it finds the turn running)."""
    start = trio.current_time()
    seen: list[float] = []

    def stamp(_i: int, event: Any) -> bool:
        if isinstance(event, AssistantMessage) and event.stop_reason == "end_turn":
            seen.append(trio.current_time() - start)
        return False

    result, _ = await drive(run_turn_acting_at, at=stamp)
    assert result.end.reason is TurnEndReason.COMPLETED
    assert len(seen) == 1
    return seen[0]


@settings(max_examples=150, deadline=None)
@given(
    # strictly before the final answer, with room for the float rounding of a deadline
    fraction=st.floats(min_value=0, max_value=1 - 1e-9),
    how=st.sampled_from(["abort", "interrupt"]),
)
def test_abort_at_any_time(fraction: float, how: str, run_turn_acting_at: Any) -> None:
    """An abort or interrupt at any moment before the final answer ends the turn as
    aborted, every call answered (``check_run``); the act is asserted to have
    happened while the turn ran."""

    async def main() -> None:
        final = await final_answer_time(run_turn_acting_at)
        assert final > 5
        acted: list[float] = []

        def act(control: TurnControl) -> None:
            acted.append(trio.current_time())
            (TurnControl.abort if how == "abort" else TurnControl.interrupt)(control)

        start = trio.current_time()
        result, _ = await drive(run_turn_acting_at, after=fraction * final, act=act)
        assert len(acted) == 1
        assert acted[0] - start < final * (1 - 1e-10)
        assert result.end.reason in ABORTED
        assert result.end.abort_reason == ("user_interrupted" if how == "abort" else "interrupt")

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
