"""The client the MCP conformance suite drives: trio_agent.mcp, as a program uses it.

``conformance client --command "python client.py"`` starts a scenario's server and
runs this with the server's URL as the last argument and the scenario's name in
``MCP_CONFORMANCE_SCENARIO`` (``MCP_CONFORMANCE_CONTEXT``: JSON the scenario gives,
e.g. a pre-registered client). The script connects with ``open_mcp_tools`` (the
server's entry is a ``.mcp.json`` entry, ``oauth`` included), calls the tool the
scenario expects through the ``Tool`` value, and exits 0, or 1 when the server
failed to start. The only scenario-specific code is the user's part: the
authorization step fetches the authorization URL and reads the redirect (the
suite's authorization server approves at once), the elicitation answer accepts
(the library fills in the schema's defaults), and cross-app access (an
enterprise IdP's token, an extension) is the SDK's provider given as the entry's
``auth``. Tokens go to a fresh
temporary directory (the real file storage).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx2
import trio
from mcp.client.auth.extensions.identity_assertion import IdentityAssertionOAuthProvider

from trio_agent import ToolContext
from trio_agent.mcp import (
    AuthorizationRequest,
    ElicitationAnswer,
    ElicitationRequest,
    FileTokenStorage,
    HttpServerConfig,
    open_mcp_tools,
)

logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s %(message)s")
logging.getLogger("trio_agent.mcp").setLevel(logging.DEBUG)

#: The tool each non-auth scenario calls, and its arguments (auth scenarios: the first).
CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "tools_call": ("add_numbers", {"a": 5, "b": 3}),
    "sse-retry": ("test_reconnection", {}),
    "elicitation-sep1034-client-defaults": ("test_client_elicitation_defaults", {}),
}
#: A client ID metadata document URL (used when the authorization server supports them).
CIMD_URL = "https://conformance-test.local/client-metadata.json"


async def authorize(request: AuthorizationRequest) -> str:
    """The user's step: the suite's authorization server redirects at once."""
    async with httpx2.AsyncClient() as http:
        response = await http.get(request.url, follow_redirects=False)
    location = response.headers.get("location")
    if not location:
        raise RuntimeError(f"no redirect from the authorization endpoint ({response.status_code})")
    return location


async def elicit(request: ElicitationRequest) -> ElicitationAnswer:
    """The user accepts without typing anything: the schema's defaults apply."""
    await trio.lowlevel.checkpoint()
    print(f"elicitation from {request.server}: {request.message}", file=sys.stderr)
    return ElicitationAnswer("accept", {})


def entry(url: str, scenario: str) -> dict[str, Any]:
    """The server's ``.mcp.json`` entry, with the scenario's OAuth client if it gives one."""
    oauth: dict[str, Any] = {"callbackPort": 3000, "clientMetadataUrl": CIMD_URL}
    context: dict[str, Any] = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    if "client_id" in context:
        oauth["clientId"] = context["client_id"]
    if "client_secret" in context:
        oauth["clientSecret"] = context["client_secret"]
    if scenario.startswith("auth/client-credentials"):
        oauth["grantType"] = "client_credentials"
        if "private_key_pem" in context:
            oauth["privateKey"] = context["private_key_pem"]
            oauth["signingAlgorithm"] = context.get("signing_algorithm", "ES256")
    return {"type": "http", "url": url, "oauth": oauth}


async def cross_app_access(url: str, store: FileTokenStorage) -> HttpServerConfig:
    """SEP-990: the user's IdP ID token is exchanged at the IdP for an ID-JAG
    (RFC 8693), which the SDK's provider presents as a JWT-bearer grant (RFC 7523).
    The authorization server's issuer is configuration here; the suite does not
    give it, so it is read from the server's protected-resource metadata."""
    context: dict[str, Any] = json.loads(os.environ["MCP_CONFORMANCE_CONTEXT"])
    parsed = urlparse(url)
    prm = f"{parsed.scheme}://{parsed.netloc}/.well-known/oauth-protected-resource{parsed.path}"
    async with httpx2.AsyncClient() as http:
        issuer = (await http.get(prm)).raise_for_status().json()["authorization_servers"][0]

    async def id_jag(audience: str, resource: str) -> str:
        async with httpx2.AsyncClient() as http:
            answer = await http.post(
                context["idp_token_endpoint"],
                data={
                    "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
                    "requested_token_type": "urn:ietf:params:oauth:token-type:id-jag",
                    "subject_token": context["idp_id_token"],
                    "subject_token_type": "urn:ietf:params:oauth:token-type:id_token",
                    "audience": audience,
                    "resource": resource,
                    "client_id": context["idp_client_id"],
                },
            )
        return answer.raise_for_status().json()["access_token"]

    provider = IdentityAssertionOAuthProvider(
        server_url=url,
        storage=store,
        client_id=context["client_id"],
        client_secret=context["client_secret"],
        issuer=issuer,
        assertion_provider=id_jag,
        token_endpoint_auth_method="client_secret_basic",
    )
    return HttpServerConfig(url, auth=provider)


async def main(url: str, scenario: str, state: Path) -> int:
    servers: dict[str, Any] = {"conformance": entry(url, scenario)}
    if scenario == "auth/cross-app-access-complete-flow":
        store = FileTokenStorage(state / "conformance.json")
        servers["conformance"] = await cross_app_access(url, store)
    async with open_mcp_tools(
        servers,
        elicit=elicit,
        authorize=authorize,
        token_storage=lambda server, _url: FileTokenStorage(state / f"{server}.json"),
        # The suite starts every scenario's client at once: on a loaded 2-core
        # machine, each import of the SDK alone can take seconds.
        startup_timeout=90,
        call_timeout=90,
    ) as tools:
        by_name = {t.name.removeprefix("mcp__conformance__"): t for t in tools}
        if not by_name:
            print("the server gave no tools (it failed to start?)", file=sys.stderr)
            return 1
        if scenario == "initialize":
            return 0
        name, arguments = CALLS.get(scenario, (next(iter(by_name)), {}))
        ctx = ToolContext("conformance", name, report=lambda _item: None)
        out = await by_name[name].run(arguments, ctx)
        print(f"{name}: {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as state:
        code = trio.run(
            main, sys.argv[-1], os.environ.get("MCP_CONFORMANCE_SCENARIO", ""), Path(state)
        )
    sys.exit(code)
