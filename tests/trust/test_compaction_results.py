"""A compactor's result is checked like any history: what the API would refuse is
never sent nor kept (the reactive compaction fails with a typed error; the automatic
one goes on with the old history)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import example, given, settings
from hypothesis import strategies as st

from trio_agent import (
    AssistantMessage,
    Compacted,
    CompactionError,
    Message,
    PromptTooLongError,
    Session,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    TurnEnd,
    TurnEndReason,
    TurnOptions,
    Usage,
    UserMessage,
)
from trio_agent._loop._compact import check_compacted
from trio_agent.testing import (
    HTTPErrorAnswer,
    ScriptedAnswer,
    ScriptedModel,
    check_history,
)

TOO_LONG = HTTPErrorAnswer(
    status=400,
    body={
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "prompt is too long: 9 > 8"},
    },
)
IDS = ["a", "b", "c"]


def assistant(*uses: str) -> AssistantMessage:
    return AssistantMessage(
        id="m", model="m", content=[TextBlock("t"), *(ToolUseBlock(i, "Read", {}) for i in uses)]
    )


def results(*ids: str, text_first: bool = False) -> UserMessage:
    blocks: list[Any] = [ToolResultBlock(i, "r") for i in ids]
    return UserMessage([TextBlock("note"), *blocks] if text_first else blocks)


messages = st.one_of(
    st.just(UserMessage("hello")),
    st.lists(st.sampled_from(IDS), max_size=2).map(lambda ids: assistant(*ids)),
    st.tuples(st.lists(st.sampled_from(IDS), min_size=1, max_size=2), st.booleans()).map(
        lambda t: results(*t[0], text_first=t[1])
    ),
)
histories = st.lists(messages, max_size=6)


@settings(max_examples=400, deadline=None)
@given(histories)
@example([UserMessage("hello")])  # accepted: the oracle runs, whatever is drawn
def test_what_the_check_accepts_the_api_accepts(history: list[Message]) -> None:
    """The oracle: ``trio_agent.testing.check_history`` (the API's rules)."""
    try:
        kept = check_compacted(history)
    except CompactionError:
        return
    check_history(kept)
    assert isinstance(kept[0], UserMessage)
    assert isinstance(kept[-1], UserMessage)


def test_a_valid_history_is_kept_as_it_is() -> None:
    """So the property above cannot pass by refusing everything."""
    valid = [
        UserMessage("x"),
        assistant("a", "b"),
        results("a", "b"),
        assistant(),
        UserMessage("y"),
    ]
    assert check_compacted(valid) == tuple(valid)
    assert check_compacted([UserMessage("summary")]) == (UserMessage("summary"),)


@pytest.mark.parametrize(
    "bad",
    [
        [],
        [results("a")],  # a tool_result without its tool_use
        [UserMessage("x"), assistant("a")],  # ends in an unanswered tool_use
        [assistant(), UserMessage("x")],  # starts with an assistant message
        [UserMessage("x"), assistant("a"), UserMessage("y")],  # the tool_use unanswered
        [UserMessage("x"), assistant("a"), results("a", "a")],
        "a string",
        [UserMessage("x"), {"role": "user", "content": "x"}],
        None,
    ],
)
def test_each_broken_shape_is_refused(bad: Any) -> None:
    with pytest.raises(CompactionError):
        check_compacted(bad)


HISTORY: tuple[Message, ...] = (
    UserMessage("read a"),
    assistant("a"),
    results("a"),
    AssistantMessage(id="m2", model="m", content=[TextBlock("read")]),
)


def broken_compactors() -> list[Any]:
    async def empty(history: tuple[Message, ...]) -> Sequence[Message]:
        return []

    async def orphan(history: tuple[Message, ...]) -> Sequence[Message]:
        return [results("a"), UserMessage("go on")]

    async def unanswered(history: tuple[Message, ...]) -> Sequence[Message]:
        return [UserMessage("summary"), assistant("zz")]

    async def assistant_first(history: tuple[Message, ...]) -> Sequence[Message]:
        return [assistant(), UserMessage("go on")]

    return [empty, orphan, unanswered, assistant_first]


def run_session(session: Session, prompt: str) -> list[Any]:
    async def main() -> list[Any]:
        async with session.submit(prompt) as events:
            return [e async for e in events]

    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


@pytest.mark.parametrize("compactor", broken_compactors(), ids=lambda c: c.__name__)
def test_a_broken_reactive_compaction_ends_the_turn_typed_and_sends_nothing(
    compactor: Any,
) -> None:
    model = ScriptedModel([TOO_LONG])
    session = Session(
        model.client(),
        [],
        model="m",
        messages=list(HISTORY),
        options=TurnOptions(compactor=compactor),
    )
    events = run_session(session, "and now?")
    end = events[-1]
    assert isinstance(end, TurnEnd)
    assert end.reason is TurnEndReason.ERROR
    assert isinstance(end.error, PromptTooLongError)
    assert isinstance(end.error.__cause__, CompactionError)
    assert len(model.requests) == 1  # the broken history was never sent
    assert session.messages == (*HISTORY, UserMessage("and now?"))  # nor kept
    check_history(session.messages)


@pytest.mark.parametrize("compactor", broken_compactors(), ids=lambda c: c.__name__)
def test_a_broken_automatic_compaction_goes_on_with_the_old_history(compactor: Any) -> None:
    calls: list[int] = []

    async def counted(history: tuple[Message, ...]) -> Sequence[Message]:
        calls.append(len(history))
        return await compactor(history)

    big = Usage(input_tokens=190_000, output_tokens=10)
    model = ScriptedModel(
        [
            ScriptedAnswer(blocks=[ToolUseBlock("t1", "Nope", {})], usage=big),
            ScriptedAnswer(blocks=[TextBlock("done")]),
        ]
    )
    session = Session(
        model.client(),
        [],
        model="m",
        options=TurnOptions(compactor=counted, auto_compact=0.5, context_window=200_000),
    )
    events = run_session(session, "go")
    end = events[-1]
    assert end.reason is TurnEndReason.COMPLETED
    assert len(model.requests) == 2
    second = model.requests[1].body["messages"]
    assert second[0] == {"role": "user", "content": "go"}  # the old history, whole
    assert calls == [3]  # it ran, before the second call
    assert not [e for e in events if isinstance(e, Compacted)]
    assert session.messages[0] == UserMessage("go")
    check_history(session.messages)
