"""AnthropicClient: the Messages API over httpx + httpx-sse, streamed safely under Trio.

Example::

    # reads ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) / ANTHROPIC_BASE_URL
    async with trio_agent.AnthropicClient() as client:  # one connection pool
        async with client.stream(model="claude-sonnet-4-5", max_tokens=1024,
                                 messages=[trio_agent.UserMessage("Hi")]) as items:
            async for item in items:
                if isinstance(item, trio_agent.lowlevel.StreamEvent) and item.text_delta:
                    print(item.text_delta, end="")
                elif isinstance(item, trio_agent.lowlevel.StreamResult):
                    print(item.message.stop_reason, item.ttft)

``stream()`` and ``create()`` are those of every provider (:class:`ProviderClient`:
the request, retries, reads, idle watchdog and limits); this module says only what is
Anthropic's: the body (:class:`MessagesProvider`), that the events need no
translation, the path, the typed errors, and the credentials' headers.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, cast, final

import attrs
import httpx

from .._exceptions import APIStatusError, AuthenticationError
from .._messages import AssistantMessage, ContentBlock, OpaqueBlock, UserMessage
from .._retry import RetryPolicy
from .._tools import Tool
from ._accumulate import MessageAccumulator, StreamLimits
from ._client import ProviderClient
from ._errors_http import RETRYABLE_ERROR_TYPES
from ._protocol import MessageLike
from ._provider import ModelRequest, Provider

__all__ = ["DEFAULT_BASE_URL", "AnthropicClient", "MessagesProvider"]

DEFAULT_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"


#: Block types another provider wrote that mean nothing to Anthropic, left out of a
#: request: an OpenAI ``reasoning`` item (an :class:`OpaqueBlock`) is state only OpenAI
#: can read, as a ``ThinkingBlock``'s signature only Anthropic can check (OpenAIClient
#: leaves those out). The Messages API has no block of these types.
_FOREIGN_BLOCK_TYPES = frozenset({"reasoning"})


def _foreign(block: ContentBlock) -> bool:
    return isinstance(block, OpaqueBlock) and block.type in _FOREIGN_BLOCK_TYPES


def _message_params(messages: Sequence[MessageLike]) -> list[dict[str, Any]]:
    """The wire form of *messages*; an assistant message's foreign blocks left out (and
    the message itself, if nothing else was in it: the API joins the turns around it)."""
    params: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, AssistantMessage) and any(_foreign(b) for b in message.content):
            kept = tuple(b for b in message.content if not _foreign(b))
            if not kept:
                continue
            message = attrs.evolve(message, content=kept)
        params.append(_message_param(message))
    return params


def _message_param(message: Any) -> dict[str, Any]:
    if isinstance(message, (UserMessage, AssistantMessage)):
        return message.to_param()
    if isinstance(message, Mapping):
        return dict(message)
    raise TypeError(f"a message must be a UserMessage, AssistantMessage or dict, not {message!r}")


def _tool_param(tool: Any) -> dict[str, Any]:
    if isinstance(tool, Tool):
        return tool.to_api()
    if isinstance(tool, Mapping):
        return dict(tool)
    raise TypeError(f"a tool must be a Tool or dict, not {tool!r}")


@final
class _MessagesDecoder:
    """Messages API events are already canonical: decoded, never translated."""

    def __init__(self, accumulator: MessageAccumulator) -> None:
        self._accumulator = accumulator
        self._decode = accumulator.decode

    def translate(self, data: str) -> tuple[dict[str, Any]]:
        return (self._decode(data),)

    def events(self) -> int:
        return self._accumulator.statistics().events

    def statistics(self) -> tuple[int, int, int]:
        stats = self._accumulator.statistics()
        return stats.events, stats.pings, stats.ignored


@final
class MessagesProvider(Provider):
    """The Anthropic Messages API (``POST /v1/messages``) as a :class:`Provider`."""

    path = "/v1/messages"

    def request_body(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        """The JSON body of a Messages API request.

        Blocks another provider wrote that the Messages API has no form for are left
        out (an OpenAI ``reasoning`` item), so a history can move from
        :class:`OpenAIClient` to this client mid-conversation.
        """
        body: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens,
            "messages": _message_params(request.messages),
        }
        system = request.system
        if system is not None:
            body["system"] = system if isinstance(system, str) else [dict(s) for s in system]
        if request.tools:
            body["tools"] = [_tool_param(t) for t in request.tools]
        if request.extra_body:
            body.update(request.extra_body)
        body["stream"] = stream
        return body

    def decoder(self, accumulator: MessageAccumulator) -> _MessagesDecoder:
        return _MessagesDecoder(accumulator)

    def answer(self, data: Any, limits: StreamLimits) -> AssistantMessage:
        """A Messages API message object → the canonical message."""
        if not isinstance(data, dict) or data.get("type") != "message":
            raise ValueError("not a message object")
        return AssistantMessage.from_api(cast("dict[str, Any]", data))

    def retryable_in_stream(self, exc: APIStatusError) -> bool:
        return exc.error_type in RETRYABLE_ERROR_TYPES


@final
class AnthropicClient(ProviderClient):
    """A streaming client for the Anthropic Messages API (a :class:`ProviderClient`
    over :class:`MessagesProvider`: ``stream()``, ``create()``, ``build_request_body()``).

    ``async with AnthropicClient() as client:`` shares one connection pool across
    every stream and :meth:`create` until the block ends (then the client is closed);
    without it, each request opens and closes its own connections. :meth:`aclose`
    closes the client; a closed client refuses requests with
    :class:`ClientClosedError`.

    Without credentials (no *api_key*, *auth_token*, ``$ANTHROPIC_API_KEY`` nor
    ``$ANTHROPIC_AUTH_TOKEN``, and no ``x-api-key``/``authorization`` in
    *default_headers*), each request raises :class:`AuthenticationError` before
    anything is sent, as the official SDK does.

    Args:
        api_key: sent as ``x-api-key``; defaults to ``$ANTHROPIC_API_KEY``. Never shown
            in a repr, log line or exception.
        auth_token: sent as ``Authorization: Bearer``; defaults to
            ``$ANTHROPIC_AUTH_TOKEN`` (both are sent when both are set, as the SDK
            does). Never shown either.
        base_url: defaults to ``$ANTHROPIC_BASE_URL``, else ``https://api.anthropic.com``.
        http_client: an ``httpx.AsyncClient`` to use for every request and never
            close, e.g. for a custom transport; by default the client opens its own
            (one shared pool while entered, else one per request).
        retry: when and how long to wait before retrying.
        idle_timeout: seconds without any byte (pings included) before an attempt is
            abandoned with :class:`StreamIdleTimeoutError` (or :class:`APITimeoutError`
            while waiting for the response headers).
        stall_timeout: gaps longer than this between non-ping events are counted and
            timed as stalls in :class:`StreamStatistics`.
        connect_timeout: the TCP/TLS connect timeout of the client this class opens.
        limits: bounds on event size, tool input size and block count.
        default_headers: extra request headers (e.g. ``anthropic-beta``).
    """

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        http_client: httpx.AsyncClient | None = None,
        *,
        retry: RetryPolicy | None = None,
        idle_timeout: float = 90.0,
        stall_timeout: float = 30.0,
        connect_timeout: float = 10.0,
        limits: StreamLimits | None = None,
        default_headers: Mapping[str, str] | None = None,
        auth_token: str | None = None,
    ) -> None:
        super().__init__(
            MessagesProvider(),
            base_url=base_url or os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL,
            http_client=http_client,
            retry=retry,
            idle_timeout=idle_timeout,
            stall_timeout=stall_timeout,
            connect_timeout=connect_timeout,
            limits=limits,
            default_headers=default_headers,
        )
        self._api_key = api_key if api_key is not None else os.environ.get("ANTHROPIC_API_KEY")
        self._auth_token = (
            auth_token if auth_token is not None else os.environ.get("ANTHROPIC_AUTH_TOKEN")
        )

    def __repr__(self) -> str:
        key = "None" if self._api_key is None else "'<redacted>'"
        token = "" if self._auth_token is None else ", auth_token='<redacted>'"
        return f"AnthropicClient(base_url={self.base_url!r}, api_key={key}{token})"

    @property
    def has_api_key(self) -> bool:
        """Whether an API key is configured (the key itself is never exposed)."""
        return bool(self._api_key)

    @property
    def has_credentials(self) -> bool:
        """Whether a request would carry credentials: an API key, an auth token, or
        an ``x-api-key``/``authorization`` header of *default_headers*."""
        given = {name.lower() for name in self.default_headers}
        return bool(self._api_key or self._auth_token or given & {"x-api-key", "authorization"})

    def _headers(self) -> dict[str, str]:
        """The request headers.

        Raises:
            AuthenticationError: no credentials at all; nothing was sent.
        """
        if not self.has_credentials:
            raise AuthenticationError(
                "no Anthropic credentials: pass api_key= (or auth_token=), or set"
                " ANTHROPIC_API_KEY (sent as x-api-key) or ANTHROPIC_AUTH_TOKEN (sent as"
                " Authorization: Bearer); both were looked at and neither is set."
                " Nothing was sent.",
                status_code=None,
                error_type="authentication_error",
            )
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        # As in the SDK, a header of default_headers wins over the key or token
        # (names compared case-insensitively: one header is sent, never two).
        if self._api_key:
            headers["x-api-key"] = self._api_key
        if self._auth_token:
            headers["authorization"] = f"Bearer {self._auth_token}"
        for name, value in self.default_headers.items():
            headers.pop(name.lower(), None)
            headers[name] = value
        return headers
