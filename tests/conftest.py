"""Fixtures shared by the whole suite (no test module imports another).

Layer folders (model/, executor/, loop/, session/, tools/, testing/, cli/) may add
their own ``conftest.py``; helpers worth having outside this suite live in
:mod:`trio_agent.testing` instead (``ScriptedModel.client``, ``check_history``,
``run_virtual``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest
import trio

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


# -- acting at an event: the abort / interrupt boilerplate --------------------------------

EventHook = Callable[[int, Any], bool]


async def _run_turn_acting_at(
    turn: AbstractAsyncContextManager[AsyncIterator[Any]],
    act: Callable[[], object],
    *,
    at: EventHook | None = None,
    after: float | None = None,
) -> list[Any]:
    """Every event of ``turn`` (``query(...)`` or ``session.submit(...)``), calling
    ``act()`` right after each event for which ``at(index, event)`` is true, and/or once
    when ``after`` seconds (virtual time, from the start) have passed."""
    assert at is not None or after is not None, "act at an event, at a time, or both"
    events: list[Any] = []
    async with trio.open_nursery() as nursery:
        if after is not None:
            deadline = trio.current_time() + after

            async def act_later() -> None:
                await trio.sleep_until(deadline)
                act()

            nursery.start_soon(act_later)
        async with turn as stream:
            async for event in stream:
                if at is not None and at(len(events), event):
                    act()
                events.append(event)
        nursery.cancel_scope.cancel()
    return events


@pytest.fixture(scope="session")
def run_turn_acting_at() -> Callable[..., Awaitable[list[Any]]]:
    """``await run_turn_acting_at(turn, act, at=..., after=...)``: the events of a turn,
    with ``act()`` (an abort, an interrupt, a copy...) done at the chosen event or time."""
    return _run_turn_acting_at


def _surrogates_replaced(value: Any) -> Any:
    if isinstance(value, str):
        return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in value)
    if isinstance(value, Mapping):
        return {_surrogates_replaced(k): _surrogates_replaced(v) for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, list | tuple):
        return [_surrogates_replaced(v) for v in value]  # pyright: ignore[reportUnknownVariableType]
    return value


@pytest.fixture(scope="session")
def surrogates_replaced() -> Callable[[Any], Any]:
    """The tests' own model of the library's cleaning of JSON-like data (not the
    library's code): every lone surrogate, in keys and values at any depth, as
    U+FFFD; mappings as dicts, sequences as lists."""
    return _surrogates_replaced
