"""WebFetch against a real loopback server (hypercorn's trio worker) and against
httpx.MockTransport for error statuses and transport failures."""

import functools
import gc
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx
import hypercorn
import hypercorn.trio
import pytest
import trio

from trio_agent import Tool, ToolContext, ToolOutput
from trio_agent.tools import WebFetch

ROUTES: dict[str, tuple[int, list[tuple[bytes, bytes]], bytes]] = {
    "/text": (200, [(b"content-type", b"text/plain; charset=utf-8")], "héllo wörld".encode()),
    "/latin": (
        200,
        [(b"content-type", b"text/html; charset=iso-8859-1")],
        "<p>café</p>".encode("latin-1"),
    ),
    "/json": (200, [(b"content-type", b"application/json")], b'{"ok": true}'),
    "/big": (200, [(b"content-type", b"text/plain")], b"x" * 10_000),
    "/binary": (200, [(b"content-type", b"image/png")], b"\x89PNG\0\0\0" * 10),
    "/redirect": (302, [(b"location", b"/text")], b""),
    "/missing": (404, [(b"content-type", b"text/plain")], b"no such page"),
}


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    status, headers, body = ROUTES.get(scope["path"], (404, [], b""))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture
async def base_url(nursery: trio.Nursery) -> AsyncIterator[str]:
    config = hypercorn.Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.errorlog = None
    shutdown = trio.Event()
    binds = await nursery.start(
        functools.partial(hypercorn.trio.serve, app, config, shutdown_trigger=shutdown.wait)
    )
    yield binds[0]
    shutdown.set()


async def call(tool: Tool, url: str) -> ToolOutput:
    assert tool.validate({"url": url}) is None
    out = await tool.run({"url": url}, ToolContext("toolu_1", tool.name))
    assert isinstance(out, ToolOutput)
    return out


async def test_text_page(base_url):
    out = await call(WebFetch(allow_private=True), f"{base_url}/text")
    assert not out.is_error
    assert out.content == (
        f"URL: {base_url}/text\nStatus: 200 OK\n"
        "Content-Type: text/plain; charset=utf-8\n\nhéllo wörld"
    )


async def test_charset_json_and_redirect(base_url):
    out = await call(WebFetch(allow_private=True), f"{base_url}/latin")
    assert str(out.content).endswith("<p>café</p>")
    out = await call(WebFetch(allow_private=True), f"{base_url}/json")
    assert str(out.content).endswith('{"ok": true}')
    out = await call(WebFetch(allow_private=True), f"{base_url}/redirect")
    assert not out.is_error
    assert str(out.content).startswith(f"URL: {base_url}/text\nStatus: 200 OK")


async def test_body_is_truncated(base_url):
    out = await call(WebFetch(max_bytes=1000, allow_private=True), f"{base_url}/big")
    assert not out.is_error
    body = str(out.content).split("\n\n", 1)[1]
    assert body == "x" * 1000 + "\n[truncated: only the first 1000 bytes were read]"
    gc.collect()  # an unfinished async generator would warn now (warnings are errors)


async def test_binary_is_not_shown(base_url):
    out = await call(WebFetch(allow_private=True), f"{base_url}/binary")
    assert not out.is_error
    assert str(out.content).endswith("[binary content, 70 bytes, not shown]")
    out = await call(WebFetch(max_bytes=10, allow_private=True), f"{base_url}/binary")
    assert str(out.content).endswith("[binary content, more than 10 bytes, not shown]")


async def test_not_found_is_an_error_result(base_url):
    async with httpx.AsyncClient() as client:
        out = await call(WebFetch(http_client=client, allow_private=True), f"{base_url}/missing")
        assert not client.is_closed  # a client given by the caller stays open
    assert out.is_error
    assert "Status: 404 Not Found" in str(out.content)
    assert str(out.content).endswith("no such page")


async def test_connection_refused_is_an_error_result():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound but not listening: refused
        out = await call(WebFetch(allow_private=True), f"http://127.0.0.1:{port}/")
    assert out.is_error
    assert "ConnectError" in str(out.content)


@pytest.mark.parametrize("status", [500, 503, 429])
async def test_error_statuses_through_a_mock_transport(status):
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            status, text=f"failure {status}", headers={"content-type": "text/plain"}
        )

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        out = await call(WebFetch(http_client=client), "https://example.test/page")
    assert out.is_error
    assert f"Status: {status} " in str(out.content)
    assert str(out.content).endswith(f"failure {status}")


async def test_transport_failure_and_unknown_charset():
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/timeout":
            raise httpx.ReadTimeout("too slow", request=request)
        return httpx.Response(
            200, content=b"ok", headers={"content-type": "text/plain; charset=klingon"}
        )

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        tool = WebFetch(http_client=client)
        out = await call(tool, "https://example.test/timeout")
        assert out.is_error
        assert "ReadTimeout: too slow" in str(out.content)
        out = await call(tool, "https://example.test/odd")
        assert not out.is_error
        assert str(out.content).endswith("\n\nok")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("file:///etc/passwd", "only http and https"),
        ("ftp://example.test/x", "only http and https"),
        ("not a url", "only http and https"),
        ("http://[::1", "invalid URL"),
    ],
)
async def test_bad_urls_are_refused(url, message):
    out = await call(WebFetch(), url)
    assert out.is_error
    assert message in str(out.content)


def test_tool_flags():
    tool = WebFetch()
    assert tool.name == "WebFetch"
    assert tool.is_concurrency_safe({"url": "https://x"})
    with pytest.raises(ValueError, match="max_bytes"):
        WebFetch(max_bytes=0)


async def test_truncated_streaming_body_through_a_mock_transport():
    async def body():
        for _ in range(100):
            yield b"y" * 100

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body(), headers={"content-type": "text/plain"})

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        out = await call(WebFetch(http_client=client, max_bytes=250), "https://example.test/")
    assert not out.is_error
    assert str(out.content).endswith(
        "y" * 250 + "\n[truncated: only the first 250 bytes were read]"
    )
    gc.collect()  # an unfinished async generator would warn now (warnings are errors)


async def test_connection_lost_mid_body_is_an_error_result():
    async def body():
        yield b"partial"
        raise httpx.ReadError("connection reset")

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body(), headers={"content-type": "text/plain"})

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        out = await call(WebFetch(http_client=client), "https://example.test/")
    assert out.is_error
    assert "ReadError: connection reset" in str(out.content)
