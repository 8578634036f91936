"""OpenAIClient: the Responses and Chat Completions APIs on the same streaming stack.

Example::

    client = trio_agent.OpenAIClient()  # reads OPENAI_API_KEY / OPENAI_BASE_URL
    async with trio_agent.query(client, [trio_agent.UserMessage("Hi")], tools=tools,
                                model="gpt-5", max_tokens=4096) as events:
        ...

    local = trio_agent.OpenAIClient(api_key="local", base_url="http://localhost:8000/v1",
                                    api="chat")

The client satisfies :class:`ModelClient` exactly as :class:`AnthropicClient` does,
and is built from the same parts: httpx + the SSE parser and response reader of
:mod:`._sse`, :class:`RetryPolicy`, the idle watchdog and :class:`StallMeter`,
:class:`StreamLimits` and the typed errors. It takes the canonical history and tools
(converted at this edge, :mod:`._openai_convert`) and yields canonical items: OpenAI's
events are translated (:mod:`._openai_events`) into Messages API events fed to the
same :class:`MessageAccumulator`, so a function call reaches the executor the moment
it is complete (``response.output_item.done`` for the Responses API).

The request, retries, reads, idle watchdog and limits are those of every provider
(:func:`open_http_stream`: read in the receiving task, the items of each network read
handed over together, a retry invisible before the first content event); this module
says only what is OpenAI's: the URL, the headers, the typed errors and the translator.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from typing import Any, Literal, final

import httpx
import trio

from .._exceptions import AuthenticationError, StreamProtocolError
from .._messages import AssistantMessage, UserMessage
from .._tools import Tool
from ._accumulate import MessageAccumulator, StreamLimits
from ._create import create_with_retries
from ._http_stream import ProviderEdge, open_http_stream
from ._openai_convert import OpenAIAPI, chat_body, responses_body
from ._openai_errors import openai_error_from_response, retryable_in_stream
from ._openai_events import (
    ChatEvents,
    ResponsesEvents,
    chat_completion_chunks,
    decode_openai,
    responses_object_events,
)
from ._pool import HTTPPool, PooledClient
from ._protocol import RetryObserver
from .._retry import RetryPolicy
from ._stream import StreamItem, StreamResult

__all__ = ["OPENAI_BASE_URL", "OpenAIClient"]

OPENAI_BASE_URL = "https://api.openai.com/v1"


@final
class OpenAIClient(PooledClient):
    """A streaming client for OpenAI's Responses or Chat Completions API (and the
    OpenAI-compatible servers: vLLM, llama.cpp, Ollama...).

    ``async with OpenAIClient() as client:`` shares one connection pool across
    streams, and :meth:`aclose` closes it, exactly as for :class:`AnthropicClient`.
    Unlike it, a missing key is refused here, at construction: an OpenAI client has
    no other credential to fall back on.

    Args:
        api_key: sent as ``Authorization: Bearer``; defaults to ``$OPENAI_API_KEY``.
            Without one, :class:`AuthenticationError` is raised here, before any
            request (a local server that needs none takes any string). Never shown in
            a repr, log line or exception.
        base_url: includes the API version, as in the openai SDK: defaults to
            ``$OPENAI_BASE_URL``, else ``https://api.openai.com/v1``
            (``http://localhost:8000/v1`` for a local server).
        http_client: an ``httpx.AsyncClient`` to use for every request and never
            close; by default the client opens its own (one shared pool while
            entered, else one per request).
        api: ``"responses"`` (``POST {base_url}/responses``) or ``"chat"``
            (``POST {base_url}/chat/completions``).
        retry, idle_timeout, stall_timeout, connect_timeout, limits, default_headers:
            as for :class:`AnthropicClient`.
        early_tool_start: Chat only: treat a new tool call index as the end of the
            previous call (for servers known to stream calls one after another);
            by default calls are complete at ``finish_reason``.
        max_tokens_field: Chat only: the body field that carries ``max_tokens``
            (``"max_completion_tokens"``, or ``"max_tokens"`` for older servers).
    """

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        http_client: httpx.AsyncClient | None = None,
        *,
        api: OpenAIAPI = "responses",
        retry: RetryPolicy | None = None,
        idle_timeout: float = 90.0,
        stall_timeout: float = 30.0,
        connect_timeout: float = 10.0,
        limits: StreamLimits | None = None,
        default_headers: Mapping[str, str] | None = None,
        early_tool_start: bool = False,
        max_tokens_field: Literal["max_completion_tokens", "max_tokens"] = "max_completion_tokens",
    ) -> None:
        if api not in ("responses", "chat"):
            raise ValueError(f"api must be 'responses' or 'chat', not {api!r}")
        if idle_timeout <= 0 or stall_timeout <= 0 or connect_timeout <= 0:
            raise ValueError("timeouts must be positive")
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        if not key:
            raise AuthenticationError(
                "no OpenAI API key: pass api_key= or set OPENAI_API_KEY"
                " (a local server that needs none takes any string)",
                status_code=None,
            )
        self._api_key = key
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_BASE_URL).rstrip(
            "/"
        )
        self._pool = HTTPPool(http_client, connect_timeout=connect_timeout, owner="OpenAIClient")
        self.api: OpenAIAPI = api
        self.retry = retry if retry is not None else RetryPolicy()
        self.idle_timeout = idle_timeout
        self.stall_timeout = stall_timeout
        self.connect_timeout = connect_timeout
        self.limits = limits if limits is not None else StreamLimits()
        self.default_headers = dict(default_headers or {})
        self.early_tool_start = early_tool_start
        self.max_tokens_field = max_tokens_field

    def __repr__(self) -> str:
        return f"OpenAIClient(api={self.api!r}, base_url={self.base_url!r}, api_key='<redacted>')"

    @property
    def has_api_key(self) -> bool:
        """Always True: a client is never built without a key."""
        return True

    @property
    def url(self) -> str:
        """Where the requests go."""
        path = "/responses" if self.api == "responses" else "/chat/completions"
        return self.base_url + path

    def build_request_body(
        self,
        *,
        model: str,
        messages: Sequence[UserMessage | AssistantMessage | Mapping[str, Any]],
        max_tokens: int,
        system: str | Sequence[Mapping[str, Any]] | None = None,
        tools: Sequence[Tool | Mapping[str, Any]] | None = None,
        **params: Any,
    ) -> dict[str, Any]:
        """The JSON body of a streaming request, converted from the canonical values.

        Raises:
            InvalidRequestError: the history holds a block OpenAI cannot take.
        """
        if self.api == "responses":
            return responses_body(
                model=model,
                messages=messages,
                max_tokens=max_tokens,
                system=system,
                tools=tools,
                **params,
            )
        return chat_body(
            model=model,
            messages=messages,
            max_tokens=max_tokens,
            system=system,
            tools=tools,
            max_tokens_field=self.max_tokens_field,
            **params,
        )

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

        Yields canonical items, as :meth:`AnthropicClient.stream` does: every
        (translated) :class:`StreamEvent`, each finished block as an
        :class:`AssistantMessage` the moment it is complete, and last a
        :class:`StreamResult`.

        *on_retry* is called with the error before each retry; when it returns
        False the error is raised instead.

        Raises:
            InvalidRequestError: the history cannot be said in OpenAI's terms
                (raised here, before any request).
            ClientClosedError: the client was closed (on entering the block).
            APIStatusError: an HTTP error (typed by its status) or an error inside
                the stream, after the retries the policy allows.
            APIConnectionError, StreamIdleTimeoutError, StreamTruncatedError,
            StreamProtocolError, StreamLimitError: as for :class:`AnthropicClient`.
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

        The loop's last resort after streamed attempts failed mid-stream, as
        :meth:`AnthropicClient.create`. The answer (a Responses ``response`` object or
        a ``chat.completion``) is translated by the same translator as a stream, so
        the message is the one the stream would have given. Retried like
        :meth:`stream`; the result has no TTFT and only the ``retries`` statistic.

        Raises:
            InvalidRequestError: the history cannot be said in OpenAI's terms.
            ClientClosedError: the client was closed.
            APIStatusError: an HTTP error (typed by its status) or a failed response,
                after the retries the policy allows.
            APIConnectionError: no response, after the retries.
            APITimeoutError: no answer within 600 s.
            StreamProtocolError: the body is not an answer of the API.
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
        body.pop("stream_options", None)  # only allowed on a streamed request
        return await create_with_retries(
            self._pool, self._edge(), body, self.retry, on_retry, self._answer
        )

    def _answer(self, data: Any) -> AssistantMessage:
        """A non-streaming answer → the canonical message, through the translator."""
        accumulator = MessageAccumulator(self.limits)
        translator = self._decoder(accumulator).translator
        events = (
            responses_object_events(data)
            if self.api == "responses"
            else chat_completion_chunks(data)
        )
        for event in events:
            for canonical in translator.feed(event):
                accumulator.feed(canonical)
        if not accumulator.stopped:
            raise StreamProtocolError("the answer did not complete")
        return accumulator.message

    def _edge(self) -> ProviderEdge:
        return ProviderEdge(
            url=self.url,
            headers=self._headers(),
            error_from_response=openai_error_from_response,
            retryable_in_stream=retryable_in_stream,
            decoder=self._decoder,
            request_id_headers=("x-request-id", "request-id"),
            end="the response was complete",
        )

    def _headers(self) -> dict[str, str]:
        return {**self.default_headers, "authorization": f"Bearer {self._api_key}"}

    def _decoder(self, accumulator: MessageAccumulator) -> _OpenAIDecoder:
        translator = (
            ResponsesEvents()
            if self.api == "responses"
            else ChatEvents(early_tool_start=self.early_tool_start)
        )
        return _OpenAIDecoder(translator, accumulator, self.limits)


@final
class _OpenAIDecoder:
    """OpenAI event data → canonical events, through the API's translator."""

    def __init__(
        self,
        translator: ResponsesEvents | ChatEvents,
        accumulator: MessageAccumulator,
        limits: StreamLimits,
    ) -> None:
        self.translator = translator
        self._accumulator = accumulator
        self._limits = limits

    def translate(self, data: str) -> list[dict[str, Any]]:
        return self.translator.feed(decode_openai(data, self._limits))

    def events(self) -> int:
        return self.translator.events

    def statistics(self) -> tuple[int, int, int]:
        ignored = self._accumulator.statistics().ignored + self.translator.ignored
        return self.translator.events, 0, ignored
