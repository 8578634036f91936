"""OAuth 2.1 for HTTP servers, on the SDK's ``OAuthClientProvider``.

The SDK does the protocol: protected-resource metadata discovery (``WWW-Authenticate``
then the well-known URLs, the 2025-03-26 fallbacks), authorization-server metadata,
dynamic client registration or a client ID metadata document or a pre-registered
client, authorization code with PKCE and the RFC 8707 ``resource``, scopes and
step-up on ``403 insufficient_scope``, the token endpoint's auth methods, refresh,
and the client-credentials grants. What is ours:

- the tokens and the client registration are stored per server, by default in a
  JSON file under ``$XDG_STATE_HOME/trio-agent/mcp-oauth/`` made with mode 0600
  (:class:`FileTokenStorage`; ``token_storage=`` takes any other); a stored token's
  expiry survives a restart, so an expired one is refreshed, not re-authorized;
- the interactive step is a callback, ``authorize=``: it is given the
  authorization URL and the redirect URI and returns the URL the browser was sent
  back to (:func:`loopback_authorize` opens the page, or prints it, and receives
  the redirect on 127.0.0.1);
- tokens are never logged: the SDK's auth logger is kept at WARNING.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import socket
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol, cast
from urllib.parse import parse_qs, urlparse

import attrs
import trio
from mcp.client.auth import OAuthClientProvider, OAuthFlowError, TokenStorage
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
    PrivateKeyJWTOAuthProvider,
    SignedJWTParameters,
)
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from pydantic import AnyUrl

from ._config import OAuthSettings

__all__ = [
    "Authorize",
    "AuthorizationRequest",
    "FileTokenStorage",
    "TokenStorageFactory",
    "default_token_storage",
    "loopback_authorize",
    "oauth_provider",
]

logger = logging.getLogger("trio_agent.mcp")

# The SDK logs a token request's parameters at DEBUG; never let those through.
logging.getLogger("mcp.client.auth").setLevel(logging.WARNING)


# --- storage --------------------------------------------------------------------


class TokenStorageFactory(Protocol):
    """``token_storage=``: the SDK ``TokenStorage`` of one server, by name and URL."""

    def __call__(self, server: str, url: str) -> TokenStorage: ...


def state_dir() -> Path:
    """``$XDG_STATE_HOME/trio-agent`` (default ``~/.local/state/trio-agent``)."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return Path(base) / "trio-agent"


