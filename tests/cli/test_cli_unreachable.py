"""When the API cannot be reached, the error names the URL that was tried and the
variable that sets it, for each provider (not Anthropic's for an OpenAI server)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from trio_agent._cli._main import main


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    ("model", "url_path", "variable"),
    [
        ("openai-chat:m", "/v1/chat/completions", "OPENAI_BASE_URL"),
        ("claude-sonnet-5-5", "/v1/v1/messages", "ANTHROPIC_BASE_URL"),
    ],
)
def test_unreachable_names_the_url_and_variable(
    model: str,
    url_path: str,
    variable: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    base = f"http://127.0.0.1:{closed_port()}/v1"
    argv = ["run", "hi", "--model", model, "--base-url", base, "--workspace", str(tmp_path)]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert f"cannot reach {base.removesuffix('/v1')}{url_path}" in err
    assert f"check the network, {variable} or --base-url" in err
    other = {"OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"} - {variable}
    assert not any(name in err for name in other)
