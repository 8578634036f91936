"""Fixtures for the tool executor tests (tests/executor): one way to run some calls.

A test takes ``run_calls`` as an argument and awaits it::

    async def test_something(autojump_clock: Any, run_calls: Any) -> None:
        (result,) = await run_calls([tool], [ToolUseBlock("toolu_1", "T", {})])
        assert result.content == "ok"

A test that acts on the executor while it runs (``interrupt()``, ``abort()``, reading
``progress`` or ``statistics()``, adding calls late) opens ``open_tool_executor``
itself.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest

from trio_agent import Tool, ToolResult, ToolUseBlock, open_tool_executor


async def _run_calls(
    tools: Sequence[Tool], blocks: Sequence[ToolUseBlock], **kw: Any
) -> list[ToolResult]:
    """``open_tool_executor(tools, **kw)``, every block added, ``finish()``, every
    result received; each block answered exactly once, in ``add_tool`` order."""
    async with open_tool_executor(tools, **kw) as executor:
        for block in blocks:
            executor.add_tool(block)
        executor.finish()
        results = [r async for r in executor.results]
    assert [r.tool_use_id for r in results] == [b.id for b in blocks], "one result per call"
    return results


@pytest.fixture(scope="session")
def run_calls() -> Callable[..., Awaitable[list[ToolResult]]]:
    """``results = await run_calls(tools, blocks, **executor_kw)``: the results of
    running *blocks* with a fresh executor (``options=TurnOptions(...)``,
    ``context=``... go to :func:`trio_agent.open_tool_executor`), checked to answer
    each block once, in order."""
    return _run_calls
