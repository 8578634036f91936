"""Run one tool directly, loudly: an input its schema rejects is a test failure, never
a silent skip."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .._tools import Tool, ToolContext, ToolOutput

__all__ = ["run_tool"]


async def run_tool(
    tool: Tool,
    input: Mapping[str, Any],
    *,
    report: Callable[[Any], None] | None = None,
    runs: list[str] | None = None,
) -> ToolOutput:
    """Validate *input* against *tool*'s schema, run the tool, and give its output as
    a :class:`~trio_agent.ToolOutput` (a plain string is wrapped).

    Use it in security tests: a wrong key (``path`` for ``file_path``) fails the test
    instead of letting the attack go untried. *runs*, if given, gets the tool's name
    appended once the tool has returned, so a test can assert that every tool under
    attack really ran.

    Raises:
        AssertionError: the input does not validate, or the tool returned something
            that is not a result.
    """
    problem = tool.validate(input)
    if problem is not None:
        raise AssertionError(f"{tool.name} was not run: its input is invalid: {problem}")
    ctx = ToolContext("toolu_test", tool.name, report=report or (lambda _data: None))
    out = await tool.run(input, ctx)
    if isinstance(out, str):
        out = ToolOutput(out)
    if not isinstance(out, ToolOutput):
        raise AssertionError(f"{tool.name} returned {out!r}, not a tool result")
    if runs is not None:
        runs.append(tool.name)
    return out
