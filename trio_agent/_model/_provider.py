"""The provider seam: what one model API says, and nothing else.

Every HTTP model client is a :class:`~._client.ProviderClient` over one
:class:`Provider`: the client holds the credentials and the settings, and implements
``stream()`` and ``create()`` once (the request, retries, reads, idle watchdog and
limits of :mod:`._http_stream`); the provider says what differs from one API to
another, purely (no I/O):

- :meth:`Provider.request_body`: the JSON body of a canonical :class:`ModelRequest`;
- :meth:`Provider.decoder`: how one SSE event's data becomes canonical (Messages API)
  stream events for the shared :class:`MessageAccumulator`;
- :meth:`Provider.answer`: the canonical message of a non-streaming answer;
- :attr:`Provider.path`, :meth:`Provider.error_from_response`,
  :meth:`Provider.retryable_in_stream`, :attr:`Provider.request_id_headers`,
  :attr:`Provider.end`: where the request goes, how errors are typed, where the
  request id is, what a complete stream ends with.

Adding a provider is one module: a :class:`Provider` and a ``ProviderClient`` subclass
that says which headers carry the credentials (``_anthropic.py`` is the example).
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import attrs
import httpx

from .._exceptions import (
    APIConnectionError,
    APIStatusError,
    StreamIdleTimeoutError,
    StreamTruncatedError,
)
from .._messages import AssistantMessage
from .._retry import RetryPolicy
from ._accumulate import MessageAccumulator, StreamLimits
from ._errors_http import error_from_response
from ._protocol import CacheTTL, MessageLike, SystemLike, ToolLike

__all__ = ["EventDecoder", "ModelRequest", "Provider", "ProviderEdge"]


@attrs.frozen
class ModelRequest:
    """One request in canonical terms: what ``stream()`` and ``create()`` were given.

    Attributes:
        extra_body: request fields the library does not model, merged into the body
            as they are (after the modelled fields, before ``stream``).
        cache: the TTL of the prompt-cache breakpoints the provider marks (None:
            none); a provider whose API caches on its own ignores it.
        output_schema: the JSON Schema the final answer's text must be JSON of, in
            the provider's structured output (None: free text).
    """

    model: str
    messages: Sequence[MessageLike]
    max_tokens: int
    system: SystemLike = None
    tools: Sequence[ToolLike] | None = None
    extra_body: Mapping[str, Any] | None = None
    cache: CacheTTL | None = None
    output_schema: Mapping[str, Any] | None = None


class EventDecoder(Protocol):
    """One attempt's translation of SSE event data into canonical stream events."""

    def translate(self, data: str) -> Sequence[dict[str, Any]]:
        """The canonical events one SSE event's data stands for (maybe none).

        Raises:
            TrioAgentError: bad data (typed: limit, protocol, an in-stream API error).
        """
        ...

    def events(self) -> int:
        """SSE events read so far."""
        ...

    def statistics(self) -> tuple[int, int, int]:
        """``(events, pings, ignored)`` for :class:`StreamStatistics`."""
        ...


class Provider(abc.ABC):
    """One model API's side of the seam (see the module docstring).

    Attributes:
        path: where the requests go, under the client's ``base_url``.
        request_id_headers: the answer headers that carry the request id, in order.
        end: what a complete stream ends with (for the truncation message).
    """

    path: str
    request_id_headers: tuple[str, ...] = ("request-id",)
    end: str = "message_stop"

    def supports_output_schema(self, model: str) -> bool:
        """Whether *model* takes ``ModelRequest.output_schema`` (structured output)."""
        return False

    @abc.abstractmethod
    def request_body(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        """The JSON body of *request*, streamed or not (``"stream"`` says which).

        Raises:
            InvalidRequestError: the request cannot be said in this API's terms.
        """

    @abc.abstractmethod
    def decoder(self, accumulator: MessageAccumulator) -> EventDecoder:
        """A fresh decoder for one attempt, feeding *accumulator*."""

    @abc.abstractmethod
    def answer(self, data: Any, limits: StreamLimits) -> AssistantMessage:
        """A non-streaming answer's decoded JSON as the canonical message.

        Raises:
            ValueError, TypeError, KeyError, AttributeError, StreamProtocolError:
                *data* is not an answer.
        """

    def error_from_response(
        self,
        status_code: int,
        content: bytes,
        *,
        headers: Mapping[str, str] | None = None,
        request_id: str | None = None,
    ) -> APIStatusError:
        """The typed error for an HTTP error answer (typed by its status)."""
        return error_from_response(status_code, content, headers=headers, request_id=request_id)

    @abc.abstractmethod
    def retryable_in_stream(self, exc: APIStatusError) -> bool:
        """Whether an error inside a 200 stream is worth another attempt."""


@attrs.frozen
class ProviderEdge:
    """One request's edge: where it goes, its headers, and the provider's rules.

    Attributes:
        url: where the request is POSTed.
        headers: its headers (the credentials included: never logged).
        provider: how its body, events, answer and errors are read.
    """

    url: str
    headers: Mapping[str, str] = attrs.field(repr=False)
    provider: Provider

    def request_id(self, headers: httpx.Headers) -> str | None:
        """The request id an answer's *headers* carry (the first non-empty one)."""
        names = self.provider.request_id_headers
        return next((value for n in names if (value := headers.get(n))), None)

    def retryable(self, exc: Exception, policy: RetryPolicy) -> bool:
        """Whether *exc*, met before any content was handed out, is worth a retry."""
        # A read error or a body cut before any content (StreamTruncatedError) is as
        # harmless to retry as a connection error before the headers.
        if isinstance(exc, (APIConnectionError, StreamIdleTimeoutError, StreamTruncatedError)):
            return True
        if isinstance(exc, APIStatusError):
            if exc.status_code is None:  # an error inside the stream
                return self.provider.retryable_in_stream(exc)
            return policy.should_retry(exc.status_code, exc.headers)
        return False
