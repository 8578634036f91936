"""The WebFetch tool: GET a URL and show its text."""

from __future__ import annotations

import codecs
import contextlib
from collections.abc import AsyncGenerator, Mapping
from typing import Any

import httpx

from .._tools import Tool, ToolContext, ToolOutput

__all__ = ["WebFetch"]

_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "url": {"type": "string", "description": "An http:// or https:// URL."},
    },
    "required": ["url"],
    "additionalProperties": False,
}

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
async def _client(http_client: httpx.AsyncClient | None) -> AsyncGenerator[httpx.AsyncClient]:
    if http_client is not None:
        yield http_client
    else:
        async with httpx.AsyncClient(timeout=httpx.Timeout(30.0)) as client:
            yield client


async def _fetch(client: httpx.AsyncClient, url: str, max_bytes: int) -> ToolOutput:
    body = bytearray()
    truncated = False
    async with client.stream("GET", url, follow_redirects=True) as response:
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > max_bytes:
                truncated = True
                del body[max_bytes:]
                break
    content_type = response.headers.get("content-type", "")
    head = (
        f"URL: {response.url}\nStatus: {response.status_code} {response.reason_phrase}\n"
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


def WebFetch(*, http_client: httpx.AsyncClient | None = None, max_bytes: int = 100_000) -> Tool:
    """The WebFetch tool: ``{url}`` → status, content type and body text.

    Redirects are followed; at most *max_bytes* of the body are read. An HTTP error
    status (4xx, 5xx), a network error or a bad URL is an error result. With no
    *http_client*, each call opens (and closes) its own client with a 30 s timeout.
    Concurrency-safe.
    """
    if max_bytes < 1:
        raise ValueError(f"max_bytes must be positive, not {max_bytes!r}")

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
            async with _client(http_client) as client:
                return await _fetch(client, url, max_bytes)
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
