"""The README's OpenAI example runs, against the scripted Responses API."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest

import trio_agent
from trio_agent import TextBlock, ToolUseBlock
from trio_agent.testing import ScriptedAnswer, ScriptedModel

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_openai_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocks = re.findall(r"^```python\n(.*?)^```", README.read_text(encoding="utf-8"), re.M | re.S)
    (example,) = [b for b in blocks if "OpenAIClient()" in b]
    model = ScriptedModel(
        [
            ScriptedAnswer(blocks=[ToolUseBlock("call_g", "Glob", {"pattern": "*.py"})]),
            ScriptedAnswer(blocks=[TextBlock("main.py is the only one.")]),
        ],
        protocol="openai-responses",
    )
    real = trio_agent.OpenAIClient

    def client(*args: Any, **kwargs: Any) -> trio_agent.OpenAIClient:
        assert (args, kwargs) == ((), {})  # the example's OpenAIClient()
        http = httpx.AsyncClient(transport=model.transport())
        return real(api_key="k", base_url="http://scripted/v1", http_client=http)

    monkeypatch.setattr(trio_agent, "OpenAIClient", client)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "main.py").write_text("print('hi')\n")
    exec(compile(example, "README.md", "exec"), {"__name__": "__main__"})
    out = capsys.readouterr().out
    assert "main.py is the only one." in out
    assert "[completed]" in out
    sent = model.requests[1].body
    assert sent["instructions"] == "You are a concise assistant."
    (output,) = [i for i in sent["input"] if i.get("type") == "function_call_output"]
    assert output["call_id"] == "call_g"
    assert "main.py" in output["output"]
