"""``trio-agent run --mcp-config``: a real turn over loopback HTTP with the tools of
a real stdio MCP server, asked about on the terminal."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from trio_agent import TextBlock, ToolUseBlock
from trio_agent._cli import _agent as cli_agent
from trio_agent._cli._main import build_parser
from trio_agent.testing import ScriptedAnswer, ScriptedModel, no_leaks, serve_scripted_model


async def test_run_with_mcp_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stdio_server: dict[str, Any]
) -> None:
    config = tmp_path / ".mcp.json"
    config.write_text(json.dumps({"mcpServers": {"t": stdio_server}}))
    asked: list[str] = []
    monkeypatch.setattr(cli_agent, "input_line", lambda q: asked.append(q) or "y\n")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    model = ScriptedModel(
        [
            ScriptedAnswer(blocks=[ToolUseBlock("toolu_1", "mcp__t__echo", {"text": "from mcp"})]),
            ScriptedAnswer(blocks=[TextBlock("Echoed.")]),
        ]
    )
    out = io.StringIO()
    with no_leaks(models=[model]):
        async with serve_scripted_model(model) as base_url:
            argv = ["run", "Echo it.", "--workspace", str(tmp_path), "--base-url", base_url]
            argv += ["--mcp-config", str(config), "--json"]
            args = build_parser().parse_args(argv)
            monkeypatch.setattr("sys.stdout", out)
            assert await cli_agent.run_with_mcp(args) == 0
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    (result,) = [r for r in records if r["type"] == "ToolResult"]
    assert result["content"] == "from mcp"
    assert not result["is_error"]
    assert len(asked) == 1
    assert "mcp__t__echo" in asked[0]
    offered = {t["name"] for t in model.requests[0].body["tools"]}
    assert {"Read", "mcp__t__echo"} <= offered
