"""The README's "Subagents" example runs as written, against the scripted model."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest

import trio_agent
from trio_agent import TextBlock, ToolUseBlock
from trio_agent.testing import ScriptedAnswer, ScriptedModel

README = Path(__file__).resolve().parent.parent.parent / "README.md"


def test_the_subagents_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocks = re.findall(r"^```python\n(.*?)^```", README.read_text(encoding="utf-8"), re.M | re.S)
    (example,) = [b for b in blocks if "researcher = subagent(" in b]
    model = ScriptedModel(
        [
            ScriptedAnswer(
                blocks=[ToolUseBlock("toolu_r", "researcher", {"prompt": "Who uses CancelScope?"})]
            ),
            ScriptedAnswer(
                blocks=[ToolUseBlock("toolu_g", "Grep", {"pattern": "CancelScope", "path": "."})]
            ),
            ScriptedAnswer(blocks=[TextBlock("loop.py uses it.")]),
            ScriptedAnswer(blocks=[TextBlock("Only loop.py does.")]),
        ]
    )
    real = trio_agent.AnthropicClient

    def client(*args: Any, **kwargs: Any) -> trio_agent.AnthropicClient:
        assert (args, kwargs) == ((), {})  # the example's AnthropicClient()
        http = httpx.AsyncClient(transport=model.transport())
        return real(api_key="k", base_url="http://scripted", http_client=http)

    monkeypatch.setattr(trio_agent, "AnthropicClient", client)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "loop.py").write_text("with trio.CancelScope():\n    pass\n")
    (tmp_path / "other.py").write_text("print('no scopes here')\n")
    exec(compile(example, "README.md", "exec"), {"__name__": "__main__"})

    out = capsys.readouterr().out
    assert "researcher → Grep(CancelScope)" in out
    assert "Only loop.py does." in out
    assert "[completed; 1 subagent turn(s)]" in out
    assert "'researcher': Usage(" in out
    # The child asked with its own system prompt and its prompt alone; its Grep ran.
    child = model.requests[1].body
    assert "You research code." in str(child["system"])
    assert len(child["messages"]) == 1
    grep = model.requests[2].body["messages"][-1]["content"][0]
    assert grep["tool_use_id"] == "toolu_g"
    assert "loop.py" in str(grep["content"])
    assert "other.py" not in str(grep["content"])
    parent_results = model.requests[3].body["messages"][-1]["content"][0]
    assert parent_results["content"] == "loop.py uses it."
