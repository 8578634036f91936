"""MCP tools from a real stdio server (a subprocess) through the real executor."""

from __future__ import annotations

import logging
import os
import signal
from typing import Any

import pytest
import trio

from trio_agent import (
    AbortReason,
    OpaqueBlock,
    TextBlock,
    ToolContext,
    ToolExecutor,
    ToolProgress,
)
from trio_agent.mcp import MCPProgress, mcp_tool_info, open_mcp_tools
from trio_agent.testing import no_leaks


async def test_list_and_call_through_the_executor(
    stdio_server: dict[str, Any], run_calls: Any, caplog: pytest.LogCaptureFixture, capfd: Any
) -> None:
    caplog.set_level(logging.INFO, logger="trio_agent.mcp")
    with no_leaks():
        async with open_mcp_tools({"srv": stdio_server}) as tools:
            by_name = {t.name: t for t in tools}
            assert "mcp__srv__echo" in by_name
            echo = by_name["mcp__srv__echo"]
            assert echo.description == "Say the text back."
            assert echo.input_schema["properties"]["text"]["type"] == "string"
            # readOnlyHint -> concurrency-safe; no hint -> not safe.
            assert echo.concurrency_safe is True
            assert by_name["mcp__srv__block"].concurrency_safe is False
            info = mcp_tool_info(by_name["mcp__srv__wipe"])
            assert info is not None
            assert info.destructive is True
            assert info.is_destructive
            assert mcp_tool_info(echo) is not None
            assert not mcp_tool_info(echo).is_destructive

            ran = await run_calls(
                tools,
                [
                    ("mcp__srv__echo", {"text": "héllo"}),
                    ("mcp__srv__count", {"steps": 3}),
                    # Three read-only calls that only return once all three run at once.
                    *[("mcp__srv__rendezvous", {"key": "r", "count": 3})] * 3,
                    ("mcp__srv__fail", {"message": "it broke"}),
                    ("mcp__srv__picture", {}),
                    ("mcp__srv__echo", {"text": 5}),  # refused by the schema, never sent
                ],
            )
    r = ran.results
    assert (r["call_0"].content, r["call_0"].is_error) == ("héllo", False)
    assert r["call_1"].content == "counted 3"
    assert [r[f"call_{i}"].content for i in (2, 3, 4)] == ["3 met"] * 3
    assert r["call_5"].is_error
    assert "it broke" in str(r["call_5"].content)
    picture = r["call_6"].content
    assert isinstance(picture, tuple)
    assert picture[0] == TextBlock("a pixel")
    assert isinstance(picture[1], OpaqueBlock)
    assert picture[1].to_api()["source"]["media_type"] == "image/png"
    assert r["call_7"].is_error
    assert not r["call_7"].started
    counted = [p.data for p in ran.progress if p.tool_use_id == "call_1"]
    assert counted == [MCPProgress(i, 3, f"step {i}") for i in (1, 2, 3)]
    assert str(counted[0]) == "1/3 step 1"
    # The server's stderr went to the log, not to the terminal.
    assert any("[srv stderr] test server starting" in m for m in caplog.messages)
    assert "test server starting" not in capfd.readouterr().err


async def test_cancelling_a_call_sends_the_mcp_cancellation(
    stdio_server: dict[str, Any], run_calls: Any
) -> None:
    with no_leaks():
        async with open_mcp_tools({"srv": stdio_server}, call_timeout=60) as tools:

            async def discard_once_started(executor: ToolExecutor, p: list[ToolProgress]) -> None:
                while not p:  # the server reports once its handler runs
                    await trio.sleep(0.01)
                executor.discard()

            ran = await run_calls(
                tools, [("mcp__srv__block", {"key": "k"})], while_running=discard_once_started
            )
            result = ran.results["call_0"]
            assert result.abort_reason is AbortReason.STREAMING_FALLBACK
            assert result.started
            # The server saw its handler cancelled: this call returns only then.
            after = await run_calls(tools, [("mcp__srv__wait_cancelled", {"key": "k"})])
            assert after.results["call_0"].content == "k was cancelled"


async def test_a_server_killed_mid_call_gives_error_results(
    stdio_server: dict[str, Any], run_calls: Any
) -> None:
    with no_leaks():
        async with open_mcp_tools({"srv": stdio_server, "other": stdio_server}) as tools:
            pid_run = await run_calls(tools, [("mcp__srv__pid", {})])
            pid = int(str(pid_run.results["call_0"].content))

            async def kill_once_started(_e: ToolExecutor, progress: list[ToolProgress]) -> None:
                while not progress:
                    await trio.sleep(0.01)
                os.kill(pid, signal.SIGKILL)

            ran = await run_calls(
                tools,
                [("mcp__srv__sleep", {"seconds": 3600})],
                while_running=kill_once_started,
            )
            assert ran.progress[0].data == MCPProgress(0, None, "started")
            killed = ran.results["call_0"]
            assert killed.is_error
            assert killed.abort_reason is None
            assert "'srv'" in str(killed.content)
            later = await run_calls(
                tools, [("mcp__srv__echo", {"text": "x"}), ("mcp__other__echo", {"text": "y"})]
            )
            assert later.results["call_0"].is_error
            # The other server goes on.
            assert later.results["call_1"].content == "y"


async def test_leaving_by_cancellation_stops_every_server(stdio_server: dict[str, Any]) -> None:
    started = trio.Event()
    with no_leaks():
        with trio.move_on_after(60) as guard:  # only a hang would reach it
            async with trio.open_nursery() as nursery:

                async def use() -> None:
                    async with open_mcp_tools({"a": stdio_server, "b": stdio_server}) as tools:
                        block = next(t for t in tools if t.name == "mcp__a__block")
                        started.set()
                        await block.run({"key": "k"}, ToolContext("id", block.name))

                nursery.start_soon(use)
                await started.wait()
                await trio.sleep(0.2)
                nursery.cancel_scope.cancel()
        assert not guard.cancelled_caught


async def test_a_server_that_cannot_start_is_logged_and_the_others_run(
    stdio_server: dict[str, Any], run_calls: Any, caplog: pytest.LogCaptureFixture, tmp_path: Any
) -> None:
    servers = {
        "missing": {"command": str(tmp_path / "no-such-program")},
        "crashes": {"command": "sh", "args": ["-c", "echo oops >&2; exit 3"]},
        "srv": stdio_server,
    }
    with no_leaks():
        async with open_mcp_tools(servers, startup_timeout=30) as tools:
            assert {t.name.split("__")[1] for t in tools} == {"srv"}
            ran = await run_calls(
                tools, [("mcp__missing__x", {}), ("mcp__srv__echo", {"text": "fine"})]
            )
    assert ran.results["call_0"].is_error
    assert "mcp__missing__x" in str(ran.results["call_0"].content)
    assert ran.results["call_1"].content == "fine"
    failed = {
        r.getMessage().split("'")[1] for r in caplog.records if "failed to start" in r.getMessage()
    }
    assert failed == {"missing", "crashes"}
