"""The CLI's elicitation prompt against the real test server (in process): each
field asked on the terminal, an empty answer taking the default, a bad one asked
again; without a terminal the request is cancelled."""

from __future__ import annotations

import io
from typing import Any

import pytest

from trio_agent import ToolContext, ToolOutput
from trio_agent._cli._mcp_prompts import terminal_elicit
from trio_agent.mcp import open_mcp_tools

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")


async def order(server: Any, elicit: Any) -> ToolOutput:
    async with open_mcp_tools({"test": server}, elicit=elicit) as tools:
        (tool,) = [t for t in tools if t.name == "mcp__test__order"]
        out = await tool.run({}, ToolContext("t", tool.name, report=lambda _item: None))
    assert isinstance(out, ToolOutput)
    return out


async def test_the_form_is_asked_field_by_field(in_process_server: Any) -> None:
    answers = iter(["y", "soup", "", "two", "2"])
    prompts: list[str] = []

    def read(prompt: str) -> str:
        prompts.append(prompt)
        return next(answers)

    err = io.StringIO()
    out = await order(in_process_server, terminal_elicit(read, err, interactive=True))
    assert out.content == "2 medium soup"
    assert "asks: What would you like?" in err.getvalue()
    assert any('default "medium"' in p for p in prompts)
    assert len(prompts) == 5  # "two" was asked again


async def test_no_terminal_cancels(in_process_server: Any) -> None:
    err = io.StringIO()
    out = await order(in_process_server, terminal_elicit(err=err, interactive=False))
    assert out.content == "cancel"
    assert "no terminal" in err.getvalue()
