"""WebFetch against the audit's attacks: reserved and special-purpose addresses, a
decompression bomb, a server that drips one byte at a time, and URLs or redirects
that used to make ``run`` raise instead of giving an error result."""

from __future__ import annotations

import functools
import gc
import ipaddress
import zlib
from collections.abc import AsyncIterator
from typing import Any

import httpcore
import httpx
import hypercorn
import hypercorn.trio
import pytest
import trio
import trio.testing
from hypothesis import example, given, settings
from hypothesis import strategies as st

from trio_agent import ToolContext, ToolOutput
from trio_agent.tools import WebFetch, _webfetch, guarded_transport
from trio_agent.tools._ssrf import forbidden_reason

# -- 1. special-purpose addresses ---------------------------------------------------

# A model written from the IANA special-purpose registries, independent of the
# implementation's table and of this interpreter's ipaddress.
IPV4_SPECIAL = [
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.0.0.0/29",
    "192.0.0.8/32",
    "192.0.0.11/32",
    "192.0.0.12/30",
    "192.0.0.16/28",
    "192.0.0.32/27",
    "192.0.0.64/26",
    "192.0.0.128/25",
    "192.0.2.0/24",
    "192.88.99.0/24",
    "192.168.0.0/16",
    "198.18.0.0/15",
    "198.51.100.0/24",
    "203.0.113.0/24",
    "224.0.0.0/4",
    "240.0.0.0/4",
    "255.255.255.255/32",
]
IPV6_SPECIAL = [
    "::/128",
    "::1/128",
    "100::/64",
    "100:0:0:1::/64",
    "64:ff9b:1::/48",
    "2001:2::/48",
    "2001:10::/28",
    "2001:20::/28",
    "2001:db8::/32",
    "3fff::/20",
    "5f00::/16",
    "fc00::/7",
    "fe80::/10",
    "fec0::/10",
    "fe00::/9",
    "ff00::/8",
    # Outside 2000::/3 and not an IPv4 embedding (those are judged by their IPv4).
    "200::/7",
    "400::/6",
    "800::/5",
    "1000::/4",
    "4000::/2",
    "8000::/1",
]
NOT_GLOBAL_V6 = [ipaddress.IPv6Network(n) for n in [*IPV6_SPECIAL, "2001::/23", "2002::/16"]]


def _embeddings(v4: ipaddress.IPv4Address) -> list[ipaddress.IPv6Address]:
    n = int(v4)
    return [
        ipaddress.IPv6Address((0xFFFF << 32) | n),  # ::ffff:a.b.c.d mapped
        ipaddress.IPv6Address((0xFFFF << 48) | n),  # ::ffff:0:a.b.c.d translated
        ipaddress.IPv6Address(n),  # ::a.b.c.d compatible
        ipaddress.IPv6Address(f"64:ff9b::{v4}"),  # NAT64
        ipaddress.IPv6Address(f"64:ff9b:1::{v4}"),  # local-use NAT64
        ipaddress.IPv6Address((0x2002 << 112) | (n << 80) | 1),  # 6to4
        # Teredo: server 192.0.2.1 (doc), flags, port, client inverted
        ipaddress.IPv6Address((0x20010000 << 96) | (0xC0000201 << 64) | (n ^ 0xFFFFFFFF)),
    ]


special_v4 = st.sampled_from(IPV4_SPECIAL).flatmap(lambda n: st.ip_addresses(network=n))
special_v6 = st.sampled_from(IPV6_SPECIAL).flatmap(lambda n: st.ip_addresses(network=n))


@settings(max_examples=400, deadline=None)
@given(ip=st.one_of(special_v4, special_v6))
@example(ip=ipaddress.ip_address("192.0.0.8"))
@example(ip=ipaddress.ip_address("192.88.99.1"))
@example(ip=ipaddress.ip_address("fec0::1"))
@example(ip=ipaddress.ip_address("3fff::1"))
@example(ip=ipaddress.ip_address("::ffff:0:a9fe:a9fe"))
@example(ip=ipaddress.ip_address("::2:7f00:1"))
def test_special_purpose_addresses_are_refused(ip: Any) -> None:
    assert forbidden_reason(ip) is not None, ip


@settings(max_examples=300, deadline=None)
@given(v4=special_v4)
def test_every_embedding_of_a_special_ipv4_address_is_refused(v4: Any) -> None:
    for v6 in _embeddings(v4):
        reason = forbidden_reason(v6)
        assert reason is not None, (v4, v6)


