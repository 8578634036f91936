"""MCP tools from a real streamable-HTTP server on 127.0.0.1 (a subprocess)."""

from __future__ import annotations

import gc
import subprocess
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio

from trio_agent import AbortReason, ToolExecutor, ToolProgress
from trio_agent.mcp import MCPProgress, open_mcp_tools
from trio_agent.testing import no_leaks

# The SDK's streamable-HTTP client leaves httpx2's SSE async generators to the
# garbage collector when it cancels its reader tasks; Trio finalizes them and warns
# (Trio pitfall 2, inside the SDK; upstream, not ours). Nothing is leaked: no_leaks
# checks tasks and fds, and each test collects before it ends so that the warnings
# cannot land in a later test.
pytestmark = [
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpx2\.:ResourceWarning"),
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore2\.:ResourceWarning"),
]


@pytest.fixture(autouse=True)
async def _collect_abandoned_generators() -> AsyncIterator[None]:
    yield
    gc.collect()
    await trio.sleep(0)  # let Trio's finalizer close them now
    gc.collect()


async def test_list_call_progress_and_headers(
    http_server: tuple[str, subprocess.Popen[str]], run_calls: Any, monkeypatch: Any
) -> None:
    url, _proc = http_server
    monkeypatch.setenv("MCP_TEST_TOKEN", "s3cret")
    entry = {"type": "http", "url": url, "headers": {"X-Token": "${MCP_TEST_TOKEN}"}}
    with no_leaks(processes=False):  # the server process belongs to the fixture
        async with open_mcp_tools({"web": entry}, call_timeout=60) as tools:
            assert "mcp__web__echo" in {t.name for t in tools}
            ran = await run_calls(
                tools,
                [
                    ("mcp__web__echo", {"text": "over http"}),
                    ("mcp__web__count", {"steps": 2}),
                    ("mcp__web__header", {"name": "X-Token"}),
                    *[("mcp__web__rendezvous", {"key": "h", "count": 2})] * 2,
                ],
            )
    r = ran.results
    assert r["call_0"].content == "over http"
    assert r["call_1"].content == "counted 2"
    assert [p.data for p in ran.progress if p.tool_use_id == "call_1"] == [
        MCPProgress(1, 2, "step 1"),
        MCPProgress(2, 2, "step 2"),
    ]
    # ${VAR} in headers is expanded from the environment.
    assert r["call_2"].content == "s3cret"
    assert r["call_3"].content == r["call_4"].content == "2 met"


async def test_cancel_then_kill_the_server_mid_call(
    http_server: tuple[str, subprocess.Popen[str]], run_calls: Any
) -> None:
    url, proc = http_server
    with no_leaks(processes=False):
        async with open_mcp_tools({"web": {"type": "http", "url": url}}, call_timeout=60) as tools:

            async def discard_once_started(executor: ToolExecutor, p: list[ToolProgress]) -> None:
                while not p:
                    await trio.sleep(0.01)
                executor.discard()

            ran = await run_calls(
                tools, [("mcp__web__block", {"key": "k"})], while_running=discard_once_started
            )
            assert ran.results["call_0"].abort_reason is AbortReason.STREAMING_FALLBACK
            after = await run_calls(tools, [("mcp__web__wait_cancelled", {"key": "k"})])
            assert after.results["call_0"].content == "k was cancelled"

            async def kill_once_started(_e: ToolExecutor, p: list[ToolProgress]) -> None:
                while not p:
                    await trio.sleep(0.01)
                proc.kill()

            killed = await run_calls(
                tools, [("mcp__web__sleep", {"seconds": 3600})], while_running=kill_once_started
            )
            assert killed.results["call_0"].is_error
            assert killed.results["call_0"].abort_reason is None
            later = await run_calls(tools, [("mcp__web__echo", {"text": "x"})])
            assert later.results["call_0"].is_error


async def test_an_unreachable_server_gives_no_tools(run_calls: Any) -> None:
    # A port nothing listens on: bind, note the port, close.
    sock = trio.socket.socket()
    await sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    with no_leaks():
        async with open_mcp_tools(
            {"gone": {"type": "http", "url": f"http://127.0.0.1:{port}/mcp"}}
        ) as tools:
            assert tools == []
