"""check_history: the one checker of conversation histories (valid for the Messages API)."""

from __future__ import annotations

import pytest

from trio_agent import (
    AssistantMessage,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
)
from trio_agent.testing import InvariantViolation, check_history
from trio_agent.testing._history import STATISTICS


def use(*ids: str) -> AssistantMessage:
    return AssistantMessage(
        "m", "x", [ToolUseBlock(i, "Read", {}) for i in ids], stop_reason="tool_use"
    )


def results(*ids: str) -> UserMessage:
    return UserMessage([ToolResultBlock(i, "done") for i in ids])


ANSWER = AssistantMessage("m", "x", [TextBlock("hi")], stop_reason="end_turn")
Q = UserMessage("q")


@pytest.mark.parametrize(
    "messages",
    [
        [],
        [Q],
        [Q, ANSWER],
        [Q, use("a"), results("a"), ANSWER],
        [Q, use("a", "b"), results("b", "a")],  # any order, unless strict=True
        [Q, ANSWER, Q, Q],  # the API joins user messages in a row
        [Q, use("a"), UserMessage([ToolResultBlock("a", "done"), TextBlock("and")])],
    ],
)
def test_valid_histories_pass(messages: list[Message]) -> None:
    check_history(messages)


@pytest.mark.parametrize(
    ("history", "problem"),
    [
        ([ANSWER], "starts with an assistant"),
        ([Q, use("a")], "unanswered"),
        ([Q, use("a"), UserMessage("no results")], "answers"),
        ([Q, use("a"), UserMessage("first"), results("a")], "before"),
        ([Q, ANSWER, results("a")], "answers"),
        ([Q, use("a"), results("b")], "answers"),
        ([Q, use("a"), results("a", "a")], "answers"),
        ([Q, use("a"), results("a"), use("a"), results("a")], "used twice"),
        ([Q, use("a"), UserMessage([TextBlock("first"), ToolResultBlock("a", "x")])], "before"),
    ],
)
def test_broken_histories_are_caught(history: list[Message], problem: str) -> None:
    with pytest.raises(InvariantViolation, match=problem):
        check_history(history)


def test_ordered_wants_the_results_in_tool_use_order() -> None:
    history = [Q, use("a", "b"), results("b", "a")]
    check_history(history)
    with pytest.raises(InvariantViolation, match="out of the order"):
        check_history(history, strict=True)


def test_every_check_is_counted() -> None:
    before = (STATISTICS.histories, STATISTICS.tool_uses, STATISTICS.unpaired)
    check_history([Q, use("a", "b"), results("a", "b")])
    with pytest.raises(InvariantViolation):
        check_history([Q, use("c")])
    after = (STATISTICS.histories, STATISTICS.tool_uses, STATISTICS.unpaired)
    assert [b - a for a, b in zip(before, after, strict=True)] == [2, 3, 1]
