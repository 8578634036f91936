"""The WebFetch tool: GET a URL and show its text, from public addresses only
(see :mod:`._ssrf`)."""

from __future__ import annotations

import codecs
import contextlib
from collections.abc import AsyncGenerator, Iterable, Mapping
from typing import Any

import httpx

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


@contextlib.asynccontextmanager
async def _client(
    http_client: httpx.AsyncClient | None, policy: AddressPolicy
) -> AsyncGenerator[httpx.AsyncClient]:
    if http_client is not None:
        yield http_client
    else:
        async with httpx.AsyncClient(
            transport=guarded_transport(policy=policy), timeout=httpx.Timeout(30.0), trust_env=False
        ) as client:
            yield client


@contextlib.asynccontextmanager
async def _follow(
    client: httpx.AsyncClient, url: str, policy: AddressPolicy
) -> AsyncGenerator[httpx.Response]:
    """GET *url*, following redirects one hop at a time: each hop's host is checked
    before its request is sent (the transport checks the resolved address)."""
    request = client.build_request("GET", url)
    for _ in range(MAX_REDIRECTS + 1):
        policy.check_host(request.url.host)
        response = await client.send(request, stream=True, follow_redirects=False)
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


async def _fetch(
    client: httpx.AsyncClient, url: str, max_bytes: int, policy: AddressPolicy
) -> ToolOutput:
    body = bytearray()
    truncated = False
    async with _follow(client, url, policy) as response:
        try:
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > max_bytes and not truncated:
                    truncated = True
                    # Not `break`: httpx's chain of async generators would be left
                    # unfinished (a ResourceWarning under Trio, encode/httpx#3686).
                    # Closing the response makes the next read fail, which ends them.
                    await response.aclose()
        except (httpx.StreamError, httpx.TransportError):
            if not truncated:
                raise
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
) -> Tool:
    """The WebFetch tool: ``{url}`` → status, content type and body text.

    Redirects are followed (at most 20); at most *max_bytes* of the body are read. An
    HTTP error status (4xx, 5xx), a network error or a bad URL is an error result.

    No server-side request forgery: by default only public addresses are fetched.
    Loopback, private, link-local (cloud metadata), unspecified, multicast and
    reserved addresses, in any spelling and in IPv4-mapped or -compatible IPv6 form,
    are refused with an error result saying why; the check is made on the resolved
    address, on every redirect hop, and the connection goes to the checked address
    (no second lookup). *allow_private* turns the check off; *allowed* lists host
    names and networks (``"10.0.0.0/8"``) that may be fetched although private.

    With no *http_client*, each call opens (and closes) its own guarded client with a
    30 s timeout. A client you pass gets the no-lookup check of every hop (IP
    literals, ``localhost``) but resolves names itself: build it with
    ``transport=guarded_transport(...)`` to keep the full check. Concurrency-safe.
    """
    if max_bytes < 1:
        raise ValueError(f"max_bytes must be positive, not {max_bytes!r}")
    policy = AddressPolicy.of(allow_private=allow_private, allowed=allowed)

    async def run(input: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        url: str = input["url"]
        try:
            scheme = httpx.URL(url).scheme
        except httpx.InvalidURL as exc:
            return ToolOutput(f"invalid URL {url!r}: {exc}", is_error=True)
        if scheme not in ("http", "https"):
            return ToolOutput(
                f"only http and https URLs can be fetched, not {url!r}", is_error=True
            )
        try:
            async with _client(http_client, policy) as client:
                return await _fetch(client, url, max_bytes, policy)
        except AddressRefused as exc:
            return ToolOutput(str(exc), is_error=True)
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
