"""The traced model client: the client it wraps, with a ``chat`` span per call.

:func:`traced_client` gives a :class:`~trio_agent.lowlevel.RecoverableModelClient`
when the wrapped client is one (its ``retry`` policy, ``stream(..., on_retry=)``
and the non-streaming ``create(...)``, each forwarded), and a plain
:class:`~trio_agent.ModelClient` otherwise: the loop checks which it has, so a
wrapper that dropped ``retry``, ``on_retry`` or ``create`` would silently turn off
the retry policy, the overload counting and the last resort. The request's
arguments are forwarded as they are (:class:`StreamArguments`), so an unknown
keyword is the wrapped client's ``TypeError``, and a new one passes through.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Callable
from typing import Any, Unpack, final

import attrs
import trio

from .._model import (
    ModelClient,
    RecoverableModelClient,
    RetryObserver,
    RetryPolicy,
    StreamArguments,
)
from ..lowlevel import StreamItem, StreamResult
from ._guard import GuardedSpan
from ._spans import Turn, answer, bounded, error, safe_str

__all__ = ["traced_client"]

_Items = contextlib.AbstractAsyncContextManager[trio.abc.ReceiveChannel[StreamItem]]


def traced_client(inner: ModelClient, turn: Turn, provider: str) -> ModelClient:
    """*inner* with a ``chat <model>`` span under *turn* for each of its calls."""
    if isinstance(inner, RecoverableModelClient):
        return _recoverable(inner, turn, provider)
    return _TracedClient(inner, turn, provider)


def _recoverable(
    inner: RecoverableModelClient, turn: Turn, provider: str
) -> RecoverableModelClient:
    # Typed so that pyright checks the wrapper against the protocol.
    return _TracedRecoverableClient(inner, turn, provider)


@final
@attrs.define(eq=False)
class _TracedClient:
    """A :class:`ModelClient` whose calls are spans."""

    inner: ModelClient
    turn: Turn
    provider: str

    @property
    def url(self) -> object:
        """The wrapped client's ``url``, so its calls are priced as the wrapped one's."""
        return getattr(self.inner, "url", None)

    def stream(self, **request: Unpack[StreamArguments]) -> _Items:
        def open_stream(observer: RetryObserver | None) -> _Items:
            return self.inner.stream(**request)

        return _traced_stream(self.turn, self.provider, request, open_stream, None)


@final
@attrs.define(eq=False)
class _TracedRecoverableClient:
    """A :class:`RecoverableModelClient` whose calls are spans, each retry an event."""

    inner: RecoverableModelClient
    turn: Turn
    provider: str

    @property
    def url(self) -> object:
        """The wrapped client's ``url``, so its calls are priced as the wrapped one's."""
        return getattr(self.inner, "url", None)

    #: The wrapped client's policy (the same object: the wrapper lives for one turn).
    retry: RetryPolicy = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.retry = self.inner.retry

    def stream(
        self, *, on_retry: RetryObserver | None = None, **request: Unpack[StreamArguments]
    ) -> _Items:
        def open_stream(observer: RetryObserver | None) -> _Items:
            return self.inner.stream(**request, on_retry=observer)

        return _traced_stream(self.turn, self.provider, request, open_stream, on_retry)

    async def create(
        self, *, on_retry: RetryObserver | None = None, **request: Unpack[StreamArguments]
    ) -> StreamResult:
        span = _chat_span(self.turn, self.provider, request, streaming=False)
        try:
            result = await self.inner.create(**request, on_retry=_observer(span, on_retry))
            answer(span, result.message)
        except BaseException as exc:
            error(span, exc)
            raise
        finally:
            span.end()
        return result


def _chat_span(
    turn: Turn, provider: str, request: StreamArguments, *, streaming: bool
) -> GuardedSpan:
    model = safe_str(request["model"])
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": model,
        "gen_ai.request.max_tokens": request["max_tokens"],
        "trio_agent.request.stream": streaming,
    }
    return turn.child(f"chat {model}", attributes)


def _observer(span: GuardedSpan, on_retry: RetryObserver | None) -> RetryObserver | None:
    """*on_retry*, noting each retry the client asks about on *span* (and whether the
    observer let it happen)."""
    if on_retry is None:
        return None

    def observed(exc: Exception) -> bool:
        allowed = on_retry(exc)
        span.add_event(
            "trio_agent.retry",
            {
                "error.type": bounded(type(exc).__qualname__),
                "trio_agent.retry.allowed": allowed,
            },
        )
        return allowed

    return observed


@trio.as_safe_channel
async def _traced_stream(
    turn: Turn,
    provider: str,
    request: StreamArguments,
    open_stream: Callable[[RetryObserver | None], _Items],
    on_retry: RetryObserver | None,
) -> AsyncGenerator[StreamItem]:
    # The span starts when the stream is opened, not when stream() is called.
    span = _chat_span(turn, provider, request, streaming=True)
    try:
        async with open_stream(_observer(span, on_retry)) as items:
            async for item in items:
                if isinstance(item, StreamResult):
                    answer(span, item.message)
                yield item
    except BaseException as exc:
        error(span, exc)
        raise
    finally:
        span.end()
