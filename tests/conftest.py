"""Fixtures shared by the whole suite (no test module imports another).

Layer folders (model/, executor/, loop/, session/, tools/, testing/, cli/) may add
their own ``conftest.py``; helpers worth having outside this suite live in
:mod:`trio_agent.testing` instead (``ScriptedModel.client``, ``check_history``,
``run_virtual``).
"""

from __future__ import annotations

import pytest

from trio_agent import (
    AssistantMessage,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
    UserMessage,
)


def _assistant(n: int, *tool_ids: str) -> AssistantMessage:
    blocks = [TextBlock(f"ok {n}")] + [
        ToolUseBlock(i, "Read", {"path": f"f{i}.py"}) for i in tool_ids
    ]
    return AssistantMessage(
        id=f"msg_{n}",
        model="claude-test",
        content=blocks,
        stop_reason="tool_use" if tool_ids else "end_turn",
        usage=Usage(input_tokens=10 * n, output_tokens=n),
    )


def _results(*tool_ids: str) -> UserMessage:
    return UserMessage([ToolResultBlock(i, f"content of {i}") for i in tool_ids])


@pytest.fixture(scope="session")
def history() -> tuple[Message, ...]:
    """A valid six-message conversation: two tool rounds (two tools, then one), an answer."""
    return (
        UserMessage("fix the bug"),
        _assistant(1, "t1", "t2"),
        _results("t1", "t2"),
        _assistant(2, "t3"),
        _results("t3"),
        _assistant(3),
    )
