"""AnthropicClient: the Messages API over httpx + httpx-sse, streamed safely under Trio.

Example::

    # reads ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) / ANTHROPIC_BASE_URL
    async with trio_agent.AnthropicClient() as client:  # one connection pool
        async with client.stream(model="claude-sonnet-4-5", max_tokens=1024,
                                 messages=[trio_agent.UserMessage("Hi")]) as items:
            async for item in items:
                if isinstance(item, trio_agent.StreamEvent) and item.text_delta:
                    print(item.text_delta, end="")
                elif isinstance(item, trio_agent.StreamResult):
                    print(item.message.stop_reason, item.ttft)

The request, retries, reads, idle watchdog and limits are those of every provider
(:func:`open_http_stream`); this module says only what is Anthropic's: the URL, the
headers, the typed errors, and that the events need no translation.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from typing import Any, cast, final

import attrs
import httpx
import trio

from .._exceptions import APIStatusError, AuthenticationError
from .._messages import AssistantMessage, ContentBlock, OpaqueBlock, UserMessage
from .._tools import Tool
from ._accumulate import MessageAccumulator, StreamLimits
from ._create import create_with_retries
from ._errors_http import RETRYABLE_ERROR_TYPES, error_from_response
from ._http_stream import ProviderEdge, open_http_stream
from ._pool import HTTPPool, PooledClient
from ._protocol import RetryObserver
from .._retry import RetryPolicy
from ._stream import StreamItem, StreamResult

__all__ = ["DEFAULT_BASE_URL", "AnthropicClient"]

DEFAULT_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"


#: Block types another provider wrote that mean nothing to Anthropic, left out of a
#: request: an OpenAI ``reasoning`` item (an :class:`OpaqueBlock`) is state only OpenAI
#: can read, as a ``ThinkingBlock``'s signature only Anthropic can check (OpenAIClient
#: leaves those out). The Messages API has no block of these types.
_FOREIGN_BLOCK_TYPES = frozenset({"reasoning"})


def _foreign(block: ContentBlock) -> bool:
    return isinstance(block, OpaqueBlock) and block.type in _FOREIGN_BLOCK_TYPES


def _message_params(messages: Sequence[Any]) -> list[dict[str, Any]]:
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


def _retryable_in_stream(exc: APIStatusError) -> bool:
    return exc.error_type in RETRYABLE_ERROR_TYPES


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
class AnthropicClient(PooledClient):
    """A streaming client for the Anthropic Messages API.

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
        if idle_timeout <= 0 or stall_timeout <= 0 or connect_timeout <= 0:
            raise ValueError("timeouts must be positive")
        self._api_key = api_key if api_key is not None else os.environ.get("ANTHROPIC_API_KEY")
        self._auth_token = (
            auth_token if auth_token is not None else os.environ.get("ANTHROPIC_AUTH_TOKEN")
        )
        self.base_url = (
            base_url or os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL
        ).rstrip("/")
        self._pool = HTTPPool(http_client, connect_timeout=connect_timeout, owner="AnthropicClient")
        self.retry = retry if retry is not None else RetryPolicy()
        self.idle_timeout = idle_timeout
        self.stall_timeout = stall_timeout
        self.connect_timeout = connect_timeout
        self.limits = limits if limits is not None else StreamLimits()
        self.default_headers = dict(default_headers or {})

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

    @staticmethod
    def build_request_body(
        *,
        model: str,
        messages: Sequence[UserMessage | AssistantMessage | Mapping[str, Any]],
        max_tokens: int,
        system: str | Sequence[Mapping[str, Any]] | None = None,
        tools: Sequence[Tool | Mapping[str, Any]] | None = None,
        **params: Any,
    ) -> dict[str, Any]:
        """The JSON body of a streaming Messages API request.

        Blocks another provider wrote that the Messages API has no form for are left
        out (an OpenAI ``reasoning`` item), so a history
        can move from :class:`OpenAIClient` to this client mid-conversation.
        """
        body: dict[str, Any] = {
            "model": model,
            "max_tokens": max_tokens,
            "messages": _message_params(messages),
        }
        if system is not None:
            body["system"] = system if isinstance(system, str) else [dict(s) for s in system]
        if tools:
            body["tools"] = [_tool_param(t) for t in tools]
        body.update(params)
        body["stream"] = True
        return body

    def stream(
        self,
        *,
        model: str,
        messages: Sequence[UserMessage | AssistantMessage | Mapping[str, Any]],
        max_tokens: int,
        system: str | Sequence[Mapping[str, Any]] | None = None,
        tools: Sequence[Tool | Mapping[str, Any]] | None = None,
        on_retry: RetryObserver | None = None,
        **params: Any,
    ) -> contextlib.AbstractAsyncContextManager[trio.abc.ReceiveChannel[StreamItem]]:
        """Stream one answer: ``async with client.stream(...) as items:``.

        Yields every :class:`StreamEvent` as it arrives; at each ``content_block_stop``
        an :class:`AssistantMessage` holding just the finished block; and last a
        :class:`StreamResult` with the whole message, TTFT and statistics.

        *on_retry* is called with the error before each retry; when it returns
        False the error is raised instead.

        Raises:
            AuthenticationError: no credentials (on entering the block, before
                anything is sent), or a 401 answer.
            ClientClosedError: the client was closed (on entering the block).
            APIStatusError: an HTTP error or in-stream ``error`` event (typed by status
                or error type), after the retries the policy allows.
            APIConnectionError: no response, after the retries.
            StreamIdleTimeoutError: no byte for ``idle_timeout`` seconds.
            StreamTruncatedError: the stream ended before ``message_stop``.
            StreamProtocolError: not an SSE response, or an event broke the protocol.
            StreamLimitError: an event, a tool input or the block count was too big.
        """
        body = self.build_request_body(
            model=model,
            messages=messages,
            max_tokens=max_tokens,
            system=system,
            tools=tools,
            **params,
        )
        return open_http_stream(self, self._edge, body, self._pool, on_retry)

    def _edge(self) -> ProviderEdge:
        return ProviderEdge(
            url=f"{self.base_url}/v1/messages",
            headers=self._headers(),
            error_from_response=error_from_response,
            retryable_in_stream=_retryable_in_stream,
            decoder=_MessagesDecoder,
        )

    async def create(
        self,
        *,
        model: str,
        messages: Sequence[UserMessage | AssistantMessage | Mapping[str, Any]],
        max_tokens: int,
        system: str | Sequence[Mapping[str, Any]] | None = None,
        tools: Sequence[Tool | Mapping[str, Any]] | None = None,
        on_retry: RetryObserver | None = None,
        **params: Any,
    ) -> StreamResult:
        """One non-streaming request (``stream: false``): the whole answer at once.

        The loop's last resort after streamed attempts failed mid-stream (as Claude
        Code's non-streaming fallback). Retried like :meth:`stream`; the result has
        no TTFT and only the ``retries`` statistic.

        Raises:
            AuthenticationError: no credentials (before anything is sent), or a 401.
            ClientClosedError: the client was closed.
            APIStatusError: an HTTP error, after the retries the policy allows.
            APIConnectionError: no response, after the retries.
            APITimeoutError: no answer within 600 s.
            StreamProtocolError: the body is not a Messages API message.
        """
        body = self.build_request_body(
            model=model,
            messages=messages,
            max_tokens=max_tokens,
            system=system,
            tools=tools,
            **params,
        )
        body["stream"] = False
        edge = self._edge()  # no credentials: raised here, before anything is sent
        return await create_with_retries(self._pool, edge, body, self.retry, on_retry, _message)


def _message(data: Any) -> AssistantMessage:
    """A Messages API message object → the canonical message."""
    if not isinstance(data, dict) or data.get("type") != "message":
        raise ValueError("not a message object")
    return AssistantMessage.from_api(cast("dict[str, Any]", data))
