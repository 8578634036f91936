"""ModelClient: the one contract the loop and the session depend on.

``query()`` and :class:`~trio_agent.Session` call ``client.stream(...)`` and read
what it yields; they never depend on a concrete client. :class:`AnthropicClient`
satisfies it (so does ``ScriptedModel.client()``); another provider implements
it by converting to and from the canonical, Anthropic-shaped values at its own edge.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeAlias, runtime_checkable

import trio

from .._messages import AssistantMessage, UserMessage
from .._tools import Tool
from .._retry import RetryPolicy
from ._stream import StreamItem, StreamResult

__all__ = ["ModelClient", "RecoverableModelClient", "RetryObserver"]

#: Called with the error before each retry a client would make on its own; False
#: makes the client raise that error at once instead (the loop counts overloaded
#: answers this way, and falls back after 3 in a row however many retries are left).
RetryObserver: TypeAlias = Callable[[Exception], bool]


@runtime_checkable
class ModelClient(Protocol):
    """Anything that streams one model answer as trio_agent's stream items.

    ``stream(...)`` returns an async context manager yielding a channel of
    :data:`~trio_agent.StreamItem`: every :class:`~trio_agent.StreamEvent` as it
    arrives, at each finished block an :class:`~trio_agent.AssistantMessage`
    holding just that block, and last one :class:`~trio_agent.StreamResult`.
    Failures are :class:`~trio_agent.TrioAgentError` subclasses
    (:class:`~trio_agent.APIError`, :class:`~trio_agent.StreamError`).
    """

    def stream(
        self,
        *,
        model: str,
        messages: Sequence[UserMessage | AssistantMessage | Mapping[str, Any]],
        max_tokens: int,
        system: str | Sequence[Mapping[str, Any]] | None = None,
        tools: Sequence[Tool | Mapping[str, Any]] | None = None,
        **params: Any,
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
        messages: Sequence[UserMessage | AssistantMessage | Mapping[str, Any]],
        max_tokens: int,
        system: str | Sequence[Mapping[str, Any]] | None = None,
        tools: Sequence[Tool | Mapping[str, Any]] | None = None,
        on_retry: RetryObserver | None = None,
        **params: Any,
    ) -> contextlib.AbstractAsyncContextManager[trio.abc.ReceiveChannel[StreamItem]]: ...

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
    ) -> StreamResult: ...
