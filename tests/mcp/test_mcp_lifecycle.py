"""Starting and stopping servers: cancelled at any moment, left by an exception,
a server that will not stop: no process, task or descriptor is left."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import ToolContext
from trio_agent.mcp import open_mcp_tools
from trio_agent.testing import no_leaks


@settings(max_examples=5, deadline=None)
@given(delay=st.floats(0, 1.5))
def test_cancelled_at_any_moment_leaves_nothing(stdio_server: dict[str, Any], delay: float) -> None:
    entered: list[bool] = []

    async def main() -> None:
        with trio.move_on_after(delay):
            async with open_mcp_tools({"a": stdio_server, "b": stdio_server}) as tools:
                entered.append(bool(tools))
                block = next(t for t in tools if t.name == "mcp__a__block")
                await block.run({"key": "k"}, ToolContext("id", block.name))

    with no_leaks():
        trio.run(main)
    # Either the block was never entered, or it was with the tools of both servers.
    assert entered in ([], [True])


async def test_an_exception_in_the_block_propagates_as_itself(stdio_server: dict[str, Any]) -> None:
    entered = False

    async def leave_by_raising() -> None:
        nonlocal entered
        async with open_mcp_tools({"a": stdio_server}) as tools:
            entered = bool(tools)
            raise KeyError("mine")

    with no_leaks(), pytest.raises(KeyError, match="mine"):
        await leave_by_raising()
    assert entered


async def test_a_server_that_ignores_eof_and_sigterm_is_killed(
    stdio_server: dict[str, Any],
) -> None:
    stubborn = {**stdio_server, "args": [*stdio_server["args"], "--stubborn"]}
    with no_leaks():
        async with open_mcp_tools({"s": stubborn}) as tools:
            assert tools
        # Leaving took the SDK's bounded escalation: stdin closed, SIGTERM to the
        # group, then SIGKILL; no_leaks checks the process is gone.


async def test_in_process_servers_close_at_once(autojump_clock: Any, server_factory: Any) -> None:
    with no_leaks():
        async with open_mcp_tools({"a": server_factory(), "b": server_factory()}) as tools:
            assert len({t.name.split("__")[1] for t in tools}) == 2
            entered = trio.current_time()
        assert trio.current_time() == entered
