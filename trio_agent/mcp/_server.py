"""One MCP server: its transport and ``ClientSession``, owned by one task.

The SDK's transports and sessions are anyio task groups and cancel scopes, so they
must be entered and left by the same task: :meth:`Server.run` does both, and
:meth:`Server.call` (run by the executor's tool tasks) only sends requests on the
session. A server that cannot start, or dies, is marked failed: its calls get
error results, never a hang, and nothing raises out of the ``open_mcp_tools`` block.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import AsyncGenerator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, TextIO, cast

import attrs
import httpx2
import mcp
import trio

# The SDK's own in-memory transport (what ``mcp.Client(server)`` uses); it has no
# public name yet.
from mcp.client._memory import InMemoryTransport
from mcp.client.auth import OAuthFlowError, TokenStorage
from mcp.client.streamable_http import streamable_http_client
from mcp.server.lowlevel import Server as LowLevelServer
from mcp.server.mcpserver import MCPServer

from .._tools import ToolContext, ToolOutput
from ._auth import Authorize, NeedsAuthorization, TokenStorageFactory, oauth_provider
from ._client import (
    Elicit,
    MCPRoots,
    MCPSampling,
    client_info,
    elicitation_callback,
    log_message,
    route_sdk_logs,
)
from ._config import HttpServerConfig, ServerConfig, StdioServerConfig
from ._convert import tool_output
from ._http import LazyOAuth, cap_body, guarded
from ._stdio import open_stdio
from ._wire import MAX_LINE_BYTES, Reader

__all__ = ["ClientHooks", "InProcessServer", "MCPProgress", "Server"]

logger = logging.getLogger("trio_agent.mcp")
route_sdk_logs()

#: An in-process server (the SDK's ``MCPServer`` or low-level ``Server``).
InProcessServer = MCPServer | LowLevelServer[Any]

#: Seconds the stderr reader may go on draining once its server has stopped.
_STDERR_DRAIN = 0.5
#: Seconds the HTTP transport has to close (its DELETE of the session, its tasks).
_HTTP_CLOSE = 5.0


@attrs.frozen
class MCPProgress:
    """An MCP progress notification, as it reaches ``ctx.progress``."""

    progress: float
    total: float | None = None
    message: str | None = None

    def __str__(self) -> str:
        amount = f"{self.progress:g}" if self.total is None else f"{self.progress:g}/{self.total:g}"
        return f"{amount} {self.message}" if self.message else amount


async def _log_stderr(server: str, stream: trio.lowlevel.FdStream) -> None:
    """Each line the server writes to stderr, to the ``trio_agent.mcp`` log."""
    pending = b""
    while chunk := await stream.receive_some(65536):
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            logger.info("[%s stderr] %s", server, line.decode(errors="replace"))
        pending = pending[-65536:]  # a line without an end is kept to a bounded size
    if pending:
        logger.info("[%s stderr] %s", server, pending.decode(errors="replace"))


@attrs.frozen
class ClientHooks:
    """What the client answers servers with (see ``open_mcp_tools``' arguments)."""

    roots: MCPRoots
    elicit: Elicit | None = None
    sampling: MCPSampling | None = None
    authorize: Authorize | None = None
    token_storage: TokenStorageFactory | None = None


def _transport(
    server: Server, config: ServerConfig | InProcessServer, stderr: _StderrPipe | None
) -> AbstractAsyncContextManager[Any]:
    if isinstance(config, StdioServerConfig):
        assert stderr is not None
        return open_stdio(
            server.name,
            config,
            stderr=stderr.errlog.fileno(),
            on_exit=server.exited,
            reader=server.reader,
        )
    if isinstance(config, HttpServerConfig):
        return _http(server, config)
    return InMemoryTransport(config)


@attrs.frozen
class _Refusal:
    """An HTTP answer of 400 or more to a request for the server's own URL."""

    status: int
    reason: str
    url: str


@asynccontextmanager
async def _http(server: Server, config: HttpServerConfig) -> AsyncGenerator[Any]:
    # The SDK's default timeouts (30 s, reads 300 s: a response may stay open).
    timeout = httpx2.Timeout(30.0, read=300.0)
    auth: httpx2.Auth | None = None
    if config.auth is not None:
        if not isinstance(config.auth, httpx2.Auth):
            raise TypeError(f"auth must be an httpx2.Auth, not {type(config.auth).__name__}")
        auth = config.auth
    elif not any(k.lower() == "authorization" for k in config.headers):
        # OAuth acts only on a 401/403; a static Authorization header is the user's choice.
        provider = await oauth_provider(
            server.name,
            config.url,
            config.oauth,
            _storage(server, config),
            server.hooks.authorize,
            on_authorizing=server.authorizing,
        )
        auth = LazyOAuth(provider)

    async def note(response: httpx2.Response) -> None:
        await trio.lowlevel.checkpoint()
        if str(response.request.url) != config.url:
            return
        if response.status_code >= 400:
            server.refusal = _Refusal(response.status_code, response.reason_phrase, config.url)
        else:
            server.refusal = None

    # Leaving is bounded: a request the server never answers must not hold it up.
    with trio.CancelScope() as leaving:
        async with (
            httpx2.AsyncClient(
                headers=dict(config.headers),
                timeout=timeout,
                auth=auth,
                event_hooks={"response": [note, cap_body]},
            ) as client,
            streamable_http_client(
                config.url, http_client=client, max_sse_event_size=MAX_LINE_BYTES
            ) as streams,
            guarded(streams, server.reader) as guarded_streams,
        ):
            try:
                yield guarded_streams
            finally:
                leaving.deadline = trio.current_time() + _HTTP_CLOSE


def _storage(server: Server, config: HttpServerConfig) -> TokenStorage:
    from ._auth import default_token_storage

    factory = server.hooks.token_storage or default_token_storage
    return factory(server.name, config.url)


@attrs.define(eq=False)
class _StderrPipe:
    """A pipe for a stdio server's stderr; its lines go to the log, not the terminal."""

    server: str
    stream: trio.lowlevel.FdStream
    errlog: TextIO
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)

    @classmethod
    def open(cls, server: str) -> _StderrPipe:
        read_fd, write_fd = os.pipe()
        # Both ends are owned at once: the stream closes the read end, stop() the other.
        return cls(server, trio.lowlevel.FdStream(read_fd), os.fdopen(write_fd, "w"))

    async def pump(self) -> None:
        async with self.stream:
            with self.scope:
                await _log_stderr(self.server, self.stream)

    def stop(self) -> None:
        """Stop reading soon: the server is gone, but a survivor may hold the pipe."""
        self.errlog.close()
        self.scope.deadline = min(self.scope.deadline, trio.current_time() + _STDERR_DRAIN)


