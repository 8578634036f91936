"""A small MCP server written with the official SDK, for the MCP tests.

Every tool is async: the SDK runs sync tools in a worker thread, which Trio's
virtual clock cannot wait for (it would jump past the call timeout).

Run as a real subprocess: ``python mcp_test_server.py`` serves stdio;
``python mcp_test_server.py --http`` serves streamable HTTP on 127.0.0.1 (an
ephemeral port, printed as the first line of stdout). The tests also build it in
process with :func:`build`. Not a test module: nothing here is collected.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import warnings
from collections import defaultdict

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.types import (
    ImageContent,
    NotificationParams,
    SamplingMessage,
    TextContent,
    ToolAnnotations,
)
from pydantic import BaseModel

# Logging and roots are deprecated by the 2026-07-28 revision, still the current one's way.
warnings.simplefilter("ignore", MCPDeprecationWarning)


class Order(BaseModel):
    """What ``order`` asks the user for (``size`` has a default)."""

    dish: str
    size: str = "medium"
    count: int = 1


READ_ONLY = ToolAnnotations(read_only_hint=True)


def build(name: str = "test") -> MCPServer:
    """The server: every tool the tests need, with its state in this closure."""
    app = MCPServer(name)
    arrived: defaultdict[str, int] = defaultdict(int)
    everyone_here: defaultdict[str, anyio.Event] = defaultdict(anyio.Event)
    cancelled: defaultdict[str, anyio.Event] = defaultdict(anyio.Event)

    @app.tool(annotations=READ_ONLY)
    async def echo(text: str) -> str:
        """Say the text back."""
        return text

    @app.tool(annotations=READ_ONLY)
    async def rendezvous(key: str, count: int) -> str:
        """Return once *count* calls with this key are running at the same time."""
        arrived[key] += 1
        if arrived[key] >= count:
            everyone_here[key].set()
        await everyone_here[key].wait()
        return f"{count} met"

    @app.tool(annotations=READ_ONLY)
    async def count(steps: int, ctx: Context) -> str:
        """Count to *steps*, reporting each step as progress."""
        for i in range(1, steps + 1):
            await ctx.report_progress(i, steps, f"step {i}")
            await anyio.sleep(0.01)
        return f"counted {steps}"

    @app.tool(annotations=READ_ONLY)
    async def sleep(seconds: float, ctx: Context) -> str:
        """Say "started" as progress, sleep, then say so."""
        await ctx.report_progress(0, None, "started")
        await anyio.sleep(seconds)
        return f"slept {seconds}"

    @app.tool()
    async def block(key: str, ctx: Context) -> str:
        """Say "started" as progress, wait until cancelled, remember the cancellation."""
        await ctx.report_progress(0, None, "started")
        try:
            await anyio.sleep_forever()
        finally:
            cancelled[key].set()
        return "unreachable"

    @app.tool(annotations=READ_ONLY)
    async def wait_cancelled(key: str) -> str:
        """Return once a ``block`` call with this key was cancelled."""
        await cancelled[key].wait()
        return f"{key} was cancelled"

    @app.tool(annotations=READ_ONLY)
    async def header(name: str, ctx: Context) -> str:
        """The value of request header *name* (HTTP only), or "none"."""
        return (ctx.headers or {}).get(name.lower(), "none")

    @app.tool(annotations=READ_ONLY)
    async def pid() -> str:
        """The server's process id."""
        return str(os.getpid())

    @app.tool()
    async def fail(message: str) -> str:
        """Fail with *message*."""
        raise ToolError(message)

    @app.tool(annotations=READ_ONLY)
    async def picture() -> list[TextContent | ImageContent]:
        """A caption and a one-pixel PNG."""
        png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
        return [
            TextContent(type="text", text="a pixel"),
            ImageContent(type="image", data=png, mime_type="image/png"),
        ]

    @app.tool(annotations=READ_ONLY)
    async def big(size: int) -> str:
        """*size* characters of text."""
        return "x" * size

    @app.tool(annotations=ToolAnnotations(destructive_hint=True))
    async def wipe(path: str) -> str:
        """Pretend to delete *path* (destructive)."""
        print(f"wipe {path}", file=sys.stderr, flush=True)
        return f"wiped {path}"

    @app.tool()
    async def order(ctx: Context) -> str:
        """Ask the user what to order (form elicitation); say what came back."""
        result = await ctx.elicit("What would you like?", Order)
        if result.action != "accept":
            return result.action
        return f"{result.data.count} {result.data.size} {result.data.dish}"

    @app.tool()
    async def visit(url: str, ctx: Context) -> str:
        """Ask the user to visit *url* (URL elicitation)."""
        return (await ctx.elicit_url("Please sign in", url, "visit-1")).action

    @app.tool()
    async def summarize(text: str, ctx: Context) -> str:
        """Have the client's model answer *text* (sampling)."""
        result = await ctx.session.create_message(
            [SamplingMessage(role="user", content=TextContent(type="text", text=text))],
            max_tokens=100,
            system_prompt="Be brief.",
        )
        content = result.content
        said = content.text if isinstance(content, TextContent) else repr(content)
        return f"{result.model}: {said}"

    @app.tool(annotations=READ_ONLY)
    async def roots(ctx: Context) -> str:
        """The client's roots, one URI a line."""
        listed = await ctx.session.list_roots()
        return "\n".join(str(root.uri) for root in listed.roots)

    roots_changed = anyio.Event()

    async def on_roots_changed(_ctx: object, _params: NotificationParams) -> None:
        roots_changed.set()

    app._lowlevel_server.add_notification_handler(  # pyright: ignore[reportPrivateUsage]
        "notifications/roots/list_changed", NotificationParams, on_roots_changed
    )

    @app.tool(annotations=READ_ONLY)
    async def roots_after_change(ctx: Context) -> str:
        """Wait for notifications/roots/list_changed, then list the roots again."""
        await roots_changed.wait()
        listed = await ctx.session.list_roots()
        return "\n".join(str(root.uri) for root in listed.roots)

    @app.tool(annotations=READ_ONLY)
    async def whoami(ctx: Context) -> str:
        """The client's name and version, as it said in initialize."""
        params = ctx.session.client_params
        info = params.client_info if params is not None else None
        return f"{info.name} {info.version}" if info is not None else "unknown"

    @app.tool(annotations=READ_ONLY)
    async def shout(level: str, message: str, ctx: Context) -> str:
        """Send *message* as a log message at *level*."""
        await ctx.log(level, message, logger_name="shouter")  # type: ignore[arg-type]
        return "sent"

    return app


def _serve_http(app: MCPServer) -> None:
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)  # connections wait in the backlog until uvicorn accepts them
    print(sock.getsockname()[1], flush=True)
    config = uvicorn.Config(app.streamable_http_app(), log_level="warning")
    anyio.run(uvicorn.Server(config).serve, [sock])


if __name__ == "__main__":
    print("test server starting", file=sys.stderr, flush=True)
    server = build()
    if "--http" in sys.argv:
        _serve_http(server)
    else:
        server.run()
    if "--stubborn" in sys.argv:
        # Outlive stdin's end and ignore SIGTERM: only SIGKILL stops this one.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while True:
            signal.pause()
