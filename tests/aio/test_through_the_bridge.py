"""The other Trio parts from asyncio, through trio_agent.aio: MCP servers (a real
stdio server process, held open with open_in_trio), the OpenAI client (over a
real loopback socket) and a durable client (a real worker process, SQLite)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import trio_agent.aio as aio
from trio_agent import OpenAIClient, RetryPolicy, TextBlock, ToolUseBlock, TurnEndReason
from trio_agent.durable import DurableClient
from trio_agent.mcp import open_mcp_tools
from trio_agent.testing import (
    ScriptedAnswer,
    ScriptedModel,
    check_history,
    process_exited,
    serve_scripted_model,
)

from .conftest import MODEL


def _children() -> set[int]:
    """This process's child processes (every thread's)."""
    pids: set[int] = set()
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        pids.update(int(p) for p in (task / "children").read_text().split())
    return pids


def test_mcp_servers_through_the_bridge(run_asyncio: Any) -> None:
    config = {"demo": {"command": sys.executable, "args": ["-m", "trio_agent.mcp.demo_server"]}}
    before = _children()

    async def main() -> None:
        model = ScriptedModel(
            [
                ScriptedAnswer(
                    blocks=[
                        ToolUseBlock("toolu_1", "mcp__demo__add", {"a": 2, "b": 3}),
                        ToolUseBlock("toolu_2", "mcp__demo__word_count", {"text": "one two"}),
                    ]
                ),
                ScriptedAnswer(blocks=[TextBlock("5, and 2 words.")]),
            ]
        )
        async with aio.open_in_trio(open_mcp_tools, config) as tools:
            names = sorted(t.name for t in tools)
            assert "mcp__demo__add" in names
            servers = _children() - before
            assert servers  # the server process runs
            session = aio.Session(model.client(), tools, model=MODEL)
            result = await session.run("Add 2 and 3, count the words of 'one two'.")
        # Leaving the block stopped the server, in Trio, before it returned.
        for pid in servers:
            assert process_exited(pid, timeout=0)
        assert result.reason == TurnEndReason.COMPLETED
        answers = model.requests[1].body["messages"][-1]["content"]
        assert [(r["tool_use_id"], r["content"]) for r in answers] == [
            ("toolu_1", "5"),
            ("toolu_2", "2"),
        ]
        check_history(session.messages, strict=True)

    run_asyncio(main)


def test_the_openai_client_through_the_bridge(run_asyncio: Any) -> None:
    model = ScriptedModel(
        [
            ScriptedAnswer(blocks=[ToolUseBlock("call_1", "echo", {"text": "hi"})]),
            ScriptedAnswer(blocks=[TextBlock("It said hi.")]),
        ],
        protocol="openai-responses",
    )

    from trio_agent import tool

    @tool
    async def echo(text: str) -> str:
        """Echo the text."""
        return text

    async def main() -> None:
        async with aio.open_in_trio(serve_scripted_model, model) as url:
            client = OpenAIClient(
                api_key="sk-test", base_url=f"{url}/v1", retry=RetryPolicy.never()
            )
            session = aio.Session(client, [echo], model="gpt-5")
            result = await session.run("Echo hi.")
            await aio.run_in_trio(client.aclose)
        assert result.text == "It said hi."
        assert model.requests[0].path == "/v1/responses"
        assert model.connections >= 1  # a real socket
        check_history(session.messages, strict=True)

    run_asyncio(main)


def test_a_durable_turn_through_the_bridge(run_asyncio: Any, tmp_path: Path) -> None:
    """A DurableClient from asyncio: submit (sync, in a thread), the result awaited
    in Trio with run_in_trio; a real worker process runs the turn."""
    url = f"sqlite:///{tmp_path / 'agents.sqlite'}"
    env = dict(os.environ)
    here = Path(__file__).resolve().parent
    env["PYTHONPATH"] = os.pathsep.join([str(here), *filter(None, [env.get("PYTHONPATH")])])
    code = "import sys; from trio_agent._cli import main; sys.exit(main())"
    argv = [sys.executable, "-c", code, "worker", "--app", "durable_aio_app:agent"]
    argv += ["--database-url", url, "--executor-id", "aio-w1"]

    async def main() -> None:
        client = await asyncio.to_thread(DurableClient.connect, url, agent="aio-test")
        with open(tmp_path / "worker.log", "wb") as log:
            worker = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            handle = await asyncio.to_thread(client.submit, "s1", "Shout your name.")
            summary = await aio.run_in_trio(handle.wait)
            history = await asyncio.to_thread(client.history, "s1")
        finally:
            worker.terminate()
            await asyncio.to_thread(worker.wait)
            await asyncio.to_thread(client.close)
        assert summary.reason == TurnEndReason.COMPLETED, (tmp_path / "worker.log").read_text()
        assert summary.text == "shouted S1"
        check_history(history, strict=True)
        assert len(history) == 4

    run_asyncio(main)
