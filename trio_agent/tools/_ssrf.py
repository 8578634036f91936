"""No server-side request forgery: which addresses WebFetch may connect to, and a
transport that connects only to an address it has checked.

The decision is made on the *resolved* address (so ``127.1``, ``2130706433``,
``0x7f000001``, ``localhost`` and a DNS name pointing at ``10.0.0.1`` are all the same
thing), against IANA's special-purpose address registries (IPv6 is public only in 2000::/3);
IPv4-mapped, -translated and -compatible, NAT64, 6to4 and Teredo IPv6 forms are
judged by the IPv4 address they carry.

:func:`guarded_transport` does the lookup itself, checks every address it got, and
connects to one of those addresses: there is no second lookup a DNS-rebinding server
could answer differently. TLS still verifies (and sends SNI for) the URL's host name,
and the ``Host`` header is the URL's, because only the TCP connect is redirected.
Every redirect hop opens its connection through the same check.
"""

from __future__ import annotations

import ipaddress
import math
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterable
from contextlib import contextmanager
from typing import Any, cast, final

import attrs
import httpcore
import httpx
import trio

from ._files import ToolRefusal

__all__ = [
    "AddressPolicy",
    "AddressRefused",
    "Resolver",
    "forbidden_reason",
    "guarded_transport",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
#: ``async (host, port) -> addresses``: one DNS lookup.
Resolver = Callable[[str, int], Awaitable[list[str]]]

_Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _table(*entries: tuple[str, str]) -> tuple[tuple[_Network, str], ...]:
    return tuple((ipaddress.ip_network(net), reason) for net, reason in entries)


# The decision does not rest on the interpreter's ``is_private``/``is_global``: their
# tables change between Python patch releases (3.11.7 treats 192.0.0.8, 192.88.99.0/24,
# fec0::/10 and 3fff::/20 as global). These tables are the IANA special-purpose
# registries (https://www.iana.org/assignments/iana-ipv4-special-registry/ and
# https://www.iana.org/assignments/iana-ipv6-special-registry/, as of 2025), plus
# multicast; the first match wins, so the narrower entries come first.

#: IPv4 special-purpose entries IANA marks "Globally Reachable".
_IPV4_GLOBAL = _table(
    ("192.0.0.9/32", "Port Control Protocol anycast"),
    ("192.0.0.10/32", "TURN anycast"),
)
_IPV4_REFUSED = _table(
    ("0.0.0.0/32", "the unspecified address"),
    ("0.0.0.0/8", "a 'this network' address (0.0.0.0/8)"),
    ("10.0.0.0/8", "a private address"),
    ("100.64.0.0/10", "a shared (carrier-grade NAT) address, not a public one"),
    ("127.0.0.0/8", "a loopback address"),
    ("169.254.0.0/16", "a link-local address (cloud metadata lives there)"),
    ("172.16.0.0/12", "a private address"),
    ("192.0.0.0/24", "an IETF protocol assignment (192.0.0.0/24), not a public address"),
    ("192.0.2.0/24", "a documentation address"),
    ("192.88.99.0/24", "a deprecated 6to4 relay anycast address"),
    ("192.168.0.0/16", "a private address"),
    ("198.18.0.0/15", "a benchmarking address"),
    ("198.51.100.0/24", "a documentation address"),
    ("203.0.113.0/24", "a documentation address"),
    ("224.0.0.0/4", "a multicast address"),
    ("255.255.255.255/32", "the limited broadcast address"),
    ("240.0.0.0/4", "a reserved address"),
)
#: IPv6 special-purpose entries inside 2000::/3 that IANA marks "Globally Reachable"
#: and that are locators. ORCHIDv2 (2001:20::/28) and DETs (2001:30::/28) are too, but
#: they are identifiers, never the address of a web server: refused with 2001::/23.
_IPV6_GLOBAL = _table(
    ("2001:1::1/128", "Port Control Protocol anycast"),
    ("2001:1::2/128", "TURN anycast"),
    ("2001:1::3/128", "DNS-SD service registration anycast"),
    ("2001:3::/32", "AMT"),
    ("2001:4:112::/48", "AS112-v6"),
)
_IPV6_REFUSED = _table(
    ("::/128", "the unspecified address"),
    ("::1/128", "a loopback address"),
    ("fe80::/10", "a link-local address"),
    ("fc00::/7", "a private (unique local) address"),
    ("fec0::/10", "a site-local address (deprecated, private)"),
    ("ff00::/8", "a multicast address"),
    ("64:ff9b:1::/48", "a local-use NAT64 address (64:ff9b:1::/48), not a public one"),
    ("2001:2::/48", "a benchmarking address"),
    ("2001:db8::/32", "a documentation address"),
    ("2001::/23", "an IETF protocol assignment (2001::/23), not a public address"),
    ("3fff::/20", "a documentation address"),
)
#: IPv6 global unicast: everything else outside it is not a public address.
_GLOBAL_UNICAST = ipaddress.ip_network("2000::/3")

_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
_IPV4_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class AddressRefused(ToolRefusal):
    """WebFetch will not connect there: the message says which address and why."""


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for (mapped, translated, compatible,
    NAT64, 6to4, Teredo), or None."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    low32 = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in _IPV4_COMPATIBLE and int(ip) > 1:  # :: and ::1 are themselves
        return low32
    if ip in _IPV4_TRANSLATED or ip in _NAT64:
        return low32
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    return None


def _lookup(ip: IPAddress, table: tuple[tuple[_Network, str], ...]) -> str | None:
    return next((reason for net, reason in table if ip in net), None)


def forbidden_reason(ip: IPAddress) -> str | None:
    """Why *ip* must not be fetched by default (``"a loopback address"``...), or None
    when it is a public unicast address.

    An allow-model: IPv6 is public only inside 2000::/3 and outside IANA's
    special-purpose blocks; IPv4 only outside IANA's blocks, multicast and whatever
    this interpreter also thinks is not global. Embedded IPv4 forms are judged by the
    IPv4 address they carry."""
    if isinstance(ip, ipaddress.IPv4Address):
        if _lookup(ip, _IPV4_GLOBAL) is not None:
            return None
        reason = _lookup(ip, _IPV4_REFUSED)
        if reason is not None:
            return reason
        # Belt and braces: a block a newer interpreter knows of and this table not.
        if ip.is_reserved or not ip.is_global:
            return "not a public address"
        return None
    inner = _embedded_ipv4(ip)
    if inner is not None:
        reason = forbidden_reason(inner)
        return None if reason is None else f"{reason} (as IPv6 {ip})"
    if _lookup(ip, _IPV6_GLOBAL) is not None:
        return None
    reason = _lookup(ip, _IPV6_REFUSED)
    if reason is not None:
        return reason
    if ip not in _GLOBAL_UNICAST:
        return "not a public address (IPv6 global unicast is 2000::/3)"
    return None


def literal_address(host: str) -> IPAddress | None:
    """The address *host* spells without any lookup, in any spelling ``inet_aton``
    accepts (``127.1``, ``2130706433``, ``0x7f000001``, ``0177.0.0.1``), or None."""
    host = host.strip("[]")
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except (OSError, ValueError):
        return None


def _network(entry: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    try:
        return ipaddress.ip_network(entry.strip("[]"), strict=False)
    except ValueError:
        return None


def _hosts(entries: Iterable[str]) -> frozenset[str]:
    if isinstance(entries, str):
        raise TypeError(f"allowed is a list of hosts or networks, not the string {entries!r}")
    return frozenset(e.lower().rstrip(".") for e in entries if _network(e) is None)


def _networks(
    entries: Iterable[str],
) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    if isinstance(entries, str):
        raise TypeError(f"allowed is a list of hosts or networks, not the string {entries!r}")
    return tuple(n for e in entries if (n := _network(e)) is not None)


@final
@attrs.frozen
class AddressPolicy:
    """Where WebFetch may connect.

    Args:
        allow_private: connect anywhere (intranet fetches); the check is off.
        allowed: host names (``"intranet.example"``, exact, case-insensitive) and
            networks (``"10.1.0.0/16"``, ``"127.0.0.1"``) allowed although private.
    """

    allow_private: bool = False
    hosts: frozenset[str] = attrs.field(default=frozenset[str](), converter=_hosts)
    networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = attrs.field(
        default=(), converter=_networks
    )

    @classmethod
    def of(cls, *, allow_private: bool = False, allowed: Iterable[str] = ()) -> AddressPolicy:
        """The policy for WebFetch's ``allow_private`` and ``allowed`` arguments."""
        entries = list(allowed) if not isinstance(allowed, str) else allowed
        return cls(allow_private, entries, entries)

    def host_allowed(self, host: str) -> bool:
        """Whether *host* (a name) is allowed whatever it resolves to."""
        return self.allow_private or host.lower().rstrip(".") in self.hosts

    def check_address(self, host: str, ip: IPAddress) -> None:
        """Raise :class:`AddressRefused` unless *host* may be reached at *ip*."""
        if self.host_allowed(host) or any(ip in net for net in self.networks):
            return
        reason = forbidden_reason(ip)
        if reason is not None:
            shown = host if host == str(ip) else f"{host} ({ip})"
            raise AddressRefused(
                f"refused to fetch from {shown}: it is {reason}; WebFetch only fetches "
                "public addresses unless allow_private=True or the host is allowed"
            )

    def check_host(self, host: str) -> None:
        """The check that needs no lookup: IP literals in any spelling and
        ``localhost`` names. Raises :class:`AddressRefused`."""
        bare = host.lower().rstrip(".")
        ip = literal_address(bare)
        if ip is not None:
            self.check_address(host, ip)
        elif bare == "localhost" or bare.endswith(".localhost"):
            self.check_address(host, ipaddress.IPv4Address("127.0.0.1"))


async def system_resolver(host: str, port: int) -> list[str]:
    """The addresses of *host* from the system resolver (``getaddrinfo``)."""
    try:
        infos = await trio.socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except UnicodeError as exc:  # IDNA: a label longer than 63 characters...
        raise OSError(f"{host!r} is not a valid host name: {exc}") from exc
    return [str(info[4][0]) for info in infos]


@final
class _GuardedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend with the lookup done here, checked, and the
    connection made to the checked address."""

    def __init__(self, policy: AddressPolicy, resolver: Resolver) -> None:
        self._policy = policy
        self._resolver = resolver
        # httpcore declares TrioBackend as a placeholder when trio is absent.
        self._inner = cast(httpcore.AsyncNetworkBackend, httpcore.TrioBackend())

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        self._policy.check_host(host)
        try:
            with trio.fail_after(timeout if timeout is not None else math.inf):
                addresses = await self._resolver(host, port)
        except OSError as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from exc
        except trio.TooSlowError:
            raise httpcore.ConnectTimeout(f"looking up {host} timed out") from None
        checked: list[str] = []
        for address in addresses:
            ip = ipaddress.ip_address(address.split("%", 1)[0])
            self._policy.check_address(host, ip)  # every answer, not just the first
            if str(ip) not in checked:
                checked.append(str(ip))
        if not checked:
            raise httpcore.ConnectError(f"{host} has no address")
        error: httpcore.ConnectError | httpcore.ConnectTimeout | None = None
        for ip in checked:
            try:
                # A literal address: trio does no lookup for it.
                return await self._inner.connect_tcp(
                    ip, port, timeout, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                error = exc
        assert error is not None
        raise error

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise AddressRefused("WebFetch does not connect to Unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


# Most specific first: the first match wins.
_ERRORS: tuple[tuple[type[Exception], type[httpx.HTTPError]], ...] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
)


@contextmanager
def _map_errors() -> Generator[None]:
    try:
        yield
    except Exception as exc:
        for source, target in _ERRORS:
            if isinstance(exc, source):
                raise target(str(exc)) from exc
        raise


@final
class _Body(httpx.AsyncByteStream):
    def __init__(self, response: httpcore.Response) -> None:
        self._response = response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _map_errors():
            async for chunk in self._response.aiter_stream():
                yield chunk

    async def aclose(self) -> None:
        await self._response.aclose()


@final
class _GuardedTransport(httpx.AsyncBaseTransport):
    def __init__(self, policy: AddressPolicy, resolver: Resolver, verify: ssl.SSLContext | bool):
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(verify=verify, trust_env=False),
            network_backend=_GuardedBackend(policy, resolver),
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.AsyncByteStream)
        core = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with _map_errors():
            response = await self._pool.handle_async_request(core)
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_Body(response),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._pool.aclose()


def guarded_transport(
    *,
    allow_private: bool = False,
    allowed: Iterable[str] = (),
    policy: AddressPolicy | None = None,
    resolver: Resolver = system_resolver,
    verify: ssl.SSLContext | bool = True,
) -> httpx.AsyncBaseTransport:
    """An httpx transport that connects only to addresses the policy allows.

    Give it to your own client (``httpx.AsyncClient(transport=guarded_transport())``)
    to keep WebFetch's protection when you pass ``http_client``. *allow_private* and
    *allowed* are WebFetch's (or give a whole *policy*); *resolver* replaces the
    system's ``getaddrinfo`` (one lookup per connection).

    Raises (when used):
        AddressRefused: the host resolves to a refused address.
    """
    if policy is None:
        policy = AddressPolicy.of(allow_private=allow_private, allowed=allowed)
    return _GuardedTransport(policy, resolver, verify)
