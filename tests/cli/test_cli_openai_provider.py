"""``trio-agent run`` with OpenAI: ``--provider`` or an ``openai:`` model prefix."""

from __future__ import annotations

import argparse
import io
from pathlib import Path
from typing import Any

import pytest

import trio_agent._cli._agent as cli_agent
from trio_agent import TextBlock, ToolUseBlock
from trio_agent._cli._main import build_parser, main
from trio_agent.testing import ScriptedAnswer, ScriptedModel, serve_scripted_model


def _args(tmp_path: Path, *, model: str, provider: str | None, base_url: str) -> argparse.Namespace:
    argv = ["run", "read the readme", "--model", model, "--workspace", str(tmp_path)]
    argv += ["--base-url", base_url, *(["--provider", provider] if provider else [])]
    return build_parser().parse_args(argv)


@pytest.mark.parametrize(
    ("model", "provider", "protocol", "path"),
    [
        ("openai:gpt-x", None, "openai-responses", "/v1/responses"),
        ("gpt-x", "openai", "openai-responses", "/v1/responses"),
        ("openai-chat:gpt-x", None, "openai-chat", "/v1/chat/completions"),
    ],
)
async def test_run_against_an_openai_server(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    model: str,
    provider: str | None,
    protocol: Any,
    path: str,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-sentinel-cli")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    (tmp_path / "README.md").write_text("hello from the readme\n")
    scripted = ScriptedModel(
        [
            ScriptedAnswer(blocks=[ToolUseBlock("call_1", "Read", {"file_path": "README.md"})]),
            ScriptedAnswer(blocks=[TextBlock("It says hello.")]),
        ],
        protocol=protocol,
    )
    out = io.StringIO()
    async with serve_scripted_model(scripted) as url:
        args = _args(tmp_path, model=model, provider=provider, base_url=url + "/v1")
        assert await cli_agent.run_prompt(args, out=out) == 0  # type: ignore[arg-type]
    text = out.getvalue()
    assert "It says hello." in text
    assert [r.path for r in scripted.requests] == [path, path]
    assert scripted.requests[0].body["model"] == "gpt-x"  # the prefix is not sent
    assert scripted.requests[0].headers["authorization"] == "Bearer sk-sentinel-cli"
    assert "sk-sentinel-cli" not in text
    assert "hello from the readme" in scripted.requests[1].content.decode()  # it was read


def test_run_openai_without_a_key_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert main(["run", "hi", "--model", "openai:gpt-x", "--workspace", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1
    assert "OPENAI_API_KEY" in err


def test_run_provider_contradicting_the_prefix(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    assert main(["run", "hi", "--provider", "anthropic", "--model", "openai:gpt-x"]) == 2
    assert "contradicts" in capsys.readouterr().err
