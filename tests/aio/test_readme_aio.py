"""The README's "From an asyncio app" example runs as written: its FastAPI app under
a real uvicorn, a turn streamed, then a turn aborted through its endpoint (its
AnthropicClient() replaced by one talking to the scripted model)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import httpx_sse
import pytest

import trio_agent
from trio_agent import TextBlock, ToolUseBlock
from trio_agent.testing import ScriptedAnswer, ScriptedModel, check_history

README = Path(__file__).resolve().parents[2] / "README.md"


def _example() -> str:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## From an asyncio app") :]
    blocks = re.findall(r"^```python\n(.*?)^```", section, re.M | re.S)
    assert "trio_agent.aio.open_guest_run()" in blocks[0]
    return blocks[0]


async def _events(http: httpx.AsyncClient, url: str, **params: str) -> Any:
    async with httpx_sse.aconnect_sse(http, "POST", url, params=params) as source:
        async for event in source.aiter_sse():
            yield event.event, json.loads(event.data)


def test_the_asyncio_example_runs(
    run_asyncio: Any, serve_app: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = ScriptedModel(
        [
            ScriptedAnswer(blocks=[TextBlock("Hello from Trio.")]),
            ScriptedAnswer(
                blocks=[
                    TextBlock("Running."),
                    ToolUseBlock("toolu_1", "Bash", {"command": "exec sleep 60"}),
                ]
            ),
        ]
    )
    made: list[Any] = []
    real = trio_agent.AnthropicClient

    def client(*args: Any, **kwargs: Any) -> trio_agent.AnthropicClient:
        assert (args, kwargs) == ((), {})  # the example's AnthropicClient()
        http = httpx.AsyncClient(transport=model.transport())
        made.append(real(api_key="k", base_url="http://scripted", http_client=http))
        return made[-1]

    monkeypatch.setattr(trio_agent, "AnthropicClient", client)
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"__name__": "readme_aio"}
    exec(compile(_example(), "README.md", "exec"), namespace)
    assert len(made) == 1

    async def main() -> None:
        async with (
            serve_app(namespace["app"]) as (url, _server),
            httpx.AsyncClient(timeout=60) as http,
        ):
            first = [e async for e in _events(http, f"{url}/sessions/a", prompt="hi")]
            second: list[Any] = []
            async for name, data in _events(http, f"{url}/sessions/a", prompt="run it"):
                second.append((name, data))
                if name == "text" and "".join(d for n, d in second if n == "text") == "Running.":
                    # the tool call streams next: abort the turn while it runs or starts
                    answer = await http.post(f"{url}/sessions/a/abort")
                    assert answer.json() == {"aborted": True}
        assert "".join(d for n, d in first if n == "text") == "Hello from Trio."
        assert first[-1] == ("end", "completed")
        assert second[-1][0] == "end"
        assert second[-1][1] in ("aborted_streaming", "aborted_tools")
        session = namespace["sessions"]["a"]
        assert not session.running
        check_history(session.messages, strict=True)
        assert len(model.requests) == 2

    run_asyncio(main)