def _is_global_v4(ip: ipaddress.IPv4Address) -> bool:
    return not any(ip in ipaddress.IPv4Network(n) for n in IPV4_SPECIAL)


global_v4 = st.ip_addresses(v=4).filter(_is_global_v4)
global_v6 = st.ip_addresses(network="2000::/3").filter(
    lambda ip: not any(ip in n for n in NOT_GLOBAL_V6)
)


@settings(max_examples=300, deadline=None)
@given(ip=st.one_of(global_v4, global_v6))
@example(ip=ipaddress.ip_address("8.8.8.8"))
@example(ip=ipaddress.ip_address("1.1.1.1"))
@example(ip=ipaddress.ip_address("192.0.0.9"))
@example(ip=ipaddress.ip_address("192.0.0.10"))
@example(ip=ipaddress.ip_address("2606:4700::1111"))
@example(ip=ipaddress.ip_address("2001:4860:4860::8888"))
@example(ip=ipaddress.ip_address("2001:3::1"))  # AMT, inside 2001::/23 but global
def test_global_addresses_are_accepted(ip: Any) -> None:
    assert forbidden_reason(ip) is None, (ip, forbidden_reason(ip))


@settings(max_examples=100, deadline=None)
@given(v4=global_v4)
def test_a_global_ipv4_address_is_accepted_in_the_global_embeddings(v4: Any) -> None:
    mapped, translated, compatible, nat64, local_nat64, sixtofour, teredo = _embeddings(v4)
    for v6 in (mapped, translated, compatible, nat64, sixtofour, teredo):
        assert forbidden_reason(v6) is None, (v4, v6)
    assert forbidden_reason(local_nat64) is not None  # 64:ff9b:1::/48 is local-use


