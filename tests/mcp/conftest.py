"""Shared helpers for the MCP tests: the test server, as a script and in process."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from trio_agent import (
    CanUseTool,
    Tool,
    ToolContext,
    ToolExecutor,
    ToolProgress,
    ToolResult,
    ToolUseBlock,
    TurnOptions,
    open_tool_executor,
)
from trio_agent.mcp import open_mcp_tools
from trio_agent.testing import process_exited

SERVER_SCRIPT = Path(__file__).with_name("mcp_test_server.py")
RAW_SCRIPT = Path(__file__).with_name("raw_server.py")


def stdio_entry(**extra: Any) -> dict[str, Any]:
    """The ``.mcp.json`` entry that runs the test server over stdio."""
    return {"command": sys.executable, "args": [str(SERVER_SCRIPT)], **extra}


def build_server(name: str = "test") -> Any:
    """A fresh in-process test server (the same code the script serves)."""
    spec = importlib.util.spec_from_file_location("mcp_test_server", SERVER_SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build(name)


@pytest.fixture
def raw_server(tmp_path: Path) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """``raw_server(spec)``: the ``.mcp.json`` entry of a raw JSON-RPC server that
    misbehaves as *spec* says (see raw_server.py); the spec goes in a file."""
    made = 0

    def entry(spec: dict[str, Any]) -> dict[str, Any]:
        nonlocal made
        made += 1
        path = tmp_path / f"raw_spec_{made}.json"
        path.write_text(json.dumps(spec))
        return {"command": sys.executable, "args": [str(RAW_SCRIPT), f"@{path}"]}

    return entry


def process_gone(pid: int, *, within: float = 10.0) -> bool:
    """Whether *pid* is gone (or a zombie) within *within* real seconds: a process
    group just sent SIGKILL takes a moment to die."""
    return process_exited(pid, timeout=within)


@pytest.fixture
def gone() -> Callable[..., bool]:
    return process_gone


@pytest.fixture(scope="session")
def stdio_server() -> dict[str, Any]:
    return stdio_entry()


@pytest.fixture
def in_process_server() -> Any:
    return build_server()


@pytest.fixture
def http_server() -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """The test server on streamable HTTP at 127.0.0.1 (a real subprocess): its URL
    and process."""
    proc = subprocess.Popen(
        [sys.executable, str(SERVER_SCRIPT), "--http"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        yield f"http://127.0.0.1:{port}/mcp", proc
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


@attrs.frozen
class Ran:
    """What one executor run gave: results by id, progress items in order."""

    results: dict[str, ToolResult]
    progress: list[ToolProgress]


async def run_blocks(
    tools: list[Tool],
    calls: list[tuple[str, dict[str, Any]]],
    *,
    while_running: Callable[[ToolExecutor, list[ToolProgress]], Awaitable[None]] | None = None,
    turn_scope: trio.CancelScope | None = None,
    can_use_tool: CanUseTool | None = None,
) -> Ran:
    """Add ``(tool name, input)`` calls to a real executor; every result and progress
    item. *while_running* runs beside the calls (e.g. to kill a server)."""
    results: dict[str, ToolResult] = {}
    progress: list[ToolProgress] = []
    async with (
        open_tool_executor(
            tools, turn_scope=turn_scope, options=TurnOptions(can_use_tool=can_use_tool)
        ) as executor,
        trio.open_nursery() as nursery,
    ):

        async def watch() -> None:
            async for item in executor.progress:
                if isinstance(item, ToolProgress):
                    progress.append(item)

        nursery.start_soon(watch)
        if while_running is not None:
            nursery.start_soon(while_running, executor, progress)
        for i, (name, input) in enumerate(calls):
            executor.add_tool(ToolUseBlock(id=f"call_{i}", name=name, input=input))
        executor.finish()
        async for result in executor.results:
            results[result.tool_use_id] = result
        nursery.cancel_scope.cancel()
    for result in executor.drain():
        results[result.tool_use_id] = result
    return Ran(results, progress)


@pytest.fixture
def run_calls() -> Callable[..., Awaitable[Ran]]:
    return run_blocks


@pytest.fixture
def server_factory() -> Callable[..., Any]:
    return build_server


#: The test server's tools the property harness draws calls of (none that waits
#: for another call, which a random batch may never make).
HARNESS_TOOLS = ("echo", "count", "sleep", "fail", "big", "wipe")


@pytest.fixture(scope="session")
def per_call_mcp_tools() -> list[Tool]:
    """The in-process test server's tools as :class:`Tool` values whose every call
    opens its own MCP session (``run_tool_calls`` starts its own ``trio.run``, so no
    session can outlive one); each call is a real MCP round trip, progress and
    cancellation included."""
    listed: list[Tool] = []

    async def collect() -> None:
        async with open_mcp_tools({"p": build_server()}) as tools:
            listed.extend(tools)

    trio.run(collect)
    server = build_server()

    def run_for(name: str) -> Callable[[Mapping[str, Any], ToolContext], Awaitable[Any]]:
        async def run(input: Mapping[str, Any], ctx: ToolContext) -> Any:
            async with open_mcp_tools({"p": server}) as tools:
                (tool,) = [t for t in tools if t.name == name]
                return await tool.run(input, ctx)

        return run

    return [
        Tool(
            t.name,
            t.description,
            t.input_schema,
            run_for(t.name),
            concurrency_safe=t.concurrency_safe,
        )
        for t in listed
        if t.name.removeprefix("mcp__p__") in HARNESS_TOOLS
    ]


CONFORMANCE_DIR = Path(__file__).with_name("conformance")


def _harness_module() -> Any:
    spec = importlib.util.spec_from_file_location(
        "mcp_conformance_harness", CONFORMANCE_DIR / "harness.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def conformance_harness() -> tuple[Path, dict[str, str]]:
    """The pinned MCP conformance harness (and node 22 to run it), installed from
    the npm registry if .ci/run has not already: its executable and environment.
    A machine where it cannot be installed fails the tests that need it, saying why."""
    harness = _harness_module()
    try:
        return harness.ensure_harness()
    except harness.HarnessUnavailable as exc:
        pytest.fail(f"the MCP conformance harness is needed and cannot be installed: {exc}")
