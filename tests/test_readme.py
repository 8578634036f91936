"""The README's examples run: the Session example against the scripted model, and
every ``trio-agent`` command line it shows parses."""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

import trio_agent
from trio_agent import TextBlock, ToolUseBlock, read_transcript
from trio_agent._cli._main import build_parser
from trio_agent.testing import ScriptedAnswer, ScriptedModel

README = Path(__file__).resolve().parent.parent / "README.md"


def code_blocks(language: str) -> list[str]:
    text = README.read_text(encoding="utf-8")
    return re.findall(rf"^```{language}\n(.*?)^```", text, re.M | re.S)


def test_the_quick_start_begins_with_the_demo() -> None:
    first = code_blocks("bash")[0].splitlines()[0]
    assert first.split("#")[0].strip() == "pip install -e '.[cli]' && trio-agent demo"


def test_every_command_line_parses() -> None:
    parser = build_parser()
    lines = [
        line.split("#")[0].strip()
        for block in code_blocks("bash")
        for line in block.splitlines()
        if "trio-agent " in line
    ]
    assert len(lines) >= 4
    for line in lines:
        command = line[line.index("trio-agent ") :]
        args = parser.parse_args(shlex.split(command)[1:])
        assert args.command in (
            "demo",
            "run",
            "chat",
            "replay",
            "stream",
            "worker",
            "submit",
            "view",
        )


def test_links_point_to_files_that_exist() -> None:
    text = README.read_text(encoding="utf-8")
    local = [t for t in re.findall(r"\]\(([^)#]+)\)", text) if "://" not in t]
    assert local  # the README links to files of the repository
    for target in local:
        assert (README.parent / target).exists(), target


def test_the_session_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (example,) = [b for b in code_blocks("python") if "trio_agent.Session(" in b]
    model = ScriptedModel(
        [
            ScriptedAnswer(
                blocks=[
                    TextBlock("Checking both."),
                    ToolUseBlock("toolu_w", "weather", {"city": "Lyon"}),
                    ToolUseBlock("toolu_g", "Glob", {"pattern": "*.md"}),
                ]
            ),
            ScriptedAnswer(blocks=[TextBlock("Sunny in Lyon; NOTES.md is here.")]),
        ]
    )

    real = trio_agent.AnthropicClient

    def client(*args: Any, **kwargs: Any) -> trio_agent.AnthropicClient:
        assert (args, kwargs) == ((), {})  # the example's AnthropicClient()
        http = httpx.AsyncClient(transport=model.transport())
        return real(api_key="k", base_url="http://scripted", http_client=http)

    monkeypatch.setattr(trio_agent, "AnthropicClient", client)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "NOTES.md").write_text("notes\n")
    exec(compile(example, "README.md", "exec"), {"__name__": "__main__"})

    out = capsys.readouterr().out
    assert "Checking both." in out
    assert "Sunny in Lyon; NOTES.md is here." in out
    assert "[completed]" in out
    # the tools really ran, neither was denied
    results = model.requests[1].body["messages"][-1]["content"]
    assert [(r["tool_use_id"], r.get("is_error", False)) for r in results] == [
        ("toolu_w", False),
        ("toolu_g", False),
    ]
    assert results[0]["content"] == "Lyon: sunny, 21 °C"
    assert "NOTES.md" in results[1]["content"]
    assert len(read_transcript(tmp_path / "session.jsonl").messages) == 4
    assert out.rstrip().endswith("4")  # len(session.messages)


def test_the_executor_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    (example,) = [b for b in code_blocks("python") if "open_tool_executor(" in b]
    exec(compile(example, "README.md", "exec"), {"__name__": "readme"})
    assert capsys.readouterr().out.splitlines() == ["toolu_1 9 t=1", "toolu_2 16 t=1"]


