"""WebFetch refuses server-side request forgery: attacked for real, against threaded
HTTP servers on 127.0.0.1 and 127.0.0.2 that record every request they get."""

from __future__ import annotations

import http.server
import ipaddress
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import ToolContext, ToolOutput
from trio_agent.tools import AddressPolicy, AddressRefused, WebFetch, guarded_transport
from trio_agent.tools._ssrf import forbidden_reason, literal_address


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    hits: list[tuple[str, str]]
    redirect_to: str | None


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        self.server.hits.append((self.path, self.headers.get("Host", "")))
        if self.path == "/redirect" and self.server.redirect_to is not None:
            self.send_response(302)
            self.send_header("Location", self.server.redirect_to)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = b"internal secret"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _serve(host: str) -> Iterator[_Server]:
    server = _Server((host, 0), _Handler)
    server.hits = []
    server.redirect_to = None
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture(scope="module")
def server() -> Iterator[_Server]:
    yield from _serve("127.0.0.1")


@pytest.fixture(scope="module")
def second() -> Iterator[_Server]:
    """A server on another loopback address (Linux routes all of 127/8 to lo)."""
    yield from _serve("127.0.0.2")


@pytest.fixture(autouse=True)
def _fresh(server: _Server, second: _Server) -> None:
    server.hits.clear()
    second.hits.clear()
    server.redirect_to = None


def _port(server: _Server) -> int:
    return server.server_address[1]


def fetch(url: str, **kw: Any) -> ToolOutput:
    """Run WebFetch once, for real, in its own trio.run; the tool ran (it gave a
    ToolOutput for this exact input)."""
    tool = WebFetch(**kw)
    assert tool.validate({"url": url}) is None

    async def main() -> ToolOutput:
        out = await tool.run({"url": url}, ToolContext("t", "WebFetch"))
        assert isinstance(out, ToolOutput)
        return out

    return trio.run(main)


def _ipv4_spellings(ip: ipaddress.IPv4Address) -> st.SearchStrategy[str]:
    n = int(ip)
    a, b, c, d = ip.packed
    return st.sampled_from(
        [
            str(ip),
            str(n),
            hex(n),
            f"0x{n:08X}",
            f"{a}.{(b << 16) | (c << 8) | d}",
            f"{a}.{b}.{(c << 8) | d}",
            f"[::ffff:{ip}]",
            f"[::ffff:{(n >> 16):x}:{(n & 0xFFFF):x}]",
            f"[0:0:0:0:0:ffff:{ip}]",
        ]
    )


LOOPBACK_SPELLINGS = st.one_of(
    _ipv4_spellings(ipaddress.IPv4Address("127.0.0.1")),
    st.sampled_from(["localhost", "LocalHost", "0.0.0.0", "0", "[::1]"]),
)


@settings(max_examples=30, deadline=None)
@given(host=LOOPBACK_SPELLINGS)
def test_every_spelling_of_the_local_server_is_refused_and_never_reached(
    server: _Server, host: str
) -> None:
    server.hits.clear()
    url = f"http://{host}:{_port(server)}/secret"
    out = fetch(url)
    assert out.is_error
    assert "refused to fetch" in str(out.content)
    assert "loopback" in str(out.content) or "unspecified" in str(out.content)
    assert server.hits == []
    # The same URL does reach the server once private addresses are allowed, so the
    # refusal above was about the address, not a broken URL.
    if host != "[::1]":  # the server listens on IPv4 only
        out = fetch(url, allow_private=True)
        assert not out.is_error, out.content
        assert str(out.content).endswith("internal secret")
        assert [path for path, _ in server.hits] == ["/secret"]


PRIVATE = st.one_of(
    st.ip_addresses(network="10.0.0.0/8"),
    st.ip_addresses(network="172.16.0.0/12"),
    st.ip_addresses(network="192.168.0.0/16"),
    st.ip_addresses(network="169.254.0.0/16"),
    st.ip_addresses(network="224.0.0.0/4"),
    st.ip_addresses(network="fc00::/7"),
    st.ip_addresses(network="fe80::/10"),
    st.ip_addresses(network="ff00::/8"),
)


@settings(max_examples=60, deadline=None)
@given(ip=PRIVATE, data=st.data())
def test_private_link_local_multicast_in_any_spelling_are_refused(ip: Any, data: Any) -> None:
    v4 = isinstance(ip, ipaddress.IPv4Address)
    host = data.draw(_ipv4_spellings(ip)) if v4 else f"[{ip}]"
    out = fetch(f"http://{host}/latest/meta-data/")
    assert out.is_error
    assert "refused to fetch" in str(out.content), out.content


def test_octal_and_trailing_dot_spellings_never_reach_the_server(server: _Server) -> None:
    # httpx itself rejects octal dotted quads; a trailing dot is checked as the name.
    for host in ("0177.0.0.1", "0177.0.0.01", "localhost.", "a.b.localhost"):
        out = fetch(f"http://{host}:{_port(server)}/secret")
        assert out.is_error
        assert "refused to fetch" in str(out.content) or "Invalid IPv4" in str(out.content)
    assert server.hits == []


def test_cloud_metadata_address_is_refused_with_the_reason() -> None:
    out = fetch("http://169.254.169.254/latest/meta-data/")
    assert out.is_error
    assert "169.254.169.254: it is a link-local address" in str(out.content)


