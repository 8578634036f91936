"""``open_mcp_tools``: MCP servers' tools as :class:`~trio_agent.Tool` values."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any, cast

import attrs
import trio

from .._exceptions import ToolDefinitionError, unwrap_single
from .._tools import Tool, ToolContext, ToolOutput
from ._auth import Authorize, TokenStorageFactory
from ._client import Elicit, MCPRoots, MCPSampling, roots_of
from ._config import (
    DEFAULT_CALL_TIMEOUT,
    HttpServerConfig,
    MCPConfigError,
    ServerConfig,
    StdioServerConfig,
    parse_servers,
)
from ._convert import DEFAULT_MAX_RESULT_CHARS, MCPToolInfo, input_schema, mcp_tool_name, tool_info
from ._schema import InputValidator, schema_problem
from ._server import ClientHooks, InProcessServer, LowLevelServer, MCPServer, Server

__all__ = ["DEFAULT_STARTUP_TIMEOUT", "mcp_tool_info", "open_mcp_tools"]

logger = logging.getLogger("trio_agent.mcp")

#: Seconds a server has to start and list its tools (Claude Code's MCP_TIMEOUT).
DEFAULT_STARTUP_TIMEOUT = 30.0


@attrs.frozen
class _Run:
    """A Tool's ``run``: one tool of one server (and what the server said about it)."""

    server: Server
    info: MCPToolInfo

    async def __call__(self, input: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        return await self.server.call(self.info.tool, input, ctx)


def mcp_tool_info(tool: Tool) -> MCPToolInfo | None:
    """What the MCP server said about *tool* (its hints), or None for a non-MCP tool.

    It reads the ``Tool`` values :func:`open_mcp_tools` yields; a copy whose ``run``
    was replaced (e.g. wrapped to record timings) is not recognised.

    Example, ask before every destructive MCP tool::

        async def can_use_tool(tool, input, ctx):
            info = mcp_tool_info(tool)
            if info is not None and info.is_destructive:
                return await ask_the_user(tool, input)
            return Allow()
    """
    return tool.run.info if isinstance(tool.run, _Run) else None


def _checked(servers: list[Server]) -> list[list[str | None]]:
    """Each listed tool's schema problem (None: usable), server by server; a schema
    many tools share is checked once."""
    seen: dict[str, str | None] = {}

    def check(schema: dict[str, Any]) -> str | None:
        try:
            key = json.dumps(schema, sort_keys=True)
        except (TypeError, ValueError, RecursionError):
            return schema_problem(schema)
        if key not in seen:
            seen[key] = schema_problem(schema)
        return seen[key]

    return [[check(input_schema(listed)) for listed in s.listed] for s in servers]


@attrs.frozen(eq=False)
class _MCPTool(Tool):
    """A server's tool: its input checked by :class:`InputValidator` (RE2, no fetch,
    compiled on first use) instead of a validator compiled at once from a schema
    the server chose (whose ``pattern`` would run on Python's ``re``)."""

    _validator: Any = attrs.field(init=False, repr=False)

    @_validator.default
    def _compile(self) -> Any:
        return InputValidator(self.input_schema)


#: Schemas checked in the loop at most; more are checked in a worker thread.
_INLINE_CHECKS = 50
#: Bytes of ``tools/list`` answers checked in the loop at most: a few huge schemas
#: cost as much as many small ones.
_INLINE_BYTES = 64 * 1024
#: Tools built between two checkpoints (10,000 tools must not be one step).
_BATCH = 200


async def _tools(server: Server, problems: list[str | None], taken: set[str]) -> list[Tool]:
    tools: list[Tool] = []
    for i, (listed, problem) in enumerate(zip(server.listed, problems, strict=True)):
        if i % _BATCH == _BATCH - 1:
            await trio.lowlevel.checkpoint()
        info = tool_info(server.name, listed)
        name = mcp_tool_name(server.name, info.tool)
        why = problem or _unsupported(listed)
        if why is not None:
            logger.warning("MCP tool %r of %r is skipped: %s", info.tool, server.name, why)
            continue
        if name in taken:
            logger.warning("MCP tool %r of %r: the name %r is taken", info.tool, server.name, name)
            continue
        description = listed.get("description")
        try:
            tool = _MCPTool(
                name=name,
                description=description if isinstance(description, str) else (info.title or ""),
                input_schema=input_schema(listed),
                run=_Run(server, info),
                concurrency_safe=info.read_only is True,
            )
        except ToolDefinitionError as exc:
            logger.warning("MCP tool %r of %r is skipped: %s", info.tool, server.name, exc)
            continue
        taken.add(name)
        tools.append(tool)
    return tools


def _unsupported(listed: Mapping[str, Any]) -> str | None:
    execution: Any = listed.get("execution")
    if isinstance(execution, Mapping):
        support = cast("Mapping[str, Any]", execution).get("taskSupport")
        if support == "required":
            return 'it requires MCP tasks (execution.taskSupport "required"), which are not run'
    return None


class _MCPToolsManager:
    """``async with open_mcp_tools(...)``: the servers' tasks and their tools."""

    def __init__(self, servers: list[Server]) -> None:
        self._servers = servers
        self._nursery_manager = trio.open_nursery()

    async def __aenter__(self) -> list[Tool]:
        nursery = await self._nursery_manager.__aenter__()
        try:
            # Started side by side; each start returns once its server is up or failed.
            async with trio.open_nursery() as starting:
                for server in self._servers:
                    starting.start_soon(nursery.start, server.run)
        except BaseException as exc:
            self._close()
            await self.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        try:
            # The schemas are the servers' to choose: many are checked off the loop
            # (a few are not worth a thread, which virtual time cannot wait for).
            count = sum(len(server.listed) for server in self._servers)
            size = sum(server.reader.listed_bytes for server in self._servers)
            if count > _INLINE_CHECKS or size > _INLINE_BYTES:
                problems = await trio.to_thread.run_sync(
                    _checked, self._servers, abandon_on_cancel=True
                )
            else:
                problems = _checked(self._servers)
            taken: set[str] = set()
            tools: list[Tool] = []
            for server, its_problems in zip(self._servers, problems, strict=True):
                tools.extend(await _tools(server, its_problems, taken))
        except BaseException as exc:
            self._close()
            await self.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        return tools

    def _close(self) -> None:
        for server in self._servers:
            server.close()

    async def __aexit__(
        self,
        etype: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        self._close()
        try:
            return bool(await self._nursery_manager.__aexit__(etype, exc, tb))
        except BaseExceptionGroup as group:
            # The server tasks raise nothing but Cancelled (they record failures),
            # so this nursery is an implementation detail: give back the body's own
            # exception, or the single error, rather than a group.
            if exc is not None and group.split(lambda e: e is exc)[1] is None:
                return False
            raise unwrap_single(group) or group  # noqa: B904


def open_mcp_tools(
    servers: Mapping[str, ServerConfig | InProcessServer | Mapping[str, Any]],
    *,
    call_timeout: float = DEFAULT_CALL_TIMEOUT,
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
    max_result_chars: int = DEFAULT_MAX_RESULT_CHARS,
    elicit: Elicit | None = None,
    sampling: MCPSampling | None = None,
    roots: MCPRoots | Sequence[str | os.PathLike[str]] | None = None,
    authorize: Authorize | None = None,
    token_storage: TokenStorageFactory | None = None,
) -> AbstractAsyncContextManager[list[Tool]]:
    """Start every server at once and yield their tools, named ``mcp__<server>__<tool>``.

    *servers* maps a server name to its ``.mcp.json`` entry (a dict, or a value of
    :func:`load_mcp_config`), or to an in-process SDK server (``MCPServer`` or a
    low-level ``Server``). A server that fails to start is logged (the
    ``trio_agent.mcp`` logger, where the servers' stderr goes too) and gives no
    tools; one that dies later gives error results. Leaving the block, even by
    cancellation, closes every session and stops every server process (stdin
    closed, then SIGTERM, then SIGKILL to its process group, each wait bounded;
    the group is sent SIGKILL in the end however the server stopped, so nothing it
    started outlives the block). A tool whose schema is unusable (invalid, a
    ``$ref`` that points nowhere or off the document: nothing is fetched) or that
    requires MCP tasks is left out, with a warning in the log.

    Args:
        servers: name -> config (see above).
        call_timeout: seconds a call may take before it gets an error result
            (and the server an MCP cancellation); a server's ``"timeout"`` wins.
        startup_timeout: seconds a server has to start and list its tools.
        max_result_chars: characters of text a result keeps; the rest is cut.
        elicit: answers a server's elicitation (``async (ElicitationRequest) ->
            ElicitationAnswer``; form mode, and URL mode); an accepted form gets
            the schema's defaults for what it leaves out. None: the client does
            not announce elicitation.
        sampling: answers a server's ``sampling/createMessage`` with a model
            (:class:`MCPSampling`: the client, the model, a decision per
            request). None (the default): sampling is not offered.
        roots: the roots announced (``roots/list``): paths, or an
            :class:`MCPRoots` whose ``set()`` sends ``roots/list_changed``.
            None: the current directory.
        authorize: the user's OAuth step for an HTTP server that needs it
            (``async (AuthorizationRequest) -> redirected URL``;
            :func:`loopback_authorize` opens or prints the page and receives the
            redirect on 127.0.0.1). None: such a server fails to start with
            "needs authorization" (stored tokens are still used).
        token_storage: ``(server name, URL) -> TokenStorage`` (the SDK's protocol);
            default: a 0600 file per server under
            ``$XDG_STATE_HOME/trio-agent/mcp-oauth``.

    Example::

        async with open_mcp_tools(load_mcp_config(".mcp.json")) as tools:
            async with query(client, messages, tools=[*builtins, *tools], ...) as events:
                ...

    Raises:
        MCPConfigError: an entry is malformed (raised here, before anything starts).
    """
    for name, value in (("call_timeout", call_timeout), ("startup_timeout", startup_timeout)):
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError(f"{name} must be a positive number of seconds, not {value!r}")
    limit = cast("object", max_result_chars)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"max_result_chars must be a positive int, not {max_result_chars!r}")
    if not isinstance(servers, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise MCPConfigError(f"servers must be a mapping of names, not {type(servers).__name__}")
    if elicit is not None and not callable(elicit):
        raise TypeError(f"elicit must be an async callable, not {type(elicit).__name__}")
    if authorize is not None and not callable(authorize):
        raise TypeError(f"authorize must be an async callable, not {type(authorize).__name__}")
    if sampling is not None and not isinstance(sampling, MCPSampling):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"sampling must be an MCPSampling, not {type(sampling).__name__}")
    hooks = ClientHooks(
        roots_of(roots),
        elicit=elicit,
        sampling=sampling,
        authorize=authorize,
        token_storage=token_storage,
    )
    in_process = {n: c for n, c in servers.items() if isinstance(c, MCPServer | LowLevelServer)}
    parsed = parse_servers({n: c for n, c in servers.items() if n not in in_process})
    configs: dict[str, ServerConfig | InProcessServer] = {**parsed, **in_process}
    running = [
        Server(
            name,
            config,
            call_timeout=_timeout(config, call_timeout),
            startup_timeout=startup_timeout,
            max_result_chars=max_result_chars,
            hooks=hooks,
        )
        for name, config in configs.items()
    ]
    return _MCPToolsManager(running)


def _timeout(config: ServerConfig | InProcessServer, default: float) -> float:
    if isinstance(config, StdioServerConfig | HttpServerConfig) and config.timeout is not None:
        return config.timeout
    return default
