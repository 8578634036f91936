"""OAuth's parts of our own, and errors that say why: a refusing HTTP server (a real
loopback socket) is reported with its status and, for 401/403, "needs
authorization" and how to give it; the token file (0600, a token's expiry kept
across a restart); the ``oauth`` settings of ``.mcp.json``; the loopback redirect
receiver. (The OAuth flows themselves run end to end against the conformance
suite's authorization server: test_mcp_conformance.py.)"""

from __future__ import annotations

import gc
import logging
import stat
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from trio_agent import ToolContext
from trio_agent.mcp import (
    AuthorizationRequest,
    FileTokenStorage,
    HttpServerConfig,
    MCPConfigError,
    OAuthSettings,
    default_token_storage,
    loopback_authorize,
    open_mcp_tools,
    parse_server_config,
)

# As in test_mcp_http.py: the SDK's streamable-HTTP client leaves httpx2's SSE async
# generators to the garbage collector (upstream); each test collects before it ends.
pytestmark = [
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpx2\.:ResourceWarning"),
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore2\.:ResourceWarning"),
]


@pytest.fixture
async def collect_abandoned_generators() -> AsyncIterator[None]:
    yield
    gc.collect()
    await trio.sleep(0)  # let Trio's finalizer close them now
    gc.collect()


async def refusing_server(status: int, nursery: trio.Nursery, seen: list[bytes]) -> str:
    """A loopback HTTP server that answers every request with *status*: its URL."""

    async def answer(stream: trio.SocketStream) -> None:
        async with stream:
            data = b""
            with trio.move_on_after(5):
                while b"\r\n\r\n" not in data:
                    chunk = await stream.receive_some(65536)
                    if not chunk:
                        return
                    data += chunk
            seen.append(data.split(b"\r\n", 1)[0])
            await stream.send_all(
                f"HTTP/1.1 {status} Nope\r\nContent-Length: 0\r\n"
                'WWW-Authenticate: Bearer error="invalid_token"\r\nConnection: close\r\n\r\n'.encode()
            )

    (listener,) = await nursery.start(partial(trio.serve_tcp, answer, 0, host="127.0.0.1"))
    port = listener.socket.getsockname()[1]
    return f"http://127.0.0.1:{port}/mcp"


