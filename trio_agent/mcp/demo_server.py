"""A small stdio MCP server for demos and the README: ``python -m trio_agent.mcp.demo_server``.

Written with the official SDK's ``MCPServer``. Its tools: ``add`` and ``word_count``
(read-only, so they run side by side), ``countdown`` (reports MCP progress) and
``note`` (not read-only: appends to an in-memory list).
"""

from __future__ import annotations

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

__all__ = ["build_demo_server"]

_READ_ONLY = ToolAnnotations(read_only_hint=True)


def build_demo_server() -> MCPServer:
    """The demo server (serve it with ``.run()``, or pass it in process to
    ``open_mcp_tools``)."""
    app = MCPServer("trio-agent-demo")
    notes: list[str] = []

    @app.tool(annotations=_READ_ONLY)
    async def add(a: float, b: float) -> str:
        """Add two numbers."""
        return f"{a + b:g}"

    @app.tool(annotations=_READ_ONLY)
    async def word_count(text: str) -> str:
        """Count the words of a text."""
        return str(len(text.split()))

    @app.tool(annotations=_READ_ONLY)
    async def countdown(start: int, ctx: Context) -> str:
        """Count down from *start* to zero, one step every 0.1 s, reporting progress."""
        start = max(0, min(start, 100))
        for i in range(start, 0, -1):
            await ctx.report_progress(start - i, start, f"{i}...")
            await anyio.sleep(0.1)
        return "liftoff"

    @app.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
    async def note(text: str) -> str:
        """Remember a note; returns every note so far."""
        notes.append(text)
        return "\n".join(notes)

    return app


if __name__ == "__main__":  # pragma: no cover - run as a subprocess by the tests
    build_demo_server().run()