def default_token_storage(server: str, url: str) -> FileTokenStorage:
    """The file of *server* at *url* under the state dir (named after both, so a
    server whose URL changes starts afresh)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", server)[:64]
    digest = hashlib.sha256(url.encode()).hexdigest()[:16]
    return FileTokenStorage(state_dir() / "mcp-oauth" / f"{safe}-{digest}.json")


@attrs.define(eq=False)
class FileTokenStorage:
    """An SDK ``TokenStorage`` in one JSON file, written whole (a temporary file
    renamed over it) with mode 0600 in a 0700 directory. A token's expiry is kept
    as a time, so a token read back after a restart has the time it has left."""

    path: Path = attrs.field(converter=Path)

    def _read(self) -> dict[str, Any]:
        try:
            data: Any = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            logger.warning(
                "OAuth token file %s is unreadable (%s); starting afresh", self.path, exc
            )
            return {}
        return cast("dict[str, Any]", data) if isinstance(data, dict) else {}

    def _write(self, data: dict[str, Any]) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.fchmod(fd, 0o600)  # whatever the umask said
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        os.replace(tmp, self.path)

    async def get_tokens(self) -> OAuthToken | None:
        data = await trio.to_thread.run_sync(self._read)
        raw: Any = data.get("tokens")
        if not isinstance(raw, dict):
            return None
        raw = dict(cast("dict[str, Any]", raw))
        expires_at = raw.pop("expires_at", None)
        if isinstance(expires_at, int | float):
            raw["expires_in"] = max(0, int(expires_at - time.time()))
        try:
            return OAuthToken.model_validate(raw)
        except ValueError:
            return None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        raw = tokens.model_dump(mode="json", exclude_none=True)
        if tokens.expires_in is not None:
            raw["expires_at"] = time.time() + tokens.expires_in

        def update() -> None:
            data = self._read()
            data["tokens"] = raw
            self._write(data)

        await trio.to_thread.run_sync(update)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        data = await trio.to_thread.run_sync(self._read)
        raw: Any = data.get("client_info")
        if not isinstance(raw, dict):
            return None
        try:
            return OAuthClientInformationFull.model_validate(raw)
        except ValueError:
            return None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        raw = client_info.model_dump(mode="json", exclude_none=True)

        def update() -> None:
            data = self._read()
            data["client_info"] = raw
            self._write(data)

        await trio.to_thread.run_sync(update)


@attrs.define(eq=False)
class _PreRegistered:
    """A storage whose client is the configured one (its tokens are the store's)."""

    store: TokenStorage
    client: OAuthClientInformationFull

    async def get_tokens(self) -> OAuthToken | None:
        return await self.store.get_tokens()

    async def set_tokens(self, tokens: OAuthToken) -> None:
        await self.store.set_tokens(tokens)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        await trio.lowlevel.checkpoint()
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        await trio.lowlevel.checkpoint()
        self.client = client_info


# --- the interactive step -------------------------------------------------------------


@attrs.frozen
class AuthorizationRequest:
    """The user must authorize trio-agent at *url*; the authorization server then
    sends the browser to *redirect_uri* with the code."""

    server: str
    url: str
    redirect_uri: str


#: ``authorize=``: open *request.url* for the user, return the URL the browser was
#: redirected to (``redirect_uri?code=...&state=...``).
Authorize = Callable[[AuthorizationRequest], Awaitable[str]]


def _code_result(redirected: str) -> AuthorizationCodeResult:
    query = parse_qs(urlparse(redirected).query)

    def one(key: str) -> str | None:
        values = query.get(key)
        return values[0] if values else None

    error = one("error")
    if error is not None:
        detail = one("error_description")
        raise OAuthFlowError(f"authorization refused: {error}" + (f" ({detail})" if detail else ""))
    code = one("code")
    if not code:
        raise OAuthFlowError("the authorization redirect has no code")
    return AuthorizationCodeResult(code=code, state=one("state"), iss=one("iss"))


_PAGE = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nConnection: close\r\n\r\n"
    b"<!doctype html><title>trio-agent</title><p>Authorization received: you can close this tab."
)
_NOT_FOUND = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


def loopback_authorize(open_url: Callable[[str], object]) -> Authorize:
    """An ``authorize=`` that calls ``open_url(url)`` (``webbrowser.open``, or a
    function printing the URL) and waits for the browser's redirect on
    127.0.0.1 at the redirect URI's port and path.

    Example::

        import webbrowser
        async with open_mcp_tools(servers, authorize=loopback_authorize(webbrowser.open)):
            ...
    """

    async def authorize(request: AuthorizationRequest) -> str:
        target = urlparse(request.redirect_uri)
        (listener,) = await trio.open_tcp_listeners(target.port or 80, host="127.0.0.1")
        async with listener:
            open_url(request.url)
            while True:
                conn = await listener.accept()
                async with conn:
                    head = b""
                    with trio.move_on_after(10):
                        while b"\r\n\r\n" not in head and len(head) < 65536:
                            chunk = await conn.receive_some(4096)
                            if not chunk:
                                break
                            head += chunk
                    line = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ")
                    path = line[1] if len(line) >= 3 else ""
                    if line[0] != "GET" or urlparse(path).path != (target.path or "/"):
                        await conn.send_all(_NOT_FOUND)
                        continue
                    await conn.send_all(_PAGE)
                    return f"{target.scheme}://{target.netloc}{path}"

    return authorize