@settings(max_examples=200, deadline=None)
@given(ip=st.ip_addresses(v=4))
def test_ipv6_forms_of_an_ipv4_address_are_judged_as_that_address(ip: Any) -> None:
    inner = forbidden_reason(ip)
    n = int(ip)
    for v6 in (
        ipaddress.IPv6Address((0xFFFF << 32) | n),  # ::ffff:a.b.c.d
        ipaddress.IPv6Address(f"64:ff9b::{ip}"),  # NAT64
    ):
        outer = forbidden_reason(v6)
        assert (outer is None) == (inner is None), (ip, v6)
    assert literal_address(str(n)) == ip
    assert literal_address(hex(n)) == ip


def test_redirect_to_a_private_address_is_refused_on_that_hop(
    server: _Server, second: _Server
) -> None:
    # The first hop is allowed (the 127.0.0.1 server is on the allow-list), the
    # redirect it answers with points at 127.0.0.2, which is not.
    for target in (
        f"http://127.0.0.2:{_port(second)}/secret",
        f"http://[::ffff:127.0.0.2]:{_port(second)}/secret",
        f"http://2130706434:{_port(second)}/secret",
    ):
        server.hits.clear()
        server.redirect_to = target
        out = fetch(f"http://127.0.0.1:{_port(server)}/redirect", allowed=["127.0.0.1"])
        assert [path for path, _ in server.hits] == ["/redirect"]  # hop 1 ran
        assert out.is_error
        assert "refused to fetch" in str(out.content)
        assert second.hits == []
    # With 127.0.0.2 allowed too, the same redirect is followed.
    out = fetch(f"http://127.0.0.1:{_port(server)}/redirect", allowed=["127.0.0.0/30"])
    assert not out.is_error, out.content
    assert [path for path, _ in second.hits] == ["/secret"]


async def test_a_client_you_pass_still_gets_every_hop_checked(
    server: _Server, second: _Server
) -> None:
    server.redirect_to = f"http://127.0.0.2:{_port(second)}/secret"
    async with httpx.AsyncClient() as client:
        tool = WebFetch(http_client=client, allowed=["127.0.0.1"])
        out = await tool.run(
            {"url": f"http://127.0.0.1:{_port(server)}/redirect"}, ToolContext("t", "WebFetch")
        )
    assert isinstance(out, ToolOutput)
    assert [path for path, _ in server.hits] == ["/redirect"]
    assert out.is_error
    assert "127.0.0.2: it is a loopback address" in str(out.content)
    assert second.hits == []


async def test_dns_rebinding_cannot_switch_the_address_after_the_check(
    server: _Server, second: _Server
) -> None:
    # A hostile DNS server answers the allowed address first and the forbidden one
    # after: the guarded transport looks up once and connects to what it checked.
    answers = ["127.0.0.1", "127.0.0.2"]
    lookups: list[str] = []

    async def rebinding(host: str, port: int) -> list[str]:
        lookups.append(host)
        await trio.lowlevel.checkpoint()
        return [answers[min(len(lookups), 2) - 1]]

    port = _port(server)
    url = f"http://rebind.test:{port}/page"
    transport = guarded_transport(allowed=["127.0.0.1"], resolver=rebinding)
    async with httpx.AsyncClient(transport=transport) as client:
        out = await WebFetch(http_client=client).run({"url": url}, ToolContext("t", "WebFetch"))
    assert isinstance(out, ToolOutput)
    assert not out.is_error, out.content
    assert lookups == ["rebind.test"]  # one lookup, no second one to rebind
    assert server.hits == [("/page", f"rebind.test:{port}")]  # the Host header is the URL's
    # The next connection gets the rebound answer, and is refused before connecting.
    transport = guarded_transport(allowed=["127.0.0.1"], resolver=rebinding)
    async with httpx.AsyncClient(transport=transport) as client:
        out = await WebFetch(http_client=client).run({"url": url}, ToolContext("t", "WebFetch"))
    assert isinstance(out, ToolOutput)
    assert out.is_error
    assert "rebind.test (127.0.0.2): it is a loopback address" in str(out.content)
    assert lookups == ["rebind.test", "rebind.test"]
    assert second.hits == []


async def test_every_answer_of_a_lookup_is_checked(server: _Server) -> None:
    async def mixed(host: str, port: int) -> list[str]:
        await trio.lowlevel.checkpoint()
        return ["93.184.215.14", "127.0.0.1"]

    transport = guarded_transport(resolver=mixed)
    async with httpx.AsyncClient(transport=transport) as client:
        out = await WebFetch(http_client=client).run(
            {"url": f"http://mixed.test:{_port(server)}/"}, ToolContext("t", "WebFetch")
        )
    assert isinstance(out, ToolOutput)
    assert out.is_error
    assert "mixed.test (127.0.0.1)" in str(out.content)
    assert server.hits == []


def test_allowed_host_names_and_networks() -> None:
    policy = AddressPolicy.of(allowed=["Intranet.Example", "10.1.0.0/16", "[fd00::1]"])
    policy.check_address("intranet.example.", ipaddress.ip_address("10.9.9.9"))
    policy.check_address("x", ipaddress.ip_address("10.1.2.3"))
    policy.check_address("x", ipaddress.ip_address("fd00::1"))
    with pytest.raises(AddressRefused, match="private"):
        policy.check_address("x", ipaddress.ip_address("10.2.0.1"))
    AddressPolicy.of(allow_private=True).check_host("127.0.0.1")
    with pytest.raises(TypeError):
        AddressPolicy.of(allowed="10.0.0.0/8")
