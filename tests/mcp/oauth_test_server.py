"""An OAuth-protected MCP server written with the SDK's auth server support, for
tests/mcp/test_mcp_oauth_server.py.

One Starlette app on 127.0.0.1 (an ephemeral port, printed as the first line of
stdout) is both the authorization server (dynamic client registration, authorize,
token, refresh; it approves every authorization at once) and the resource server
(protected-resource metadata, ``/mcp`` behind bearer tokens). Its ``stats`` tool
says how many registrations, authorizations, code exchanges and refreshes it saw,
and which client and scopes the calling token carries. Not a test module.
"""

from __future__ import annotations

import secrets
import socket
import sys
import time

import anyio
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    OAuthAuthorizationServerProvider,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import AnyHttpUrl


class Provider(OAuthAuthorizationServerProvider[AuthorizationCode, RefreshToken, AccessToken]):
    """Clients, codes and tokens in dicts; every authorization approved."""

    def __init__(self) -> None:
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.counts = {"registered": 0, "authorized": 0, "exchanged": 0, "refreshed": 0}
        self.resources: list[str | None] = []

    def _tokens(self, client_id: str, scopes: list[str], resource: str | None) -> OAuthToken:
        access, refresh = f"at_{secrets.token_hex(8)}", f"rt_{secrets.token_hex(8)}"
        self.access[access] = AccessToken(
            token=access,
            client_id=client_id,
            scopes=scopes,
            expires_at=int(time.time()) + 3600,
            resource=resource,
        )
        self.refresh[refresh] = RefreshToken(
            token=refresh, client_id=client_id, scopes=scopes, resource=resource
        )
        return OAuthToken(
            access_token=access, expires_in=3600, refresh_token=refresh, scope=" ".join(scopes)
        )

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.counts["registered"] += 1
        self.clients[client_info.client_id] = client_info

    async def authorize(
        self, client: OAuthClientInformationFull, params: AuthorizationParams
    ) -> str:
        assert client.client_id is not None
        self.counts["authorized"] += 1
        self.resources.append(params.resource)
        code = AuthorizationCode(
            code=f"code_{secrets.token_hex(8)}",
            client_id=client.client_id,
            scopes=params.scopes or ["mcp"],
            expires_at=time.time() + 300,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        self.codes[code.code] = code
        return construct_redirect_uri(str(params.redirect_uri), code=code.code, state=params.state)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        self.counts["exchanged"] += 1
        del self.codes[authorization_code.code]
        return self._tokens(
            authorization_code.client_id, authorization_code.scopes, authorization_code.resource
        )

    async def load_access_token(self, token: str) -> AccessToken | None:
        return self.access.get(token)

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        self.counts["refreshed"] += 1
        del self.refresh[refresh_token.token]
        return self._tokens(
            refresh_token.client_id, scopes or refresh_token.scopes, refresh_token.resource
        )

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)


def build(port: int) -> MCPServer:
    base = f"http://127.0.0.1:{port}"
    provider = Provider()
    app = MCPServer(
        "secure",
        auth=AuthSettings(
            issuer_url=AnyHttpUrl(base),
            resource_server_url=AnyHttpUrl(f"{base}/mcp"),
            required_scopes=["mcp"],
            client_registration_options=ClientRegistrationOptions(
                enabled=True, valid_scopes=["mcp"], default_scopes=["mcp"]
            ),
        ),
        auth_server_provider=provider,
    )

    @app.tool()
    async def stats() -> str:
        """What the authorization server saw, and who is calling."""
        token = get_access_token()
        who = f"{token.client_id} {' '.join(token.scopes)}" if token else "nobody"
        counts = " ".join(f"{k}={v}" for k, v in provider.counts.items())
        return (
            f"{who} | {counts} | resource={provider.resources[-1] if provider.resources else None}"
        )

    return app


if __name__ == "__main__":
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    http_app = build(port).streamable_http_app(
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False)
    )
    print(port, flush=True)
    print("oauth test server starting", file=sys.stderr, flush=True)
    config = uvicorn.Config(http_app, log_level="warning")
    anyio.run(uvicorn.Server(config).serve, [sock])