def free_port() -> int:
    """A port free on 127.0.0.1 now (for a redirect URI that names no port)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- the provider -------------------------------------------------------------


class _Provider(OAuthClientProvider):
    """The SDK's provider; a stored token's remaining lifetime is honoured on load
    (the SDK treats a loaded token as valid until a 401, then re-authorizes)."""

    async def _initialize(self) -> None:
        await super()._initialize()
        tokens = self.context.current_tokens
        if tokens is not None and tokens.expires_in is not None:
            self.context.update_token_expiry(tokens)


def _port_of(client: OAuthClientInformationFull | None) -> int | None:
    for uri in (client.redirect_uris or []) if client is not None else []:
        parsed = urlparse(str(uri))
        if parsed.hostname in ("localhost", "127.0.0.1") and parsed.port:
            return parsed.port
    return None


async def oauth_provider(
    server: str,
    url: str,
    settings: OAuthSettings,
    storage: TokenStorage,
    authorize: Authorize | None,
    *,
    on_authorizing: Callable[[bool], None] = lambda _active: None,
) -> OAuthClientProvider:
    """The ``httpx2.Auth`` for one server. Without *authorize*, a server that needs
    a user's authorization fails with :class:`NeedsAuthorization`; stored tokens are
    still used and refreshed. *on_authorizing* is told when the user's step starts
    (True) and ends (False), so a start-up deadline can wait for a person."""
    if settings.grant_type == "client_credentials":
        if settings.client_id is None:
            raise OAuthFlowError("the client_credentials grant needs oauth.clientId")
        if settings.private_key is not None:
            jwt = SignedJWTParameters(
                issuer=settings.client_id,
                subject=settings.client_id,
                signing_algorithm=settings.signing_algorithm,
                signing_key=settings.private_key,
            )
            return PrivateKeyJWTOAuthProvider(
                server_url=url,
                storage=storage,
                client_id=settings.client_id,
                assertion_provider=jwt.create_assertion_provider(),
                scope=settings.scopes,
            )
        if settings.client_secret is None:
            raise OAuthFlowError(
                "the client_credentials grant needs oauth.clientSecret or oauth.privateKey"
            )
        return ClientCredentialsOAuthProvider(
            server_url=url,
            storage=storage,
            client_id=settings.client_id,
            client_secret=settings.client_secret,
            token_endpoint_auth_method=settings.token_endpoint_auth_method,
            scope=settings.scopes,
        )
    port = settings.callback_port or _port_of(await storage.get_client_info()) or free_port()
    redirect_uri = f"http://localhost:{port}/callback"
    if settings.client_id is not None:
        storage = _PreRegistered(
            storage,
            OAuthClientInformationFull(
                client_id=settings.client_id,
                client_secret=settings.client_secret,
                redirect_uris=[AnyUrl(redirect_uri)],
                token_endpoint_auth_method=(
                    settings.token_endpoint_auth_method if settings.client_secret else "none"
                ),
            ),
        )
    redirected: list[str] = []

    async def redirect_handler(authorization_url: str) -> None:
        if authorize is None:
            raise NeedsAuthorization(server)
        on_authorizing(True)
        try:
            redirected.append(
                await authorize(AuthorizationRequest(server, authorization_url, redirect_uri))
            )
        finally:
            on_authorizing(False)

    async def callback_handler() -> AuthorizationCodeResult:
        await trio.lowlevel.checkpoint()
        return _code_result(redirected.pop())

    return _Provider(
        server_url=url,
        client_metadata=OAuthClientMetadata(
            client_name="trio-agent",
            redirect_uris=[AnyUrl(redirect_uri)],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            scope=settings.scopes,
        ),
        storage=storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
        client_metadata_url=settings.client_metadata_url,
    )


class NeedsAuthorization(OAuthFlowError):
    """The server needs a user's OAuth authorization, and no ``authorize=`` was given."""

    def __init__(self, server: str) -> None:
        super().__init__(
            "needs authorization: run it interactively (the trio-agent CLI opens the "
            "sign-in page), pass authorize= to open_mcp_tools (e.g. "
            "loopback_authorize(webbrowser.open)), or give an Authorization header in "
            f"the .mcp.json entry of {server!r}"
        )
