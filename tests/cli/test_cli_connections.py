"""``run`` and ``chat`` enter the client they make (``async with client:``), so the
requests of a command share one connection pool: a chat's turns go over one TCP
connection to the real loopback server. A client passed in is left as it is."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

import trio_agent._cli._agent as cli_agent
from trio_agent import AnthropicClient, TextBlock, ToolUseBlock
from trio_agent._cli._chat import run_chat
from trio_agent._cli._main import build_parser
from trio_agent.testing import ScriptedAnswer, ScriptedModel, serve_scripted_model


def answer(text: str) -> ScriptedAnswer:
    return ScriptedAnswer(blocks=[TextBlock(text)])


def lines(*typed: str) -> Any:
    """A ``readline`` that types *typed*, then reports the end of input."""
    queue = [f"{line}\n" for line in typed]
    return lambda _question: queue.pop(0) if queue else ""


def chat_args(tmp_path: Path, url: str) -> Any:
    argv = ["chat", "--model", "claude-sonnet-5-5", "--workspace", str(tmp_path)]
    return build_parser().parse_args([*argv, "--base-url", url])


async def test_two_chat_turns_share_one_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-sentinel")
    scripted = ScriptedModel([answer("First answer."), answer("Second answer.")])
    out = io.StringIO()
    async with serve_scripted_model(scripted) as url:
        status = await run_chat(
            chat_args(tmp_path, url), out=out, err=io.StringIO(), read=lines("one", "two")
        )
    assert status == 0
    assert "First answer." in out.getvalue()
    assert "Second answer." in out.getvalue()
    assert len(scripted.requests) == 2
    assert scripted.connections == 1


async def test_a_run_with_tools_uses_one_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-sentinel")
    (tmp_path / "a.txt").write_text("alpha\n")
    scripted = ScriptedModel(
        [
            ScriptedAnswer(blocks=[ToolUseBlock("t1", "Read", {"file_path": "a.txt"})]),
            answer("It says alpha."),
        ]
    )
    async with serve_scripted_model(scripted) as url:
        argv = ["run", "read a.txt", "--model", "claude-sonnet-5-5"]
        args = build_parser().parse_args([*argv, "--workspace", str(tmp_path), "--base-url", url])
        out = io.StringIO()
        status = await cli_agent.run_prompt(args, out=out, err=io.StringIO())  # type: ignore[arg-type]
    assert status == 0, out.getvalue()
    assert len(scripted.requests) == 2
    (result,) = scripted.requests[1].body["messages"][-1]["content"]
    assert result["tool_use_id"] == "t1"
    assert "alpha" in str(result["content"])
    assert scripted.connections == 1


async def test_a_client_passed_in_is_not_entered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-sentinel")
    scripted = ScriptedModel([answer("First answer."), answer("Second answer.")])
    async with serve_scripted_model(scripted) as url:
        client = AnthropicClient(api_key="sk-ant-sentinel", base_url=url)
        status = await run_chat(
            chat_args(tmp_path, url),
            client=client,
            out=io.StringIO(),
            err=io.StringIO(),
            read=lines("one", "two"),
        )
        assert not client.closed  # its owner closes it
    assert status == 0
    assert len(scripted.requests) == 2
    assert scripted.connections == 2  # not entered: one connection per request
