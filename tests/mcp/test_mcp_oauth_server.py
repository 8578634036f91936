"""OAuth end to end against an authorization server written with the SDK's auth
server support (tests/mcp/oauth_test_server.py, a real subprocess on 127.0.0.1):
discovery, dynamic client registration, the user's step through ``authorize=``
(PKCE, the RFC 8707 resource), the tokens stored in the real 0600 file and used
again by the next block without asking the user, an expired stored token
refreshed without asking either, and no ``authorize=`` with no tokens: "needs
authorization"."""

from __future__ import annotations

import gc
import json
import logging
import stat
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import httpx
import pytest
import trio

from trio_agent import ToolContext, ToolOutput
from trio_agent.mcp import AuthorizationRequest, FileTokenStorage, open_mcp_tools

SCRIPT = Path(__file__).with_name("oauth_test_server.py")

# As in test_mcp_http.py: the SDK's streamable-HTTP client leaves httpx2's SSE async
# generators to the garbage collector (upstream); each test collects before it ends.
pytestmark = [
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpx2\.:ResourceWarning"),
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore2\.:ResourceWarning"),
]


@pytest.fixture(autouse=True)
async def _collect_abandoned_generators() -> AsyncIterator[None]:
    yield
    gc.collect()
    await trio.sleep(0)  # let Trio's finalizer close them now
    gc.collect()


@pytest.fixture
def oauth_server() -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert proc.stdout is not None
        yield f"http://127.0.0.1:{int(proc.stdout.readline())}/mcp"
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


class Browser:
    """The user: each authorization URL is fetched; the server approves at once."""

    def __init__(self) -> None:
        self.asked: list[AuthorizationRequest] = []

    async def __call__(self, request: AuthorizationRequest) -> str:
        self.asked.append(request)
        async with httpx.AsyncClient() as http:
            response = await http.get(request.url, follow_redirects=False)
        assert response.status_code == 302, response.text
        return response.headers["location"]


async def stats(url: str, store: Path, authorize: Browser | None) -> str | None:
    servers = {"secure": {"type": "http", "url": url}}
    async with open_mcp_tools(
        servers,
        authorize=authorize,
        token_storage=lambda _server, _url: FileTokenStorage(store),
        startup_timeout=60,
    ) as tools:
        if not tools:
            return None
        (tool,) = tools
        out = await tool.run({}, ToolContext("t", tool.name, report=lambda _item: None))
    assert isinstance(out, ToolOutput)
    assert not out.is_error, out.content
    return str(out.content)


async def test_authorize_once_then_reuse_then_refresh(oauth_server: str, tmp_path: Path) -> None:
    store = tmp_path / "state" / "secure.json"
    browser = Browser()
    said = await stats(oauth_server, store, browser)
    assert said is not None
    assert said.endswith(
        f"mcp | registered=1 authorized=1 exchanged=1 refreshed=0 | resource={oauth_server}"
    )
    (asked,) = browser.asked
    query = parse_qs(urlparse(asked.url).query)
    assert query["code_challenge_method"] == ["S256"]
    assert query["resource"] == [oauth_server]
    assert query["redirect_uri"] == [asked.redirect_uri]
    assert asked.server == "secure"
    assert stat.S_IMODE(store.stat().st_mode) == 0o600
    saved = json.loads(store.read_text())
    assert saved["tokens"]["access_token"].startswith("at_")

    # The next block uses the stored token: no registration, no user.
    said = await stats(oauth_server, store, Browser())
    assert said is not None
    assert "registered=1 authorized=1 exchanged=1 refreshed=0" in said

    # A stored token past its expiry is refreshed, not re-authorized.
    saved["tokens"]["expires_at"] = 0
    store.write_text(json.dumps(saved))
    again = Browser()
    said = await stats(oauth_server, store, again)
    assert said is not None
    assert "registered=1 authorized=1 exchanged=1 refreshed=1" in said
    assert again.asked == []
    assert (
        json.loads(store.read_text())["tokens"]["access_token"] != saved["tokens"]["access_token"]
    )


async def test_without_authorize_it_needs_authorization(
    oauth_server: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert await stats(oauth_server, tmp_path / "t.json", None) is None
    (warning,) = [
        r for r in caplog.records if r.levelno == logging.WARNING and "secure" in r.getMessage()
    ]
    assert f"HTTP 401 Unauthorized from {oauth_server}: needs authorization" in warning.getMessage()
    assert "authorize=" in warning.getMessage()