def test_the_harness_example_runs(tmp_path: Path) -> None:
    (example,) = [b for b in code_blocks("python") if "run_scenario(" in b]
    # hypothesis reads the test's source: run it from a real file, as a user would.
    path = tmp_path / "test_readme_harness.py"
    path.write_text(example, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("test_readme_harness", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.test_executor_matches_the_reference()


def test_the_own_tools_example_runs(tmp_path: Path) -> None:
    (example,) = [b for b in code_blocks("python") if "run_tool_calls(" in b]
    path = tmp_path / "test_readme_own_tools.py"
    path.write_text(example, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("test_readme_own_tools", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.test_my_tools()
    assert module.weather.name == "weather"


def test_the_session_example_prints_why_a_turn_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (example,) = [b for b in code_blocks("python") if "trio_agent.Session(" in b]
    model = ScriptedModel([ScriptedAnswer(blocks=[TextBlock("never sent")])])
    real = trio_agent.AnthropicClient
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)

    def client(*args: Any, **kwargs: Any) -> trio_agent.AnthropicClient:
        assert (args, kwargs) == ((), {})  # the example's AnthropicClient(), no key
        http = httpx.AsyncClient(transport=model.transport())
        return real(base_url="http://scripted", http_client=http)

    monkeypatch.setattr(trio_agent, "AnthropicClient", client)
    monkeypatch.chdir(tmp_path)
    exec(compile(example, "README.md", "exec"), {"__name__": "__main__"})

    out = capsys.readouterr().out
    assert "[error]" in out
    assert "AuthenticationError: no Anthropic credentials" in out
    assert "ANTHROPIC_AUTH_TOKEN" in out
    assert model.requests == []


def _scripted_anthropic(
    monkeypatch: pytest.MonkeyPatch, model: ScriptedModel, **kwargs: Any
) -> None:
    """The examples' ``AnthropicClient()`` talks to *model*."""
    real = trio_agent.AnthropicClient

    def client(*args: Any, **given: Any) -> trio_agent.AnthropicClient:
        assert (args, given) == ((), {})  # the example's AnthropicClient()
        http = httpx.AsyncClient(transport=model.transport())
        return real(base_url="http://scripted", http_client=http, **kwargs)

    monkeypatch.setattr(trio_agent, "AnthropicClient", client)


def test_the_one_call_example_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (example,) = [b for b in code_blocks("python") if 'trio_agent.run(client, "Name' in b]
    answer = ScriptedAnswer(blocks=[TextBlock("2, 3 and 5.")], model=trio_agent.DEFAULT_MODEL)
    model = ScriptedModel([answer])
    _scripted_anthropic(monkeypatch, model, api_key="k")
    exec(compile(example, "README.md", "exec"), {"__name__": "__main__"})
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "2, 3 and 5."
    tokens, cost = out[1].split()
    assert int(tokens) > 0
    assert float(cost) > 0
    assert model.requests[0].body["messages"][-1]["content"] == "Name three prime numbers, briefly."


def test_the_one_call_example_raises_without_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    (example,) = [b for b in code_blocks("python") if 'trio_agent.run(client, "Name' in b]
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    model = ScriptedModel([ScriptedAnswer(blocks=[TextBlock("never sent")])])
    _scripted_anthropic(monkeypatch, model)
    with pytest.raises(trio_agent.AuthenticationError, match="ANTHROPIC_API_KEY"):
        exec(compile(example, "README.md", "exec"), {"__name__": "__main__"})
    assert model.requests == []


def test_the_typed_result_example_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (example,) = [b for b in code_blocks("python") if "output_type=Invoice" in b]
    wrong = {"vendor": "ACME Corp", "total_cents": 0, "paid": True}
    right = {"vendor": "ACME Corp", "total_cents": 1250, "paid": True}
    model = ScriptedModel(
        [ScriptedAnswer(blocks=[TextBlock(json.dumps(v))]) for v in (wrong, right)]
    )
    _scripted_anthropic(monkeypatch, model, api_key="k")
    exec(compile(example, "README.md", "exec"), {"__name__": "__main__"})
    assert capsys.readouterr().out.strip() == (
        "Invoice(vendor='ACME Corp', total_cents=1250, paid=True)"
    )
    assert "output_config" in model.requests[0].body
    assert "total_cents must be more than 0" in json.dumps(model.requests[1].body["messages"])


def test_the_hooks_example_runs() -> None:
    (example,) = [b for b in code_blocks("python") if "pre_tool_use=no_rm" in b]
    namespace: dict[str, Any] = {"__name__": "readme"}
    exec(compile(example, "README.md", "exec"), namespace)
    model = ScriptedModel(
        [
            ScriptedAnswer(
                blocks=[
                    ToolUseBlock("t1", "Bash", {"command": "rm -rf /"}),
                    ToolUseBlock("t2", "leak", {}),
                ]
            ),
            ScriptedAnswer(blocks=[TextBlock("ok")]),
        ]
    )

    @trio_agent.tool
    async def Bash(command: str) -> str:
        """Run a command."""
        raise AssertionError("the hook let rm -rf through")  # pragma: no cover

    @trio_agent.tool
    async def leak() -> str:
        """Print a secret."""
        return "the key is SECRET"

    async def main() -> trio_agent.RunResult:
        return await trio_agent.run(
            model.client(), "go", tools=[Bash, leak], model="m", options=namespace["options"]
        )

    result = trio.run(main)
    assert result.text == "ok"
    sent = model.requests[1].body["messages"][-1]["content"]
    assert sent[0]["content"] == "rm -rf is not allowed here"
    assert sent[1]["content"] == "the key is [redacted]"
