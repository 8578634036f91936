"""MCP server configurations: Claude Code's ``.mcp.json`` format, parsed and checked.

Pure and synchronous. A server entry is either stdio::

    {"command": "npx", "args": ["-y", "pkg"], "env": {"TOKEN": "${TOKEN}"}}

or HTTP (streamable HTTP)::

    {"type": "http", "url": "https://host/mcp", "headers": {"Authorization": "Bearer ${KEY}"}}

``${VAR}`` and ``${VAR:-default}`` are expanded, as Claude Code does, in ``command``,
``args``, ``env``, ``url``, ``headers`` and ``oauth``. Besides those, an entry may give
``"timeout"``: the per-call timeout in seconds; an HTTP one ``"oauth"``: its OAuth
client (Claude Code's keys, see :class:`OAuthSettings`)::

    {"type": "http", "url": "https://host/mcp",
     "oauth": {"clientId": "abc", "clientSecret": "${SECRET}", "callbackPort": 8080}}
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, TypeAlias, cast

import attrs

from .._exceptions import TrioAgentError

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "HttpServerConfig",
    "MCPConfigError",
    "OAuthSettings",
    "ServerConfig",
    "StdioServerConfig",
    "load_mcp_config",
    "parse_server_config",
    "parse_servers",
]

#: Seconds a tool call may take before it gets an error result (generous, as Claude Code's).
DEFAULT_CALL_TIMEOUT = 3600.0

_VAR = re.compile(r"\$\{([^}:]*)(?::-([^}]*))?\}")


class MCPConfigError(TrioAgentError, ValueError):
    """An MCP server configuration is malformed; names the server and the field."""

    def __init__(self, message: str, *, server: str | None = None, field: str | None = None):
        where = ".".join(p for p in (server, field) if p)
        super().__init__(f"{where}: {message}" if where else message)
        self.server = server
        self.field = field


def _str_dict(value: Mapping[str, str]) -> dict[str, str]:
    return dict(value)


def _str_tuple(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


def _check_timeout(_inst: Any, _attr: Any, value: float | None) -> None:
    if value is not None and not value > 0:
        raise MCPConfigError(f"timeout must be a positive number of seconds, not {value!r}")


@attrs.frozen
class StdioServerConfig:
    """A server started as a subprocess, spoken to over its stdin and stdout."""

    command: str
    args: tuple[str, ...] = attrs.field(default=(), converter=_str_tuple)
    env: Mapping[str, str] = attrs.field(factory=dict[str, str], converter=_str_dict)
    cwd: str | None = None
    #: Seconds per call; None: the ``open_mcp_tools`` default.
    timeout: float | None = attrs.field(default=None, validator=_check_timeout)


@attrs.frozen
class OAuthSettings:
    """A server entry's ``"oauth"`` object (Claude Code's keys).

    ``clientId`` / ``clientSecret``: a pre-registered client (else dynamic client
    registration, or ``clientMetadataUrl``'s client ID metadata document when the
    authorization server supports it); ``callbackPort``: the redirect URI's port
    (``http://localhost:PORT/callback``; default: a free port, kept with the
    registration); ``scopes``: the scopes to ask for (space-separated; default:
    what the server says); ``grantType``: ``"authorization_code"`` (default) or
    ``"client_credentials"`` (no user: ``clientSecret``, or ``privateKey``, a PEM
    key for ``private_key_jwt``); ``tokenEndpointAuthMethod``:
    ``client_secret_basic`` (default) or ``client_secret_post``.
    """

    client_id: str | None = None
    client_secret: str | None = attrs.field(default=None, repr=False)
    callback_port: int | None = None
    scopes: str | None = None
    client_metadata_url: str | None = None
    grant_type: Literal["authorization_code", "client_credentials"] = "authorization_code"
    token_endpoint_auth_method: Literal["client_secret_basic", "client_secret_post"] = (
        "client_secret_basic"
    )
    private_key: str | None = attrs.field(default=None, repr=False)
    signing_algorithm: str = "ES256"


@attrs.frozen
class HttpServerConfig:
    """A server reached over streamable HTTP (OAuth when it asks for it, see
    :class:`OAuthSettings`)."""

    url: str
    headers: Mapping[str, str] = attrs.field(
        factory=dict[str, str], converter=_str_dict, repr=lambda h: f"<{len(h)} headers>"
    )
    timeout: float | None = attrs.field(default=None, validator=_check_timeout)
    oauth: OAuthSettings = attrs.field(factory=OAuthSettings)
    #: An ``httpx2.Auth`` to use instead of the OAuth built from *oauth* (not from
    #: JSON): e.g. the SDK's ``IdentityAssertionOAuthProvider`` for cross-app access.
    auth: object | None = attrs.field(default=None, repr=False)


ServerConfig: TypeAlias = StdioServerConfig | HttpServerConfig


def _expand(text: str, env: Mapping[str, str], server: str, field: str) -> str:
    def one(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        value = env.get(name)
        if value is not None:
            return value
        if default is not None:
            return default
        raise MCPConfigError(
            f"environment variable {name!r} is not set (use ${{{name}:-default}} for a default)",
            server=server,
            field=field,
        )

    return _VAR.sub(one, text)


def _string(raw: Mapping[str, Any], key: str, server: str, env: Mapping[str, str]) -> str:
    value = raw[key]
    if not isinstance(value, str) or not value:
        raise MCPConfigError(
            f"must be a non-empty string, not {type(value).__name__}", server=server, field=key
        )
    return _expand(value, env, server, key)


def _string_map(
    raw: Mapping[str, Any], key: str, server: str, env: Mapping[str, str]
) -> dict[str, str]:
    value = raw.get(key, {})
    if not isinstance(value, Mapping):
        raise MCPConfigError(
            f"must be an object of strings, not {type(value).__name__}", server=server, field=key
        )
    out: dict[str, str] = {}
    for k, v in value.items():  # pyright: ignore[reportUnknownVariableType]
        if not isinstance(k, str) or not isinstance(v, str):
            raise MCPConfigError(
                f"entry {k!r} must map a string to a string", server=server, field=key
            )
        out[k] = _expand(v, env, server, f"{key}.{k}")
    return out


def _timeout(raw: Mapping[str, Any], server: str) -> float | None:
    value = raw.get("timeout")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise MCPConfigError(
            f"must be a positive number of seconds, not {value!r}", server=server, field="timeout"
        )
    return float(value)


#: ``"oauth"`` keys (Claude Code's, and ours) -> OAuthSettings fields.
_OAUTH_KEYS = {
    "clientId": "client_id",
    "clientSecret": "client_secret",
    "callbackPort": "callback_port",
    "scopes": "scopes",
    "clientMetadataUrl": "client_metadata_url",
    "grantType": "grant_type",
    "tokenEndpointAuthMethod": "token_endpoint_auth_method",
    "privateKey": "private_key",
    "signingAlgorithm": "signing_algorithm",
}
_OAUTH_CHOICES = {
    "grantType": ("authorization_code", "client_credentials"),
    "tokenEndpointAuthMethod": ("client_secret_basic", "client_secret_post"),
}


def _oauth(raw: Any, server: str, env: Mapping[str, str]) -> OAuthSettings:
    if raw is None:
        return OAuthSettings()
    if not isinstance(raw, Mapping):
        raise MCPConfigError(
            f"must be an object, not {type(raw).__name__}", server=server, field="oauth"
        )
    fields: dict[str, Any] = {}
    for key, value in cast("Mapping[Any, Any]", raw).items():
        where = f"oauth.{key}"
        if key not in _OAUTH_KEYS:
            known = ", ".join(sorted(_OAUTH_KEYS))
            raise MCPConfigError(f"unknown key (known: {known})", server=server, field=where)
        if key == "callbackPort":
            if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 65536:
                raise MCPConfigError(
                    f"must be a port number (1-65535), not {value!r}", server=server, field=where
                )
            fields["callback_port"] = value
            continue
        if not isinstance(value, str) or not value:
            raise MCPConfigError(
                f"must be a non-empty string, not {type(value).__name__}",
                server=server,
                field=where,
            )
        value = _expand(value, env, server, where)
        if key in _OAUTH_CHOICES and value not in _OAUTH_CHOICES[key]:
            raise MCPConfigError(
                f"must be one of {', '.join(_OAUTH_CHOICES[key])}, not {value!r}",
                server=server,
                field=where,
            )
        if key == "clientMetadataUrl" and not value.startswith("https://"):
            raise MCPConfigError("must be an https:// URL", server=server, field=where)
        fields[_OAUTH_KEYS[key]] = value
    return OAuthSettings(**fields)


def parse_server_config(
    server: str, raw: Any, *, env: Mapping[str, str] | None = None
) -> ServerConfig:
    """One ``mcpServers`` entry as a checked config value, ``${VAR}`` expanded from *env*
    (default: ``os.environ``).

    Raises:
        MCPConfigError: the entry is malformed; the message names the server and field.
    """
    env = os.environ if env is None else env
    if not isinstance(raw, Mapping):
        raise MCPConfigError(f"must be an object, not {type(raw).__name__}", server=server)
    raw = cast("dict[str, Any]", dict(raw))
    kind = raw.get("type", "http" if "url" in raw else "stdio")
    if kind == "stdio":
        if "command" not in raw:
            raise MCPConfigError("is required for a stdio server", server=server, field="command")
        args: Any = raw.get("args", [])
        if not isinstance(args, list) or not all(
            isinstance(a, str) for a in cast("list[Any]", args)
        ):
            raise MCPConfigError("must be a list of strings", server=server, field="args")
        cwd = raw.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            raise MCPConfigError("must be a string", server=server, field="cwd")
        return StdioServerConfig(
            command=_string(raw, "command", server, env),
            args=[
                _expand(a, env, server, f"args.{i}") for i, a in enumerate(cast("list[str]", args))
            ],
            env=_string_map(raw, "env", server, env),
            cwd=cwd,
            timeout=_timeout(raw, server),
        )
    if kind in ("http", "streamable-http"):
        if "url" not in raw:
            raise MCPConfigError("is required for an http server", server=server, field="url")
        url = _string(raw, "url", server, env)
        if not url.startswith(("http://", "https://")):
            raise MCPConfigError(f"must be an http(s) URL, not {url!r}", server=server, field="url")
        return HttpServerConfig(
            url=url,
            headers=_string_map(raw, "headers", server, env),
            timeout=_timeout(raw, server),
            oauth=_oauth(raw.get("oauth"), server, env),
        )
    raise MCPConfigError(
        f"unsupported server type {kind!r} (use 'stdio' or 'http')", server=server, field="type"
    )


def parse_servers(
    servers: Mapping[str, Any], *, env: Mapping[str, str] | None = None
) -> dict[str, ServerConfig]:
    """Every entry of an ``mcpServers`` mapping checked; config values pass through.

    Raises:
        MCPConfigError: a server name or entry is malformed.
    """
    if not isinstance(servers, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise MCPConfigError(f"mcpServers must be an object, not {type(servers).__name__}")
    out: dict[str, ServerConfig] = {}
    for name, raw in servers.items():
        if not isinstance(name, str) or not name:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise MCPConfigError(f"a server name must be a non-empty string, not {name!r}")
        out[name] = (
            raw
            if isinstance(raw, StdioServerConfig | HttpServerConfig)
            else parse_server_config(name, raw, env=env)
        )
    return out


def load_mcp_config(
    path: str | os.PathLike[str], *, env: Mapping[str, str] | None = None
) -> dict[str, ServerConfig]:
    """Read a ``.mcp.json`` file: its ``"mcpServers"`` mapping, checked and expanded.

    Example::

        async with open_mcp_tools(load_mcp_config(".mcp.json")) as tools:
            ...

    Raises:
        MCPConfigError: the file cannot be read, is not JSON, or an entry is malformed.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise MCPConfigError(f"cannot read MCP config {os.fspath(path)!r}: {exc}") from exc
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise MCPConfigError(f"MCP config {os.fspath(path)!r} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict) or "mcpServers" not in data:
        raise MCPConfigError(f'MCP config {os.fspath(path)!r} has no "mcpServers" object')
    return parse_servers(data["mcpServers"], env=env)
