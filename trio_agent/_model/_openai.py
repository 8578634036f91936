"""OpenAIClient: the Responses and Chat Completions APIs on the same streaming stack.

Example::

    client = trio_agent.OpenAIClient()  # reads OPENAI_API_KEY / OPENAI_BASE_URL
    async with trio_agent.query(client, [trio_agent.UserMessage("Hi")], tools=tools,
                                model="gpt-5", max_tokens=4096) as events:
        ...

    local = trio_agent.OpenAIClient(api_key="local", base_url="http://localhost:8000/v1",
                                    api="chat")

The client is a :class:`ProviderClient`, as :class:`AnthropicClient` is: the request,
retries, reads, idle watchdog and limits are those of every provider (read in the
receiving task, the items of each network read handed over together, a retry
invisible before the first content event). This module says only what is OpenAI's
client: the key, the base URL, and which API's :class:`Provider` it speaks
(:mod:`._openai_responses` or :mod:`._openai_chat`, each with its body and its event
translator: OpenAI's events become Messages API events fed to the same
:class:`MessageAccumulator`, so a function call reaches the executor the moment it is
complete, ``response.output_item.done`` for the Responses API).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import final

import httpx

from .._exceptions import AuthenticationError
from .._retry import RetryPolicy
from ._accumulate import StreamLimits
from ._client import ProviderClient
from ._openai_chat import ChatProvider, MaxTokensField
from ._openai_responses import ResponsesProvider
from ._openai_shared import OpenAIAPI

__all__ = ["OPENAI_BASE_URL", "OpenAIClient"]

OPENAI_BASE_URL = "https://api.openai.com/v1"


@final
class OpenAIClient(ProviderClient):
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
        max_tokens_field: MaxTokensField = "max_completion_tokens",
    ) -> None:
        if api not in ("responses", "chat"):
            raise ValueError(f"api must be 'responses' or 'chat', not {api!r}")
        super().__init__(
            ResponsesProvider()
            if api == "responses"
            else ChatProvider(early_tool_start=early_tool_start, max_tokens_field=max_tokens_field),
            base_url=base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_BASE_URL,
            http_client=http_client,
            retry=retry,
            idle_timeout=idle_timeout,
            stall_timeout=stall_timeout,
            connect_timeout=connect_timeout,
            limits=limits,
            default_headers=default_headers,
        )
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        if not key:
            raise AuthenticationError(
                "no OpenAI API key: pass api_key= or set OPENAI_API_KEY"
                " (a local server that needs none takes any string)",
                status_code=None,
            )
        self._api_key = key
        self._api: OpenAIAPI = api
        self._early_tool_start = early_tool_start
        self._max_tokens_field: MaxTokensField = max_tokens_field

    def __repr__(self) -> str:
        return f"OpenAIClient(api={self.api!r}, base_url={self.base_url!r}, api_key='<redacted>')"

    @property
    def has_api_key(self) -> bool:
        """Always True: a client is never built without a key."""
        return True

    @property
    def api(self) -> OpenAIAPI:
        """``"responses"`` or ``"chat"``: the API this client speaks."""
        return self._api

    @property
    def early_tool_start(self) -> bool:
        """Chat only: whether a new tool call index ends the previous call."""
        return self._early_tool_start

    @property
    def max_tokens_field(self) -> MaxTokensField:
        """Chat only: the body field that carries ``max_tokens``."""
        return self._max_tokens_field

    def _headers(self) -> dict[str, str]:
        return {**self.default_headers, "authorization": f"Bearer {self._api_key}"}
