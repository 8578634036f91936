"""One non-streaming request (``stream: false``), retried: every provider's ``create``.

The loop's last resort after streamed attempts failed mid-stream. The provider says
where and how (its :class:`ProviderEdge`) and how its answer's JSON becomes the
canonical :class:`AssistantMessage`; the POST, the timeout, the typed errors and the
retries are the same for all.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import httpx
import trio

from .._exceptions import (
    APIError,
    APIStatusError,
    APITimeoutError,
    StreamProtocolError,
    excerpt,
)
from .._messages import AssistantMessage
from ._http_stream import MAX_ERROR_BODY, ProviderEdge, request_errors, retryable
from ._pool import HTTPPool
from ._protocol import RetryObserver
from .._retry import RetryPolicy
from ._stream import StreamResult, StreamStatistics

__all__ = ["CREATE_TIMEOUT", "create_with_retries"]

#: How long the non-streaming last resort may take (the SDK's default timeout).
CREATE_TIMEOUT = 600.0
logger = logging.getLogger("trio_agent.client")

#: The answer's decoded JSON → the canonical message (raises ValueError, TypeError,
#: KeyError, AttributeError or StreamProtocolError when it is not an answer).
ParseAnswer = Callable[[Any], AssistantMessage]


async def create_with_retries(
    pool: HTTPPool,
    edge: ProviderEdge,
    body: dict[str, Any],
    retry: RetryPolicy,
    on_retry: RetryObserver | None,
    parse: ParseAnswer,
) -> StreamResult:
    """POST *body* (``stream: false``) and parse the answer, retried as a stream is.

    Raises:
        ClientClosedError: the client was closed.
        APIStatusError: an HTTP error (typed by the edge), after the retries allowed.
        APIConnectionError: no response, after the retries.
        APITimeoutError: no answer within :data:`CREATE_TIMEOUT` seconds.
        StreamProtocolError: the body is not an answer.
    """
    async with pool.http() as http:
        retries = 0
        while True:
            try:
                return await _create_once(http, edge, body, retries, parse)
            except APIError as exc:
                if (
                    retries >= retry.max_retries
                    or not retryable(exc, retry, edge)
                    or (on_retry is not None and not on_retry(exc))
                ):
                    raise
                headers = exc.headers if isinstance(exc, APIStatusError) else None
                delay = retry.delay(retries, headers)
                retries += 1
                logger.info("non-streaming retry %d in %.3fs after %r", retries, delay, exc)
                await trio.sleep(delay)


async def _create_once(
    http: httpx.AsyncClient,
    edge: ProviderEdge,
    body: dict[str, Any],
    retries: int,
    parse: ParseAnswer,
) -> StreamResult:
    response: httpx.Response | None = None
    with trio.move_on_after(CREATE_TIMEOUT), request_errors():
        response = await http.post(edge.url, json=body, headers=dict(edge.headers))
    if response is None:
        raise APITimeoutError(f"no answer within {CREATE_TIMEOUT}s")
    request_id = edge.request_id(response.headers)
    if not response.is_success:
        raise edge.error_from_response(
            response.status_code,
            response.content[:MAX_ERROR_BODY],
            headers=dict(response.headers),
            request_id=request_id,
        )
    try:
        message = parse(response.json())
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
