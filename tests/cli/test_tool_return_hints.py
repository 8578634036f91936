"""``@tool`` refuses, when the tool is defined, a function annotated to return what
no tool result can be (``-> int``, ``-> dict``): every call would fail at run time."""

from __future__ import annotations

from typing import Any

import pytest

from trio_agent import ToolDefinitionError, ToolOutput, tool


def test_int_and_dict_and_none_returns_are_refused() -> None:
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    async def info(key: str) -> dict[str, Any]:
        """Info."""
        return {}

    def nothing(x: int) -> None:
        """Nothing."""

    for fn, shown in ((add, "int"), (info, "dict"), (nothing, "None")):
        with pytest.raises(ToolDefinitionError, match=f"annotated to return {shown}"):
            tool(fn)


def test_results_and_unannotated_functions_are_accepted() -> None:
    def text(a: int) -> str:
        """Text."""
        return str(a)

    async def output(a: int) -> ToolOutput:
        """Output."""
        return ToolOutput("x")

    def bare(a: int):
        """Bare."""
        return str(a)

    for fn in (text, output, bare):
        assert tool(fn).name == fn.__name__
