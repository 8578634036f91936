"""ModelClient: the one contract the loop and the session depend on.

``query()`` and :class:`~trio_agent.Session` call ``client.stream(...)`` and read
what it yields; they never depend on a concrete client. :class:`AnthropicClient`
satisfies it (so does ``ScriptedModel.client()``); another provider implements
it by converting to and from the canonical, Anthropic-shaped values at its own edge.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import trio

from .._messages import AssistantMessage, UserMessage
from .._tools import Tool
from ._stream import StreamItem

__all__ = ["ModelClient"]


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
