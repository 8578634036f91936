"""What a server lists, however odd: pages (a looping cursor too), names the API
refuses, invalid schemas, names that collide; with the SDK's low-level server."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import types
from mcp.server.lowlevel import Server

from trio_agent.mcp import mcp_tool_info, open_mcp_tools
from trio_agent.testing import no_leaks


def _tool(name: str, schema: dict[str, Any] | None = None, **extra: Any) -> types.Tool:
    return types.Tool(name=name, input_schema=schema or {"type": "object"}, **extra)


PAGES: dict[str | None, tuple[list[types.Tool], str | None]] = {
    None: ([_tool("first", description="The first.")], "p2"),
    "p2": (
        [
            _tool("a.b"),  # "." is not allowed in an API name: becomes "_"
            _tool("a_b"),  # ...and then collides with this one: skipped
            _tool("bad schema", {"type": "object", "properties": {"x": {"type": 7}}}),
        ],
        "p3",
    ),
    # A server that hands back a cursor it already gave: the listing ends.
    "p3": ([_tool("last", annotations=types.ToolAnnotations(read_only_hint=True))], "p2"),
}


async def list_tools(
    _ctx: Any, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    tools, cursor = PAGES[params.cursor if params else None]
    return types.ListToolsResult(tools=tools, next_cursor=cursor)


async def test_odd_listings(autojump_clock: Any, caplog: pytest.LogCaptureFixture) -> None:
    server: Server[Any] = Server("odd", on_list_tools=list_tools)
    with no_leaks():
        async with open_mcp_tools({"odd": server}) as tools:
            names = [t.name for t in tools]
    assert names == ["mcp__odd__first", "mcp__odd__a_b", "mcp__odd__last"]
    assert tools[0].description == "The first."
    assert tools[2].concurrency_safe is True
    info = mcp_tool_info(tools[1])
    assert info is not None
    assert info.tool == "a.b"  # the server's own name is what gets called
    skipped = " ".join(r.getMessage() for r in caplog.records)
    assert "'a_b'" in skipped
    assert "'bad schema'" in skipped
