"""The WebFetch tool: GET a URL and show its text, from public addresses only
(see :mod:`._ssrf`), within a byte budget and a deadline."""

from __future__ import annotations

import codecs
import contextlib
import math
import zlib
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Mapping
from typing import Any, Protocol, final

import httpx
import trio

from .._tools import Tool, ToolContext, ToolOutput
from ._ssrf import AddressPolicy, AddressRefused, guarded_transport

__all__ = ["WebFetch"]

_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "url": {"type": "string", "description": "An http:// or https:// URL."},
    },
    "required": ["url"],
    "additionalProperties": False,
}

#: Redirects followed before giving up (httpx's default).
MAX_REDIRECTS = 20

#: Only what can be decoded within a byte budget (see :class:`_ZlibDecoder`).
ACCEPT_ENCODING = "gzip, deflate"

_TEXT_TYPES = ("application/json", "application/xml", "application/javascript")


def _is_text(content_type: str) -> bool:
    kind = content_type.split(";", 1)[0].strip().lower()
    return (
        not kind
        or kind.startswith("text/")
        or kind in _TEXT_TYPES
        or kind.endswith(("+json", "+xml"))
    )


def _charset(response: httpx.Response) -> str:
    charset = response.charset_encoding or "utf-8"
    try:
        codecs.lookup(charset)
    except LookupError:
        return "utf-8"
    return charset


class _Unfetchable(Exception):
    """The response cannot be shown: the message says why."""


class _Decoder(Protocol):
    def decode(self, data: bytes, limit: int) -> bytes:
        """At most *limit* bytes more of the decoded body, from *data* and what is
        left of earlier calls (an empty *data* drains that)."""
        ...


@final
class _Identity:
    def __init__(self) -> None:
        self._pending = b""

    def decode(self, data: bytes, limit: int) -> bytes:
        self._pending += data
        out, self._pending = self._pending[:limit], self._pending[limit:]
        return out


@final
class _ZlibDecoder:
    """gzip or deflate, decompressed with an output limit per call: a small body that
    expands to gigabytes costs no more memory than the budget (zlib keeps the input it
    has not decoded yet in ``unconsumed_tail``)."""

    def __init__(self, wbits: int) -> None:
        self._wbits = wbits
        self._zlib = zlib.decompressobj(wbits)
        self._started = False

    def decode(self, data: bytes, limit: int) -> bytes:
        if self._zlib.eof or limit <= 0:
            return b""  # trailing data after the stream (another gzip member) is ignored
        data = self._zlib.unconsumed_tail + data
        try:
            out = self._zlib.decompress(data, limit)
        except zlib.error as exc:
            if self._wbits == zlib.MAX_WBITS and not self._started:
                # "deflate" is often sent raw, without the zlib header (as httpx allows).
                self._wbits = -zlib.MAX_WBITS
                self._zlib = zlib.decompressobj(self._wbits)
                return self.decode(data, limit)
            raise _Unfetchable(f"the body is not valid compressed data: {exc}") from exc
        self._started = True
        return out


_DECODERS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


def _decoder(content_encoding: str) -> _Decoder:
    """The decoder for a ``Content-Encoding`` value: none, or one of
    :data:`ACCEPT_ENCODING`. Stacked encodings (``gzip, gzip``) are refused: each
    layer multiplies what a small body can expand to."""
    codings = [c.strip().lower() for c in content_encoding.split(",")]
    codings = [c for c in codings if c and c != "identity"]
    if not codings:
        return _Identity()
    if len(codings) > 1:
        raise _Unfetchable(
            f"refused a body with stacked content encodings {content_encoding!r}: "
            "WebFetch decodes at most one"
        )
    wbits = _DECODERS.get(codings[0])
    if wbits is None:
        raise _Unfetchable(
            f"refused a body with content encoding {content_encoding!r}: WebFetch asks "
            f"for {ACCEPT_ENCODING!r} only"
        )
    return _ZlibDecoder(wbits)


@contextlib.asynccontextmanager
async def _client(
    http_client: httpx.AsyncClient | None, policy: AddressPolicy, io_timeout: float
) -> AsyncGenerator[httpx.AsyncClient]:
    if http_client is not None:
        yield http_client
    else:
        async with httpx.AsyncClient(
            transport=guarded_transport(policy=policy),
            timeout=httpx.Timeout(io_timeout),
            trust_env=False,
        ) as client:
            yield client


@contextlib.asynccontextmanager
async def _follow(
    client: httpx.AsyncClient, url: str, policy: AddressPolicy
) -> AsyncGenerator[httpx.Response]:
    """GET *url*, following redirects one hop at a time: each hop's host is checked
    before its request is sent (the transport checks the resolved address)."""
    request = client.build_request("GET", url, headers={"Accept-Encoding": ACCEPT_ENCODING})
    for _ in range(MAX_REDIRECTS + 1):
        policy.check_host(request.url.host)
        try:
            response = await client.send(request, stream=True, follow_redirects=False)
        except (httpx.InvalidURL, UnicodeError) as exc:
            # The request was built, so what failed is the redirect httpx builds from
            # the Location header (data:, javascript:, http:host:port/...).
            raise _Unfetchable(
                f"the response to {request.url} redirects to an invalid URL: {exc}"
            ) from exc
        next_request = response.next_request
        if next_request is None:
            try:
                yield response
            finally:
                await response.aclose()
            return
        await response.aclose()
        if next_request.url.scheme not in ("http", "https"):
            raise AddressRefused(f"refused to follow a redirect to {next_request.url}")
        request = next_request
    raise httpx.TooManyRedirects(f"more than {MAX_REDIRECTS} redirects", request=request)


