"""ModelClient: the one contract the loop and the session depend on.

``query()`` and :class:`~trio_agent.Session` call ``client.stream(...)`` and read
what it yields; they never depend on a concrete client. :class:`AnthropicClient`
and :class:`OpenAIClient` satisfy it (both are a :class:`ProviderClient`, see
``_provider.py``), so does ``ScriptedModel.client()``; another provider implements it
by converting to and from the canonical, Anthropic-shaped values at its own edge.

The request's arguments are written here, once: in :class:`ModelClient` and
:class:`RecoverableModelClient`, and as :class:`StreamArguments` for a wrapper that
forwards them (``def stream(self, **request: Unpack[StreamArguments])``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, Protocol, Required, TypeAlias, TypedDict, runtime_checkable

import trio

from .._messages import AssistantMessage, UserMessage
from .._retry import RetryPolicy
from .._tools import Tool
from ._stream import StreamItem, StreamResult

__all__ = [
    "CacheTTL",
    "MessageLike",
    "ModelClient",
    "RecoverableModelClient",
    "RetryObserver",
    "StreamArguments",
    "SystemLike",
    "ToolLike",
]

#: Called with the error before each retry a client would make on its own; False
#: makes the client raise that error at once instead (the loop counts overloaded
#: answers this way, and falls back after 3 in a row however many retries are left).
RetryObserver: TypeAlias = Callable[[Exception], bool]
#: A message of the history: canonical, or its Messages API dict.
MessageLike: TypeAlias = UserMessage | AssistantMessage | Mapping[str, Any]
#: A tool: a :class:`Tool`, or its API dict (sent as it is).
ToolLike: TypeAlias = Tool | Mapping[str, Any]
#: The system prompt: text, or Messages API text blocks.
SystemLike: TypeAlias = str | Sequence[Mapping[str, Any]] | None
#: How long the prompt-cache entries a request writes live: 5 minutes or 1 hour.
CacheTTL: TypeAlias = Literal["5m", "1h"]


class StreamArguments(TypedDict, total=False):
    """The keyword arguments of :meth:`ModelClient.stream`, for a wrapper that forwards
    them: ``def stream(self, **request: Unpack[StreamArguments])``."""

    model: Required[str]
    messages: Required[Sequence[MessageLike]]
    max_tokens: Required[int]
    system: SystemLike
    tools: Sequence[ToolLike] | None
    extra_body: Mapping[str, Any] | None
    cache: CacheTTL | None


@runtime_checkable
class ModelClient(Protocol):
    """Anything that streams one model answer as trio_agent's stream items.

    ``stream(...)`` returns an async context manager yielding a channel of
    :data:`~trio_agent.lowlevel.StreamItem`: every
    :class:`~trio_agent.lowlevel.StreamEvent` as it arrives, at each finished block an
    :class:`~trio_agent.AssistantMessage` holding just that block, and last one
    :class:`~trio_agent.lowlevel.StreamResult`.
    Failures are :class:`~trio_agent.TrioAgentError` subclasses
    (:class:`~trio_agent.APIError`, :class:`~trio_agent.StreamError`).

    *extra_body* holds request fields the library does not model (``temperature``,
    ``thinking``...), merged into the JSON body as they are (the official SDKs'
    name). *cache* asks for prompt-cache breakpoints with that TTL (the Messages
    API's ``cache_control``; a provider that caches on its own, as OpenAI does,
    ignores it); the loop passes it only when ``TurnOptions.cache`` is set, so a
    client without the keyword still works with ``cache=None``. Any other keyword
    is a :class:`TypeError`.
    """

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
    ) -> contextlib.AbstractAsyncContextManager[trio.abc.ReceiveChannel[StreamItem]]: ...


@runtime_checkable
class RecoverableModelClient(ModelClient, Protocol):
    """A :class:`ModelClient` that also serves the loop's recovery.

    Besides ``stream(...)``: its ``retry`` policy (the loop retries a call that
    failed after content with it), an ``on_retry`` observer on each call (see
    :data:`RetryObserver`), and ``create(...)``, one non-streaming request (``stream:
    false``), the loop's last resort after the streamed retries. :class:`AnthropicClient`
    and :class:`OpenAIClient` are.
    """

    retry: RetryPolicy

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
    ) -> contextlib.AbstractAsyncContextManager[trio.abc.ReceiveChannel[StreamItem]]: ...

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
    ) -> StreamResult: ...
