"""MCP: the tools of Model Context Protocol servers, run by the executor like any tool.

Servers are given in Claude Code's ``.mcp.json`` format (stdio and streamable HTTP),
or as in-process SDK servers. Their tools are named ``mcp__<server>__<tool>``; a
``readOnlyHint`` tool is concurrency-safe; MCP progress reaches ``ctx.progress``;
cancelling a call (an abort, an interrupt, a sibling's error) sends the MCP
cancellation. Servers may ask the client things: elicitation (``elicit=``), sampling
(``sampling=``, off by default), roots (``roots=``, the current directory by
default); an HTTP server that asks for OAuth is authorized through ``authorize=``
(tokens kept per server in a 0600 file). Server log messages, and the SDK's own
log, go to the ``trio_agent.mcp`` logger. Needs the ``mcp`` extra: ``pip install 'trio-agent[mcp]'``.
``python -m trio_agent.mcp.demo_server`` is a small stdio server to try it with.

Example::

    from trio_agent.mcp import load_mcp_config, open_mcp_tools

    async with open_mcp_tools(load_mcp_config(".mcp.json")) as tools:
        session = trio_agent.Session(client, tools=tools, ...)
"""

from .. import _util
from .._options import DEFAULT_MAX_RESULT_CHARS as DEFAULT_MAX_RESULT_CHARS
from . import _extra as _extra  # first: without the SDK, say which extra to install
from ._auth import AuthorizationRequest as AuthorizationRequest
from ._auth import Authorize as Authorize
from ._auth import FileTokenStorage as FileTokenStorage
from ._auth import TokenStorageFactory as TokenStorageFactory
from ._auth import default_token_storage as default_token_storage
from ._auth import loopback_authorize as loopback_authorize
from ._client import Elicit as Elicit
from ._client import ElicitationAnswer as ElicitationAnswer
from ._client import ElicitationRequest as ElicitationRequest
from ._client import MCPRoots as MCPRoots
from ._client import MCPSampling as MCPSampling
from ._client import SamplingRequest as SamplingRequest
from ._config import DEFAULT_CALL_TIMEOUT as DEFAULT_CALL_TIMEOUT
from ._config import HttpServerConfig as HttpServerConfig
from ._config import MCPConfigError as MCPConfigError
from ._config import OAuthSettings as OAuthSettings
from ._config import ServerConfig as ServerConfig
from ._config import StdioServerConfig as StdioServerConfig
from ._config import load_mcp_config as load_mcp_config
from ._config import parse_server_config as parse_server_config
from ._convert import MCPToolInfo as MCPToolInfo
from ._convert import mcp_tool_name as mcp_tool_name
from ._open import DEFAULT_STARTUP_TIMEOUT as DEFAULT_STARTUP_TIMEOUT
from ._open import mcp_tool_info as mcp_tool_info
from ._open import open_mcp_tools as open_mcp_tools
from ._server import MCPProgress as MCPProgress

__all__ = [
    "AuthorizationRequest",
    "Authorize",
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_MAX_RESULT_CHARS",
    "DEFAULT_STARTUP_TIMEOUT",
    "Elicit",
    "ElicitationAnswer",
    "ElicitationRequest",
    "FileTokenStorage",
    "HttpServerConfig",
    "MCPConfigError",
    "MCPProgress",
    "MCPRoots",
    "MCPSampling",
    "MCPToolInfo",
    "OAuthSettings",
    "SamplingRequest",
    "ServerConfig",
    "StdioServerConfig",
    "TokenStorageFactory",
    "default_token_storage",
    "load_mcp_config",
    "loopback_authorize",
    "mcp_tool_info",
    "mcp_tool_name",
    "open_mcp_tools",
    "parse_server_config",
]

_util.fixup_module_metadata(__name__, globals())