@pytest.mark.parametrize("status", [401, 403])
@pytest.mark.usefixtures("collect_abandoned_generators")
async def test_an_unauthorized_server_says_it_needs_authorization(
    status: int, caplog: pytest.LogCaptureFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    seen: list[bytes] = []
    async with trio.open_nursery() as nursery:
        url = await refusing_server(status, nursery, seen)
        async with open_mcp_tools({"remote": {"type": "http", "url": url}}) as tools:
            assert tools == []
        nursery.cancel_scope.cancel()
    assert seen[0].startswith(b"POST /mcp")
    (warning,) = [
        r for r in caplog.records if r.levelno == logging.WARNING and "remote" in r.getMessage()
    ]
    message = warning.getMessage()
    assert f"failed to start: HTTP {status} Nope from {url}: needs authorization" in message
    assert "authorize=" in message
    assert "Authorization header" in message


@pytest.mark.usefixtures("collect_abandoned_generators")
async def test_a_failing_server_says_its_status(
    caplog: pytest.LogCaptureFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    async with trio.open_nursery() as nursery:
        url = await refusing_server(502, nursery, [])
        async with open_mcp_tools({"remote": {"type": "http", "url": url}}) as tools:
            assert tools == []
        nursery.cancel_scope.cancel()
    assert f"'remote' failed to start: HTTP 502 Nope from {url}" in caplog.text
    assert "needs authorization" not in caplog.text


async def test_the_token_file_is_private_and_keeps_the_expiry(tmp_path: Path) -> None:
    store = FileTokenStorage(tmp_path / "state" / "s.json")
    assert await store.get_tokens() is None
    await store.set_tokens(OAuthToken(access_token="secret", expires_in=3600, refresh_token="r"))
    await store.set_client_info(OAuthClientInformationFull(client_id="c", client_secret="cs"))
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(store.path.parent.stat().st_mode) == 0o700
    again = FileTokenStorage(store.path)  # as after a restart
    tokens = await again.get_tokens()
    assert tokens is not None
    assert tokens.access_token == "secret"
    assert tokens.refresh_token == "r"
    assert tokens.expires_in is not None
    assert 3590 <= tokens.expires_in <= 3600
    info = await again.get_client_info()
    assert info is not None
    assert (info.client_id, info.client_secret) == ("c", "cs")


async def test_an_unreadable_token_file_starts_afresh(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "s.json"
    path.write_text("{not json")
    store = FileTokenStorage(path)
    assert await store.get_tokens() is None
    assert "unreadable" in caplog.text
    await store.set_tokens(OAuthToken(access_token="a"))
    assert (await store.get_tokens()) == OAuthToken(access_token="a")


def test_the_default_storage_is_per_server_under_the_state_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    a = default_token_storage("srv/../x", "https://a.example/mcp")
    b = default_token_storage("srv/../x", "https://b.example/mcp")
    assert a.path.parent == tmp_path / "trio-agent" / "mcp-oauth"
    assert a.path != b.path
    assert "/" not in a.path.name


def test_oauth_settings_are_read_as_claude_code_writes_them() -> None:
    config = parse_server_config(
        "s",
        {
            "type": "http",
            "url": "https://h/mcp",
            "oauth": {
                "clientId": "abc",
                "clientSecret": "${SECRET}",
                "callbackPort": 8080,
                "scopes": "read write",
            },
        },
        env={"SECRET": "shh"},
    )
    assert config.oauth == OAuthSettings(  # type: ignore[union-attr]
        client_id="abc", client_secret="shh", callback_port=8080, scopes="read write"
    )
    assert "shh" not in repr(config)


@given(
    key=st.sampled_from(["clientId", "callbackPort", "grantType", "clientMetadataUrl", "nope"]),
    value=st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.lists(st.characters(), max_size=5).map("".join),
        st.lists(st.integers(), max_size=2),
    ),
)
def test_bad_oauth_settings_are_a_config_error(key: str, value: Any) -> None:
    entry = {"type": "http", "url": "https://h/mcp", "oauth": {key: value}}
    problems: list[str] = []
    try:
        config = parse_server_config("s", entry, env={})
    except MCPConfigError as exc:
        problems.append(str(exc))
    if problems:
        assert problems[0].startswith("s.oauth")
        return
    # Accepted: only a value the setting can take.
    oauth = config.oauth  # type: ignore[union-attr]
    if key == "callbackPort":
        assert isinstance(value, int)
        assert 0 < value < 65536
    elif key == "clientId":
        assert oauth.client_id == value
    elif key == "grantType":
        assert value in ("authorization_code", "client_credentials")
    else:
        assert key == "clientMetadataUrl"
        assert isinstance(value, str)
        assert value.startswith("https://")


async def test_loopback_authorize_receives_the_redirect() -> None:
    port_finder = trio.socket.socket()
    await port_finder.bind(("127.0.0.1", 0))
    port = port_finder.getsockname()[1]
    port_finder.close()
    redirect_uri = f"http://localhost:{port}/callback"
    opened: list[str] = []
    got: list[str] = []

    async with trio.open_nursery() as nursery:

        async def browser() -> None:
            # The user's browser (the receiver listens before the page is opened):
            # first a stray request, then the redirect.
            async with httpx.AsyncClient() as http:
                stray = await http.get(f"http://127.0.0.1:{port}/favicon.ico")
                assert stray.status_code == 404
                page = await http.get(f"http://127.0.0.1:{port}/callback?code=c1&state=s1")
                assert "close this tab" in page.text

        authorize = loopback_authorize(
            lambda url: opened.append(url) or nursery.start_soon(browser)
        )

        async def run() -> None:
            got.append(
                await authorize(AuthorizationRequest("s", "https://as/authorize?x=1", redirect_uri))
            )

        nursery.start_soon(run)
    assert opened == ["https://as/authorize?x=1"]
    assert got == [f"http://localhost:{port}/callback?code=c1&state=s1"]


class _Stamp(httpx2.Auth):
    """An auth of the user's own: it stamps a header on every request."""

    def auth_flow(self, request: httpx2.Request) -> Any:
        request.headers["X-Stamp"] = "mine"
        yield request


@pytest.mark.usefixtures("collect_abandoned_generators")
async def test_an_auth_of_ones_own_is_used(http_server: tuple[str, Any]) -> None:
    url, _proc = http_server
    config = HttpServerConfig(url, auth=_Stamp())
    async with open_mcp_tools({"test": config}) as tools:
        (tool,) = [t for t in tools if t.name == "mcp__test__header"]
        out = await tool.run({"name": "X-Stamp"}, ToolContext("t", tool.name, report=print))
    assert out.content == "mine"


@pytest.mark.usefixtures("collect_abandoned_generators")
async def test_an_auth_that_is_not_one_fails_the_server(caplog: pytest.LogCaptureFixture) -> None:
    config = HttpServerConfig("http://127.0.0.1:9/mcp", auth="token")
    async with open_mcp_tools({"test": config}) as tools:
        assert tools == []
    assert "auth must be an httpx2.Auth, not str" in caplog.text
