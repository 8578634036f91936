"""Tracing is observation only: every OpenTelemetry call the library makes goes
through here, and what it raises is logged (once per kind) and dropped.

A span processor, an exporter or a tracer provider is someone else's code, and
the SDK calls processors synchronously inside ``start_span`` (``on_start``) and
``Span.end`` (``on_end``) without catching what they raise. Unguarded, a processor
that raised in ``on_end`` threw away a completed turn, and one that raised in
``on_start`` of a ``chat`` span ended the turn before its model call. Here a span
that cannot be started is a non-recording one (its children start under the
turn's span as if it were not there), and a span call that raises is skipped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, final

import attrs

try:
    from opentelemetry import trace as _trace
except ImportError:  # pragma: no cover - the otel extra is part of the test extra
    _trace = None

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, Status, Tracer, TracerProvider

__all__ = ["GuardedSpan", "get_tracer", "guarded", "start_span"]

logger = logging.getLogger("trio_agent.otel")

#: The kinds of failure already logged: ``(operation, exception type)``.
_logged: set[tuple[str, str]] = set()


def _failed(what: str, exc: Exception) -> None:
    kind = (what, type(exc).__qualname__)
    if kind in _logged:
        return
    _logged.add(kind)
    try:
        logger.warning(
            "tracing: %s raised %s (the turn goes on; logged once): %r",
            what,
            type(exc).__qualname__,
            exc,
        )
    except Exception:  # pragma: no cover - an exception whose repr raises, in the log
        logger.warning("tracing: %s raised %s", what, type(exc).__qualname__)


def guarded(what: str, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``call(*args, **kwargs)``, or None if it raised (logged once per kind)."""
    try:
        return call(*args, **kwargs)
    except Exception as exc:
        _failed(what, exc)
        return None


@final
@attrs.define(eq=False)
class GuardedSpan:
    """A span whose every call is guarded (see the module); ``inner`` is the span."""

    inner: Span

    def set_attribute(self, key: str, value: Any) -> None:
        guarded("Span.set_attribute", self.inner.set_attribute, key, value)

    def add_event(self, name: str, attributes: Mapping[str, Any] | None = None) -> None:
        guarded("Span.add_event", self.inner.add_event, name, attributes)

    def set_status(self, status: Status) -> None:
        guarded("Span.set_status", self.inner.set_status, status)

    def end(self) -> None:
        guarded("Span.end", self.inner.end)

    def context(self) -> Context | None:
        """A context with this span current, for its children (None if that failed)."""
        assert _trace is not None
        context: Context | None = guarded(
            "set_span_in_context", _trace.set_span_in_context, self.inner
        )
        return context


def get_tracer(tracer_provider: TracerProvider | None) -> Tracer:
    """The library's tracer from *tracer_provider* (the global one if None); a no-op
    tracer if getting it raises."""
    assert _trace is not None
    tracer: Tracer | None = guarded(
        "get_tracer", _trace.get_tracer, "trio_agent", tracer_provider=tracer_provider
    )
    return tracer if tracer is not None else _trace.NoOpTracer()


def start_span(
    tracer: Tracer,
    name: str,
    attributes: Mapping[str, Any],
    parent: GuardedSpan | None = None,
) -> GuardedSpan:
    """``tracer.start_span(name)`` (under *parent* if given), guarded: a span that
    cannot be started is a non-recording one."""
    assert _trace is not None
    context = None if parent is None else parent.context()
    span: Span | None = guarded(
        "start_span", tracer.start_span, name, context=context, attributes=attributes
    )
    if span is None:
        # Non-recording, but carrying the parent's span context: the children of a
        # span that could not start hang under its parent.
        inner = _trace.INVALID_SPAN if parent is None else parent.inner
        span = _trace.NonRecordingSpan(
            guarded("Span.get_span_context", inner.get_span_context) or _trace.INVALID_SPAN_CONTEXT
        )
    return GuardedSpan(span)
