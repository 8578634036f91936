"""ProviderClient: ``stream()`` and ``create()`` once, for every HTTP model client.

A client is a :class:`Provider` (what its API says, ``_provider.py``) plus the
credentials its subclass turns into headers (:meth:`ProviderClient._headers`) and the
settings here. :meth:`ProviderClient.stream` is the read path of :mod:`._http_stream`;
:meth:`ProviderClient.create` is one non-streaming request (``stream: false``),
retried as a stream is: the loop's last resort after streamed attempts failed
mid-stream. The POST, the timeout, the typed errors and the retries are the same for
every provider.
"""

from __future__ import annotations

import abc
import contextlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
import trio

from .._exceptions import APIError, APIStatusError, APITimeoutError, StreamProtocolError, excerpt
from .._retry import RetryPolicy
from ._accumulate import StreamLimits
from ._http_stream import MAX_ERROR_BODY, open_http_stream, request_errors
from ._pool import HTTPPool, PooledClient
from ._protocol import CacheTTL, MessageLike, RetryObserver, SystemLike, ToolLike
from ._provider import ModelRequest, Provider, ProviderEdge
from ._stream import StreamItem, StreamResult, StreamStatistics

__all__ = ["CREATE_TIMEOUT", "ProviderClient"]

#: How long the non-streaming last resort may take (the SDK's default timeout).
CREATE_TIMEOUT = 600.0
logger = logging.getLogger("trio_agent.client")