def _body(response: httpx.Response) -> tuple[_Decoder, AsyncIterator[bytes]]:
    """The decoder and the body as it came over the wire. Raw bytes, decoded here:
    httpx would decode each network chunk whole (and any stack of encodings), before
    any limit could apply. A transport that built its response from bytes (httpx
    reads those at once) gives the decoded body, already in memory."""
    try:
        content = response.content
    except httpx.ResponseNotRead:
        return _decoder(response.headers.get("content-encoding", "")), response.aiter_raw()
    return _Identity(), _one(content)


async def _one(content: bytes) -> AsyncIterator[bytes]:
    yield content


async def _fetch(
    client: httpx.AsyncClient, url: str, max_bytes: int, policy: AddressPolicy
) -> ToolOutput:
    body = bytearray()
    truncated = False
    error: _Unfetchable | None = None
    async with _follow(client, url, policy) as response:
        decoder, chunks = _body(response)
        try:
            async for chunk in chunks:
                if truncated or error is not None:
                    continue
                try:
                    body += decoder.decode(chunk, max_bytes + 1 - len(body))
                except _Unfetchable as exc:
                    error = exc
                truncated = len(body) > max_bytes
                if truncated or error is not None:
                    # Not `break` nor `raise`: httpx's chain of async generators would
                    # be left unfinished (a ResourceWarning under Trio,
                    # encode/httpx#3686). Closing the response makes the next read
                    # fail, which ends them.
                    await response.aclose()
        except (httpx.StreamError, httpx.TransportError):
            if not truncated and error is None:
                raise
        if error is not None:
            raise error
        if not truncated:
            body += decoder.decode(b"", max_bytes + 1 - len(body))
            truncated = len(body) > max_bytes
        del body[max_bytes:]
    content_type = response.headers.get("content-type", "")
    head = (
        f"URL: {response.url}\nStatus: {response.status_code} {httpx.codes.get_reason_phrase(response.status_code)}\n"
        f"Content-Type: {content_type or '(none)'}\n"
    )
    if _is_text(content_type):
        text = body.decode(_charset(response), "replace")
        if truncated:
            text += f"\n[truncated: only the first {max_bytes} bytes were read]"
    else:
        size = f"more than {max_bytes}" if truncated else str(len(body))
        text = f"[binary content, {size} bytes, not shown]"
    return ToolOutput(f"{head}\n{text}", is_error=response.is_error)


def WebFetch(
    *,
    http_client: httpx.AsyncClient | None = None,
    max_bytes: int = 100_000,
    allow_private: bool = False,
    allowed: Iterable[str] = (),
    timeout: float = 30.0,
) -> Tool:
    """The WebFetch tool: ``{url}`` → status, content type and body text.

    Redirects are followed (at most 20); at most *max_bytes* of the body are read,
    *after* decompression (only one ``gzip`` or ``deflate`` encoding is accepted, and
    it is decoded within that budget). The whole fetch, redirects included, has
    *timeout* seconds. An HTTP error status (4xx, 5xx), a network error, a bad URL or
    redirect, a refused encoding or running out of time is an error result.

    No server-side request forgery: by default only public addresses are fetched.
    Loopback, private, link-local (cloud metadata), unspecified, multicast and
    reserved addresses (IANA's special-purpose registries; IPv6 only in 2000::/3), in
    any spelling and in IPv4-mapped, -compatible, NAT64, 6to4 or Teredo IPv6 form,
    are refused with an error result saying why; the check is made on the resolved
    address, on every redirect hop, and the connection goes to the checked address
    (no second lookup). *allow_private* turns the check off; *allowed* lists host
    names and networks (``"10.0.0.0/8"``) that may be fetched although private.

    With no *http_client*, each call opens (and closes) its own guarded client, whose
    every network operation also times out after *timeout*. A client you pass gets the no-lookup check of every hop (IP
    literals, ``localhost``) but resolves names itself: build it with
    ``transport=guarded_transport(...)`` to keep the full check. Concurrency-safe.
    """
    if max_bytes < 1:
        raise ValueError(f"max_bytes must be positive, not {max_bytes!r}")
    if not timeout > 0 or math.isnan(timeout):
        raise ValueError(f"timeout must be positive, not {timeout!r}")
    policy = AddressPolicy.of(allow_private=allow_private, allowed=allowed)

    async def run(input: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        url: str = input["url"]
        try:
            parsed = httpx.URL(url)
        except (httpx.InvalidURL, UnicodeError) as exc:
            return ToolOutput(f"invalid URL {url!r}: {exc}", is_error=True)
        if parsed.scheme not in ("http", "https"):
            return ToolOutput(
                f"only http and https URLs can be fetched, not {url!r}", is_error=True
            )
        if not parsed.host:
            return ToolOutput(f"invalid URL {url!r}: it has no host", is_error=True)
        try:
            with trio.fail_after(timeout):  # one deadline: every hop, every byte
                async with _client(http_client, policy, timeout) as client:
                    return await _fetch(client, url, max_bytes, policy)
        except trio.TooSlowError:
            return ToolOutput(
                f"fetching {url} failed: it took longer than {timeout:g} s", is_error=True
            )
        except AddressRefused as exc:
            return ToolOutput(str(exc), is_error=True)
        except _Unfetchable as exc:
            return ToolOutput(f"fetching {url} failed: {exc}", is_error=True)
        except (httpx.InvalidURL, UnicodeError) as exc:
            return ToolOutput(f"invalid URL {url!r}: {exc}", is_error=True)
        except httpx.HTTPError as exc:
            return ToolOutput(f"fetching {url} failed: {type(exc).__name__}: {exc}", is_error=True)

    return Tool(
        "WebFetch",
        "Fetch a web page or file with HTTP GET and return its status, content type and "
        f"text (at most {max_bytes} bytes).",
        _SCHEMA,
        run,
        concurrency_safe=True,
    )