@pytest.fixture
def connects(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every TCP connect the guarded transport makes, recorded and failed."""
    seen: list[str] = []

    async def connect_tcp(self: Any, host: str, port: int, *args: Any, **kw: Any) -> Any:
        seen.append(host)
        await trio.lowlevel.checkpoint()
        raise httpcore.ConnectError(f"recorded {host}")

    monkeypatch.setattr(httpcore.TrioBackend, "connect_tcp", connect_tcp)
    return seen


AUDIT_URLS = [
    "http://[64:ff9b:1::a9fe:a9fe]/",
    "http://[::ffff:0:a9fe:a9fe]/",
    "http://[fec0::1]/",
    "http://[3fff::1]/",
    "http://[5f00::1]/",
    "http://[fe00::1]/",
    "http://[200::1]/",
    "http://[100:0:0:1::1]/",
    "http://[::2:7f00:1]/",
    "http://192.0.0.8/",
    "http://192.0.0.100/",
    "http://192.88.99.1/",
]


async def test_webfetch_makes_no_connection_to_the_audit_addresses(connects: list[str]) -> None:
    tool = WebFetch()
    for url in AUDIT_URLS:
        out = await tool.run({"url": url}, ToolContext("t", "WebFetch"))
        assert isinstance(out, ToolOutput)
        assert out.is_error
        assert "refused to fetch" in str(out.content), (url, out.content)
    assert connects == []
    # The recorder does see a connection that is allowed: it was in the path.
    out = await tool.run({"url": "http://8.8.8.8/"}, ToolContext("t", "WebFetch"))
    assert isinstance(out, ToolOutput)
    assert "recorded 8.8.8.8" in str(out.content)
    assert connects == ["8.8.8.8"]


async def test_a_name_resolving_to_a_special_address_is_never_connected(
    connects: list[str],
) -> None:
    answers = {
        "nat64.test": "64:ff9b:1::a9fe:a9fe",
        "site.test": "fec0::1",
        "ietf.test": "192.0.0.8",
    }

    async def resolve(host: str, port: int) -> list[str]:
        await trio.lowlevel.checkpoint()
        return [answers[host]]

    transport = guarded_transport(resolver=resolve)
    async with httpx.AsyncClient(transport=transport) as client:
        tool = WebFetch(http_client=client)
        for host, address in answers.items():
            out = await tool.run({"url": f"http://{host}/"}, ToolContext("t", "WebFetch"))
            assert isinstance(out, ToolOutput)
            assert f"refused to fetch from {host} ({address})" in str(out.content), out.content
    assert connects == []


# -- a real loopback server (hypercorn's trio worker) -------------------------------

MAX = 10_000
BOMB = zlib.compress(bytes(64 << 20), 9, wbits=31)  # 64 MiB of zeros in ~64 KB
accept_encodings: list[str] = []


def _gzip(data: bytes) -> bytes:
    return zlib.compress(data, 9, wbits=31)


def _deflate_raw(data: bytes) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush()


ROUTES: dict[str, tuple[list[tuple[bytes, bytes]], bytes]] = {
    "/bomb": ([(b"content-encoding", b"gzip")], BOMB),
    "/stacked": ([(b"content-encoding", b"gzip, gzip")], _gzip(_gzip(b"hi" * 100))),
    "/brotli": ([(b"content-encoding", b"br")], b"\x0b\x00\x80hi\x03"),
    "/gzip": ([(b"content-encoding", b"gzip")], _gzip("héllo".encode())),
    "/deflate": ([(b"content-encoding", b"deflate")], zlib.compress(b"zlib deflate")),
    "/raw-deflate": ([(b"content-encoding", b"Deflate")], _deflate_raw(b"raw deflate")),
    "/corrupt": ([(b"content-encoding", b"gzip")], b"\x1f\x8b not gzip at all"),
}


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    headers = dict(scope["headers"])
    accept_encodings.append(headers.get(b"accept-encoding", b"").decode())
    path = scope["path"]
    text = [(b"content-type", b"text/plain; charset=utf-8")]
    if path == "/drip":  # one byte every 0.5 s for 45 s: no single read is slow
        await send({"type": "http.response.start", "status": 200, "headers": text})
        for _ in range(90):
            await trio.sleep(0.5)
            await send({"type": "http.response.body", "body": b"x", "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        return
    if path.startswith("/hop"):  # 10 s per hop, then a redirect to the next hop
        await trio.sleep(10)
        n = int(path[4:] or 0)
        location = f"/hop{n + 1}".encode()
        await send(
            {"type": "http.response.start", "status": 302, "headers": [(b"location", location)]}
        )
        await send({"type": "http.response.body", "body": b""})
        return
    extra, body = ROUTES[path]
    await send({"type": "http.response.start", "status": 200, "headers": text + extra})
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


async def call(url: str, **kw: Any) -> ToolOutput:
    # allowed=["127.0.0.1"] is the documented opt-in; it stands in for a public host.
    tool = WebFetch(allowed=["127.0.0.1"], **kw)
    out = await tool.run({"url": url}, ToolContext("t", "WebFetch"))
    assert isinstance(out, ToolOutput)
    return out


def _body(out: ToolOutput) -> str:
    return str(out.content).split("\n\n", 1)[1]


# -- 2. decompressed size -----------------------------------------------------------


@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of every piece of output of WebFetch's decoders."""
    sizes: list[int] = []
    make = _webfetch._decoder

    class Counting:
        def __init__(self, inner: Any) -> None:
            self._inner = inner

        def decode(self, data: bytes, limit: int) -> bytes:
            out: bytes = self._inner.decode(data, limit)
            sizes.append(len(out))
            return out

    monkeypatch.setattr(_webfetch, "_decoder", lambda ce: Counting(make(ce)))
    return sizes


async def test_a_gzip_bomb_is_decoded_only_up_to_max_bytes(
    base_url: str, decoded: list[int]
) -> None:
    accept_encodings.clear()
    out = await call(f"{base_url}/bomb", max_bytes=MAX)
    assert not out.is_error, out.content
    assert _body(out) == "\0" * MAX + f"\n[truncated: only the first {MAX} bytes were read]"
    assert MAX < sum(decoded) <= MAX + 1  # the decoder ran, and stopped at the budget
    assert accept_encodings == ["gzip, deflate"]
    gc.collect()  # an unfinished async generator would warn now (warnings are errors)


async def test_stacked_and_unknown_encodings_are_error_results(base_url: str) -> None:
    out = await call(f"{base_url}/stacked")
    assert out.is_error
    assert "stacked content encodings 'gzip, gzip'" in str(out.content)
    out = await call(f"{base_url}/brotli")
    assert out.is_error
    assert "content encoding 'br'" in str(out.content)
    out = await call(f"{base_url}/corrupt")
    assert out.is_error
    assert "not valid compressed data" in str(out.content)


async def test_gzip_and_both_deflates_are_decoded(base_url: str, decoded: list[int]) -> None:
    assert _body(await call(f"{base_url}/gzip")) == "héllo"
    assert _body(await call(f"{base_url}/deflate")) == "zlib deflate"
    assert _body(await call(f"{base_url}/raw-deflate")) == "raw deflate"
    assert _body(await call(f"{base_url}/gzip", max_bytes=2)) == (
        "h\ufffd\n[truncated: only the first 2 bytes were read]"
    )
    assert sum(decoded) > 0


# -- 3. one deadline for the whole fetch --------------------------------------------


async def test_a_drip_feeding_server_is_cut_off_at_the_deadline(
    base_url: str, autojump_clock: trio.testing.MockClock
) -> None:
    start = trio.current_time()
    out = await call(f"{base_url}/drip")
    assert out.is_error
    assert "took longer than 30 s" in str(out.content)
    assert 30 <= trio.current_time() - start < 31  # not 45 s: every byte was in time
    start = trio.current_time()
    out = await call(f"{base_url}/drip", timeout=5)
    assert "took longer than 5 s" in str(out.content)
    assert 5 <= trio.current_time() - start < 6


async def test_the_deadline_covers_every_redirect_hop(
    base_url: str, autojump_clock: trio.testing.MockClock
) -> None:
    start = trio.current_time()
    out = await call(f"{base_url}/hop", timeout=25)  # 10 s per hop, none times out
    assert out.is_error
    assert "took longer than 25 s" in str(out.content)
    assert 25 <= trio.current_time() - start < 26


async def test_the_deadline_applies_to_a_client_you_pass(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def slow() -> AsyncIterator[bytes]:
        for _ in range(100):
            await trio.sleep(1)
            yield b"x"

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=slow(), headers={"content-type": "text/plain"})

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        tool = WebFetch(http_client=client, timeout=7)
        start = trio.current_time()
        out = await tool.run({"url": "https://example.test/"}, ToolContext("t", "WebFetch"))
    assert isinstance(out, ToolOutput)
    assert "took longer than 7 s" in str(out.content)
    assert 7 <= trio.current_time() - start < 8


def test_timeout_must_be_positive() -> None:
    for bad in (0, -1, float("nan")):
        with pytest.raises(ValueError, match="timeout"):
            WebFetch(timeout=bad)


# -- 4. inputs that used to raise ----------------------------------------------------


def _run(url: str, location: str | bytes | None) -> ToolOutput:
    def handler(request: httpx.Request) -> httpx.Response:
        if location is not None and request.url.path == "/r":
            raw = (
                location
                if isinstance(location, bytes)
                else location.encode("utf-8", "surrogatepass")
            )
            return httpx.Response(302, headers=[(b"location", raw)])
        return httpx.Response(200, text="page")

    async def main() -> ToolOutput:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            out = await WebFetch(http_client=client).run({"url": url}, ToolContext("t", "WebFetch"))
        assert isinstance(out, ToolOutput)
        return out

    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


@settings(max_examples=150, deadline=None)
@given(location=st.one_of(st.text(), st.binary(max_size=40)))
@example(location="data:text/plain,hi")
@example(location="javascript:alert(1)")
@example(location="http:127.0.0.1:8080/s")
@example(location="/\udcff")
@example(location="http://a\udcff/")
def test_any_redirect_location_gives_a_result(location: str | bytes) -> None:
    out = _run("https://example.test/r", location)
    assert out.is_error or str(out.content).endswith("page"), out.content


@settings(max_examples=150, deadline=None)
@given(url=st.one_of(st.text(), st.builds("http://{}".format, st.text())))
@example(url="http://127.0.0.1/\udcff")
@example(url="http://a\ud800.example/")
@example(url="http://" + "a" * 70 + ".example/")
def test_any_url_string_gives_a_result(url: str) -> None:
    out = _run(url, None)
    assert out.is_error or str(out.content).endswith("page"), out.content


async def test_the_audit_urls_are_error_results_with_the_real_resolver() -> None:
    for url, message in [
        ("http://127.0.0.1/\udcff", "invalid URL"),
        ("http://" + "a" * 70 + ".example/", "is not a valid host name"),
    ]:
        out = await WebFetch().run({"url": url}, ToolContext("t", "WebFetch"))
        assert isinstance(out, ToolOutput)
        assert out.is_error
        assert message in str(out.content), out.content