class ProviderClient(PooledClient, abc.ABC):
    """A streaming model client over one :class:`Provider`.

    Satisfies :class:`RecoverableModelClient`. ``async with client:`` shares one
    connection pool across its requests (:class:`PooledClient`).

    Args:
        provider: what the API says (body, events, answer, errors).
        base_url: the requests go to ``base_url + provider.path``.
        http_client, retry, idle_timeout, stall_timeout, connect_timeout, limits,
        default_headers: as for :class:`AnthropicClient`.
    """

    def __init__(
        self,
        provider: Provider,
        *,
        base_url: str,
        http_client: httpx.AsyncClient | None,
        retry: RetryPolicy | None,
        idle_timeout: float,
        stall_timeout: float,
        connect_timeout: float,
        limits: StreamLimits | None,
        default_headers: Mapping[str, str] | None,
    ) -> None:
        if idle_timeout <= 0 or stall_timeout <= 0 or connect_timeout <= 0:
            raise ValueError("timeouts must be positive")
        self.provider = provider
        self.base_url = base_url.rstrip("/")
        self._pool = HTTPPool(
            http_client, connect_timeout=connect_timeout, owner=type(self).__name__
        )
        self.retry = retry if retry is not None else RetryPolicy()
        self.idle_timeout = idle_timeout
        self.stall_timeout = stall_timeout
        self.connect_timeout = connect_timeout
        self.limits = limits if limits is not None else StreamLimits()
        self.default_headers = dict(default_headers or {})

    @property
    def url(self) -> str:
        """Where the requests go."""
        return self.base_url + self.provider.path

    @abc.abstractmethod
    def _headers(self) -> dict[str, str]:
        """The request headers, the credentials included.

        Raises:
            AuthenticationError: no credentials; nothing was sent.
        """

    def _edge(self) -> ProviderEdge:
        return ProviderEdge(url=self.url, headers=self._headers(), provider=self.provider)

    def supports_output_schema(self, model: str) -> bool:
        """Whether requests for *model* may ask for structured output
        (``output_schema=``); ``TurnOptions(output_mode="auto")`` reads it."""
        return self.provider.supports_output_schema(model)

    def build_request_body(
        self,
        *,
        model: str,
        messages: Sequence[MessageLike],
        max_tokens: int,
        system: SystemLike = None,
        tools: Sequence[ToolLike] | None = None,
        extra_body: Mapping[str, Any] | None = None,
        cache: CacheTTL | None = None,
        output_schema: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The JSON body of a streaming request, converted from the canonical values.

        Raises:
            InvalidRequestError: the history holds a block the API cannot take.
        """
        request = ModelRequest(
            model, messages, max_tokens, system, tools, extra_body, cache, output_schema
        )
        return self.provider.request_body(request, stream=True)

    def stream(
        self,
        *,
        model: str,
        messages: Sequence[MessageLike],
        max_tokens: int,
        system: SystemLike = None,
        tools: Sequence[ToolLike] | None = None,
        extra_body: Mapping[str, Any] | None = None,
        cache: CacheTTL | None = None,
        on_retry: RetryObserver | None = None,
        output_schema: Mapping[str, Any] | None = None,
    ) -> contextlib.AbstractAsyncContextManager[trio.abc.ReceiveChannel[StreamItem]]:
        """Stream one answer: ``async with client.stream(...) as items:``.

        Yields every :class:`StreamEvent` as it arrives (translated into Messages API
        events for another API); at each ``content_block_stop`` an
        :class:`AssistantMessage` holding just the finished block, the moment it is
        complete; and last a :class:`StreamResult` with the whole message, TTFT and
        statistics.

        *extra_body* holds request fields the library does not model, merged into the
        body as they are. *cache* marks prompt-cache breakpoints with that TTL
        (where the provider's API takes them). *on_retry* is called with the error before each retry; when
        it returns False the error is raised instead. *output_schema* asks the
        provider's structured output for a final answer whose text is JSON of that
        schema (see :meth:`supports_output_schema`).

        Raises:
            InvalidRequestError: the history cannot be said in the API's terms
                (raised here, before any request).
            AuthenticationError: no credentials (on entering the block, before
                anything is sent), or a 401 answer.
            ClientClosedError: the client was closed (on entering the block).
            APIStatusError: an HTTP error or an error inside the stream (typed by
                status or error type), after the retries the policy allows.
            APIConnectionError: no response, after the retries.
            StreamIdleTimeoutError: no byte for ``idle_timeout`` seconds.
            StreamTruncatedError: the stream ended before it was complete.
            StreamProtocolError: not an SSE response, or an event broke the protocol.
            StreamLimitError: an event, a tool input or the block count was too big.
        """
        body = self.build_request_body(
            model=model,
            messages=messages,
            max_tokens=max_tokens,
            system=system,
            tools=tools,
            extra_body=extra_body,
            cache=cache,
            output_schema=output_schema,
        )
        return open_http_stream(self, self._edge, body, self._pool, on_retry)

    async def create(
        self,
        *,
        model: str,
        messages: Sequence[MessageLike],
        max_tokens: int,
        system: SystemLike = None,
        tools: Sequence[ToolLike] | None = None,
        extra_body: Mapping[str, Any] | None = None,
        cache: CacheTTL | None = None,
        on_retry: RetryObserver | None = None,
        output_schema: Mapping[str, Any] | None = None,
    ) -> StreamResult:
        """One non-streaming request (``stream: false``): the whole answer at once.

        The loop's last resort after streamed attempts failed mid-stream (as Claude
        Code's non-streaming fallback). Retried like :meth:`stream`; the result has
        no TTFT and only the ``retries`` statistic.

        Raises:
            InvalidRequestError: the history cannot be said in the API's terms.
            AuthenticationError: no credentials (before anything is sent), or a 401.
            ClientClosedError: the client was closed.
            APIStatusError: an HTTP error (or a failed response), after the retries
                the policy allows.
            APIConnectionError: no response, after the retries.
            APITimeoutError: no answer within :data:`CREATE_TIMEOUT` (600) seconds.
            StreamProtocolError: the body is not an answer of the API.
        """
        request = ModelRequest(
            model, messages, max_tokens, system, tools, extra_body, cache, output_schema
        )
        body = self.provider.request_body(request, stream=False)
        edge = self._edge()  # no credentials: raised here, before anything is sent
        retry = self.retry
        async with self._pool.http() as http:
            retries = 0
            while True:
                try:
                    return await self._create_once(http, edge, body, retries)
                except APIError as exc:
                    if (
                        retries >= retry.max_retries
                        or not edge.retryable(exc, retry)
                        or (on_retry is not None and not on_retry(exc))
                    ):
                        raise
                    headers = exc.headers if isinstance(exc, APIStatusError) else None
                    delay = retry.delay(retries, headers)
                    retries += 1
                    logger.info("non-streaming retry %d in %.3fs after %r", retries, delay, exc)
                    await trio.sleep(delay)

    async def _create_once(
        self, http: httpx.AsyncClient, edge: ProviderEdge, body: dict[str, Any], retries: int
    ) -> StreamResult:
        response: httpx.Response | None = None
        with trio.move_on_after(CREATE_TIMEOUT), request_errors():
            response = await http.post(edge.url, json=body, headers=dict(edge.headers))
        if response is None:
            raise APITimeoutError(f"no answer within {CREATE_TIMEOUT}s")
        request_id = edge.request_id(response.headers)
        if not response.is_success:
            raise edge.provider.error_from_response(
                response.status_code,
                response.content[:MAX_ERROR_BODY],
                headers=dict(response.headers),
                request_id=request_id,
            )
        try:
            message = edge.provider.answer(response.json(), self.limits)
        except (ValueError, TypeError, KeyError, AttributeError, StreamProtocolError) as exc:
            raise StreamProtocolError(
                f"the non-streaming answer is not a message: {excerpt(response.content)}"
                + (f" (request id {request_id})" if request_id else "")
            ) from exc
        return StreamResult(
            message=message,
            ttft=None,
            statistics=StreamStatistics(retries=retries),
            request_id=request_id,
        )
