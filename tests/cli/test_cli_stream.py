"""`trio-agent stream`, run in process on the embedded scripted model."""

from __future__ import annotations

import json

import pytest

from trio_agent._cli import _stream
from trio_agent._cli._main import main


@pytest.fixture(autouse=True)
def no_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def test_stream_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stream", "hello", "--json", "--max-tokens", "50"]) == 0
    captured = capsys.readouterr()
    assert "scripted answer, no key" in captured.err
    lines = [json.loads(line) for line in captured.out.splitlines()]
    assert all(set(line) >= {"type"} for line in lines)
    events = [line["event"] for line in lines if line["type"] == "StreamEvent"]
    assert events[0]["type"] == "message_start"
    assert events[-1]["type"] == "message_stop"
    blocks = [line["block"] for line in lines if line["type"] == "BlockFinished"]
    assert [b["type"] for b in blocks] == ["thinking", "text", "tool_use", "tool_use"]
    assert blocks[2]["input"] == {"path": "README.md"}
    result = lines[-1]
    assert result["type"] == "StreamResult"
    assert result["message"]["content"] == blocks
    assert result["message"]["stop_reason"] == "tool_use"
    assert result["ttft"] > 0
    text = "".join(
        e["delta"]["text"]
        for e in events
        if e["type"] == "content_block_delta" and e["delta"]["type"] == "text_delta"
    )
    assert text == blocks[1]["text"]


def test_stream_plain(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stream"]) == 0
    out = capsys.readouterr().out
    assert "I'll start by reading the README" in out
    assert '[tool_use Read toolu_demo_1] {"path": "README.md"}' in out
    assert "[tool_use Glob toolu_demo_2]" in out
    assert "[thinking] The user wants an overview." in out
    assert "stop_reason: tool_use" in out
    assert "ttft: " in out
    assert "usage: " in out


def test_plain_output_without_rich(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import builtins

    real_import = builtins.__import__

    def no_rich(name: str, *args: object, **kwargs: object) -> object:
        if name.startswith("rich"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "__import__", no_rich)
    assert main(["stream"]) == 0
    assert "stop_reason: tool_use" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv",
    [["stream", "--max-tokens", "x"], ["stream", "--max-tokens", "0"], ["stream", "--bogus"]],
)
def test_bad_options_are_one_line_errors(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "error:" in err
    assert "Traceback" not in err


def test_api_errors_are_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A real key and an unreachable base URL: a typed connection error, not a traceback.
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-SENTINEL")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    from trio_agent import RetryPolicy

    original = _stream.AnthropicClient
    monkeypatch.setattr(
        _stream, "AnthropicClient", lambda **kw: original(retry=RetryPolicy.never(), **kw)
    )
    assert main(["stream", "hi"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("trio-agent: error: cannot reach http://127.0.0.1:9/v1/messages: ")
    assert "APIConnectionError" not in err
    assert "Traceback" not in err
    assert err.count("\n") == 2
    assert "SENTINEL" not in err


@pytest.mark.parametrize("how", ["token+env-url", "key+--base-url"])
async def test_stream_talks_to_the_api_run_would(
    how: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a token and ANTHROPIC_BASE_URL, or a key and --base-url: the real API is
    used (the scripted answer is not played), with the token as a bearer."""
    import trio

    from trio_agent import TextBlock
    from trio_agent._cli._main import build_parser
    from trio_agent.testing import ScriptedAnswer, ScriptedModel, serve_scripted_model

    scripted = ScriptedModel([ScriptedAnswer(blocks=[TextBlock("From the server.")])])
    async with serve_scripted_model(scripted) as url:
        argv = ["stream", "hi"]
        if how == "token+env-url":
            monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "tok-SENTINEL")
            monkeypatch.setenv("ANTHROPIC_BASE_URL", url)
        else:
            monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-SENTINEL")
            argv += ["--base-url", url]
        args = build_parser().parse_args(argv)
        import io

        out, err = io.StringIO(), io.StringIO()
        assert await args.handler(args, out, err) == 0
        await trio.lowlevel.checkpoint()
    assert "From the server." in out.getvalue()
    assert "scripted answer" not in err.getvalue()
    (request,) = scripted.requests
    headers = {k.lower(): v for k, v in request.headers.items()}
    if how == "token+env-url":
        assert headers["authorization"] == "Bearer tok-SENTINEL"
    else:
        assert headers["x-api-key"] == "sk-ant-SENTINEL"
