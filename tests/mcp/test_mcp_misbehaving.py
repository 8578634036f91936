"""Servers that misbehave on purpose (raw JSON-RPC scripts, real processes): each costs
one call an error result, never a hang, a frozen loop or an exception out of the block."""

from __future__ import annotations

import resource
from collections.abc import Callable
from typing import Any

import trio

from trio_agent import ToolContext, ToolOutput
from trio_agent.mcp import open_mcp_tools
from trio_agent.testing import no_leaks

#: Generous: only a hang reaches it (the default call timeout is an hour).
BOUND = 60

Raw = Callable[[dict[str, Any]], dict[str, Any]]


async def call_one(entry: dict[str, Any], **kwargs: Any) -> tuple[ToolOutput, list[Any]]:
    """Start the server, call its tool ``t`` once; the output and the progress seen."""
    progress: list[Any] = []
    with trio.fail_after(BOUND):
        async with open_mcp_tools({"s": entry}, **kwargs) as tools:
            (tool,) = [t for t in tools if t.name == "mcp__s__t"]
            out = await tool.run({}, ToolContext("id", tool.name, report=progress.append))
    assert isinstance(out, ToolOutput)
    return out, progress


def text_of(out: ToolOutput) -> str:
    assert isinstance(out.content, str)
    return out.content


async def test_a_server_that_dies_mid_call_while_its_child_holds_stdout(
    raw_server: Raw, tmp_path: Any, gone: Callable[[int], bool]
) -> None:
    pidfile = tmp_path / "child.pid"
    with no_leaks():
        out, _ = await call_one(raw_server({"call": "orphan", "pidfile": str(pidfile)}))
    # Seen dead by its process, not by an EOF that never comes while the child lives.
    assert out.is_error
    assert "'s'" in text_of(out)
    assert "exited with code 1" in text_of(out)
    assert gone(int(pidfile.read_text()))


async def test_what_a_server_started_never_outlives_the_block(
    raw_server: Raw, tmp_path: Any, gone: Callable[[int], bool]
) -> None:
    # The server exits at once when its stdin closes; its background child would
    # live on without the group kill that always follows.
    pidfile = tmp_path / "child.pid"
    with no_leaks():
        out, _ = await call_one(raw_server({"call": "spawn", "pidfile": str(pidfile)}))
    assert (out.content, out.is_error) == ("spawned", False)
    assert gone(int(pidfile.read_text()))


async def test_one_invalid_utf8_byte_is_an_error_result(raw_server: Raw) -> None:
    line = '{"jsonrpc": "2.0", "id": {id}, "result": {"content": [{"type": "text", "text": "a\xffb"}]}}'
    with no_leaks():
        out, _ = await call_one(raw_server({"call": "raw", "line": line}))
    assert out.is_error
    assert "not valid UTF-8" in text_of(out)


async def test_a_100_mb_text_result_is_refused_in_bounded_memory(raw_server: Raw) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    with no_leaks():
        out, _ = await call_one(raw_server({"call": "huge", "size": 100_000_000}))
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert out.is_error
    assert "over the limit" in text_of(out)
    assert "100,000,0" in text_of(out)  # its size, said
    assert grown < 64 * 1024, f"peak memory grew by {grown} KiB"


async def test_500_000_content_items_are_capped_and_say_so(raw_server: Raw) -> None:
    with no_leaks():
        out, _ = await call_one(raw_server({"call": "items", "count": 500_000}))
    assert not out.is_error
    assert "499,000 of 500,000 content items dropped" in text_of(out)
    assert text_of(out).count("i") < 2000


# A flood is dropped once past the cap, before the SDK spawns a task for each
# notification: the tasks spawned measure the work done (not the time it took).


async def test_200_000_progress_notifications_end_the_call(raw_server: Raw) -> None:
    with no_leaks() as check:
        out, progress = await call_one(raw_server({"call": "progress", "count": 200_000}))
    assert out.content == "done"
    assert 0 < len(progress) <= 1000
    assert check.spawned < 5000


async def test_100_000_log_messages_end_the_call(raw_server: Raw) -> None:
    with no_leaks() as check:
        out, _ = await call_one(raw_server({"call": "logs", "count": 100_000}))
    assert out.content == "done"
    assert check.spawned < 5000