@attrs.define(eq=False)
class Server:
    """One configured server: :meth:`run` owns its connection, :meth:`call` uses it."""

    name: str
    config: ServerConfig | InProcessServer
    call_timeout: float
    startup_timeout: float
    max_result_chars: int
    #: The ``tools/list`` entries (wire JSON), once started.
    listed: list[dict[str, Any]] = attrs.field(factory=list[dict[str, Any]])
    #: Why the server cannot take calls (None while it can).
    failure: str | None = None
    hooks: ClientHooks = attrs.field(factory=lambda: ClientHooks(MCPRoots([os.getcwd()])))
    #: The last HTTP refusal of the server's URL (an HTTP server only).
    refusal: _Refusal | None = None
    _session: mcp.ClientSession | None = None
    _closing: trio.Event = attrs.field(factory=trio.Event)
    _calls: set[trio.CancelScope] = attrs.field(factory=set[trio.CancelScope])
    _startup: trio.CancelScope | None = None
    #: What the server's messages pass through (stdio and HTTP; an in-process
    #: server is the program's own code).
    reader: Reader = attrs.field(
        init=False, default=attrs.Factory(lambda self: Reader(self.name), takes_self=True)
    )

    def authorizing(self, active: bool) -> None:
        """The user's OAuth step started (True) or ended: the start-up deadline
        waits for a person, then counts again from the end of the step."""
        if self._startup is not None:
            self._startup.deadline = (
                math.inf if active else trio.current_time() + self.startup_timeout
            )

    def _session_for(self, read: Any, write: Any) -> mcp.ClientSession:
        hooks = self.hooks
        name = self.name

        async def logging_callback(params: mcp.types.LoggingMessageNotificationParams) -> None:
            await log_message(name, params)

        return mcp.ClientSession(
            read,
            write,
            sampling_callback=hooks.sampling.callback(name) if hooks.sampling else None,
            elicitation_callback=elicitation_callback(name, hooks.elicit) if hooks.elicit else None,
            list_roots_callback=hooks.roots.callback(),
            logging_callback=logging_callback,
            client_info=client_info(),
        )

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Connect, list the tools, report started, and hold the connection until
        :meth:`close`; a failure at any point is recorded, never raised."""
        stderr: _StderrPipe | None = None
        async with trio.open_nursery() as nursery:
            if isinstance(self.config, StdioServerConfig):
                stderr = _StderrPipe.open(self.name)
                nursery.start_soon(stderr.pump)
            try:
                with trio.CancelScope(
                    deadline=trio.current_time() + self.startup_timeout
                ) as startup:
                    self._startup = startup
                    async with (
                        _transport(self, self.config, stderr) as (read, write),
                        self._session_for(read, write) as session,
                    ):
                        if stderr is not None:
                            stderr.errlog.close()  # the child has its own copy
                        await session.initialize()
                        self.listed = await _list_tools(session)
                        self._startup = None
                        startup.deadline = math.inf
                        self._session = session
                        self.hooks.roots.attach(session)
                        task_status.started()
                        task_status = trio.TASK_STATUS_IGNORED
                        await self._closing.wait()
                if startup.cancelled_caught:
                    self._fail(f"did not start within {self.startup_timeout:g} s")
            except Exception as exc:
                self._fail(self._why(exc))
            finally:
                if self._session is not None:
                    self.hooks.roots.detach(self._session)
                self._session = None
                self._startup = None
                if stderr is not None:
                    stderr.stop()
        # Only reached without a cancellation (a cancelled start is not a start).
        if task_status is not trio.TASK_STATUS_IGNORED:
            logger.warning("MCP server %r failed to start: %s", self.name, self.failure)
            task_status.started()
        elif self.failure is not None:
            logger.warning("MCP server %r stopped: %s", self.name, self.failure)

    def _why(self, exc: BaseException) -> str:
        """Why the server failed: an HTTP refusal says its status, and for 401/403
        that the server needs authorization and how to give it."""
        oauth = _find(exc, OAuthFlowError)
        refusal = self.refusal
        if refusal is None:
            return f"OAuth failed: {oauth}" if oauth is not None else _describe(exc)
        said = f"HTTP {refusal.status} {refusal.reason} from {refusal.url}".rstrip()
        if refusal.status not in (401, 403):
            return said
        if isinstance(oauth, NeedsAuthorization):
            return f"{said}: {oauth}"
        how = str(NeedsAuthorization(self.name)).removeprefix("needs authorization: ")
        detail = f" (OAuth: {oauth})" if oauth is not None else f" ({_describe(exc)})"
        return f"{said}: needs authorization{detail}; {how}"

    def close(self) -> None:
        """Let :meth:`run` leave its connection (bounded by the SDK's shutdown)."""
        self._closing.set()

    def exited(self, code: int) -> None:
        """The server process has exited: its calls end now, and so does :meth:`run`."""
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        self._fail(how)
        self._closing.set()

    def _fail(self, why: str) -> None:
        if self.failure is None and not self._closing.is_set():
            self.failure = why
        for scope in self._calls:
            scope.cancel()

    async def call(self, tool: str, input: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        """Call *tool*; any failure of the server or the call is an error result."""
        session = self._session
        if session is None:
            await trio.lowlevel.checkpoint()
            why = self.failure or "is closed"
            return ToolOutput(f"MCP server {self.name!r} {why}", is_error=True)

        async def progress(progress: float, total: float | None, message: str | None) -> None:
            ctx.progress(MCPProgress(progress, total, message))

        result: mcp.types.CallToolResult | None = None
        with trio.move_on_after(self.call_timeout) as scope:
            self._calls.add(scope)
            try:
                result = await session.call_tool(tool, dict(input), progress_callback=progress)
            except Exception as exc:
                return ToolOutput(
                    f"MCP tool {tool!r} of server {self.name!r} failed: {_describe(exc)}",
                    is_error=True,
                )
            finally:
                self._calls.discard(scope)
        if result is None:
            why = self.failure or f"did not answer within {self.call_timeout:g} s"
            return ToolOutput(f"MCP tool {tool!r} of server {self.name!r}: {why}", is_error=True)
        return tool_output(
            result.model_dump(mode="json", by_alias=True, exclude_none=True),
            max_chars=self.max_result_chars,
        )


async def _list_tools(session: mcp.ClientSession) -> list[dict[str, Any]]:
    """Every page of ``tools/list``, as wire JSON (a cursor seen twice ends it)."""
    listed: list[dict[str, Any]] = []
    cursor: str | None = None
    seen: set[str] = set()
    while True:
        params = None if cursor is None else mcp.types.PaginatedRequestParams(cursor=cursor)
        page = await session.list_tools(params=params)
        listed.extend(
            t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in page.tools
        )
        cursor = page.next_cursor
        if not cursor or cursor in seen:
            return listed
        seen.add(cursor)


def _find(exc: BaseException, kind: type[OAuthFlowError]) -> OAuthFlowError | None:
    """The first *kind* in *exc*, its groups and its causes."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        one = todo.pop()
        if id(one) in seen:
            continue
        seen.add(id(one))
        if isinstance(one, kind):
            return one
        if isinstance(one, BaseExceptionGroup):
            todo.extend(cast("BaseExceptionGroup[BaseException]", one).exceptions)
        for linked in (one.__cause__, one.__context__):
            if linked is not None:
                todo.append(linked)
    return None


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        return _describe(exc.exceptions[0])
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text != type(exc).__name__ else text
