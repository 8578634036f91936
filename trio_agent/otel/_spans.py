"""What a span is given: bounded text, the turn's child spans, errors, answers, usage.

Every string that becomes a span attribute, an event attribute or a status
description goes through :func:`bounded` first: a tool's 10 MB exception message,
a model's id or a progress report must not become a 10 MB attribute that every
exporter copies, nor carry a lone surrogate that an OTLP exporter cannot encode.
The SDK's own limit (``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT``) is off by default, and
``Span.record_exception`` writes the whole message and traceback; so the cut is
made here, before the SDK sees the text.
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
import trio

from .. import AssistantMessage, Usage
from ._guard import GuardedSpan, start_span

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

try:
    from opentelemetry import trace as _trace
except ImportError:  # pragma: no cover - the otel extra is part of the test extra
    _trace = None

__all__ = [
    "MAX_ATTRIBUTE_CHARS",
    "MAX_STATUS_CHARS",
    "Turn",
    "answer",
    "attributes_of",
    "bounded",
    "error",
    "safe_str",
    "trace_api",
    "usage",
]

#: The longest string attribute (or event attribute) a span gets, in characters
#: (at most 4 UTF-8 bytes each).
MAX_ATTRIBUTE_CHARS = 4096
#: The longest status description.
MAX_STATUS_CHARS = 500
#: The traceback of a recorded exception keeps this many characters of its end
#: (where the innermost frames and the message are).
MAX_STACKTRACE_CHARS = 4 * MAX_ATTRIBUTE_CHARS

_SURROGATE = re.compile("[\ud800-\udfff]")
_CUT = " [cut, {} chars in all] "

trace_api = _trace


def bounded(text: str, limit: int = MAX_ATTRIBUTE_CHARS, *, keep_end: bool = False) -> str:
    """*text* at most *limit* characters long, encodable as UTF-8.

    A longer text is cut and says how long it was (its start is kept, or its end
    with *keep_end*); lone surrogates (which no UTF-8 exporter can write) become
    U+FFFD. NULs and other control characters are valid UTF-8 and kept. The cut
    comes first, so a 10 MB text costs one slice, not a scan.
    """
    if len(text) > limit:
        note = _CUT.format(len(text))
        room = limit - len(note)
        if room <= 0:
            text = text[:limit]
        elif keep_end:
            text = note + text[len(text) - room :]
        else:
            text = text[:room] + note
    return _SURROGATE.sub("\ufffd", text)


def safe_str(value: object) -> str:
    """``str(value)``, or a placeholder when its ``__str__`` raises."""
    try:
        return str(value)
    except Exception:
        return f"<unprintable {type(value).__qualname__}>"


@attrs.define(eq=False)
class Turn:
    """The turn's span, and how its children are started under it."""

    tracer: Tracer
    span: GuardedSpan

    def child(self, name: str, attributes: Mapping[str, Any]) -> GuardedSpan:
        # Explicitly under the turn: Trio copies the spawning task's context, so a
        # tool started while the answer streams would otherwise hang under the call.
        return start_span(self.tracer, bounded(name), attributes_of(attributes), self.span)


def attributes_of(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """*attributes* with every string (and string in a sequence) :func:`bounded`."""
    out: dict[str, Any] = {}
    for key, value in attributes.items():
        if isinstance(value, str):
            value = bounded(value)
        elif isinstance(value, list | tuple):
            value = [bounded(v) if isinstance(v, str) else v for v in value]  # pyright: ignore[reportUnknownVariableType]
        out[key] = value
    return out


def error(span: GuardedSpan, exc: BaseException) -> None:
    """Mark *span* as failed by *exc* (a cancellation says its reason)."""
    assert _trace is not None
    if isinstance(exc, trio.Cancelled):
        span.set_attribute("error.type", "cancelled")
        span.add_event(
            "cancelled", {"trio_agent.abort_reason": bounded(safe_str(exc.reason or ""))}
        )
        span.set_status(_trace.Status(_trace.StatusCode.ERROR, "cancelled"))
        return
    kind = bounded(type(exc).__qualname__)
    message = safe_str(exc)
    span.set_attribute("error.type", kind)
    span.set_status(_trace.Status(_trace.StatusCode.ERROR, bounded(message, MAX_STATUS_CHARS)))
    if isinstance(exc, Exception):
        # Not span.record_exception(): it writes the whole message and traceback.
        span.add_event(
            "exception",
            {
                "exception.type": kind,
                "exception.message": bounded(message),
                "exception.stacktrace": bounded(
                    _stacktrace(exc, kind, message), MAX_STACKTRACE_CHARS, keep_end=True
                ),
                "exception.escaped": True,
            },
        )


def _stacktrace(exc: BaseException, kind: str, message: str) -> str:
    # The frames, then the message cut on its own: traceback.format_exception() would
    # end with the whole message, and cutting that would keep only the message.
    frames = "".join(traceback.format_tb(exc.__traceback__))
    return f"Traceback (most recent call last):\n{frames}{kind}: {bounded(message, 1000)}\n"


def answer(span: GuardedSpan, message: AssistantMessage) -> None:
    """The response attributes of a model call's answer."""
    span.set_attribute("gen_ai.response.id", bounded(message.id))
    span.set_attribute("gen_ai.response.model", bounded(message.model))
    if message.stop_reason is not None:
        span.set_attribute("gen_ai.response.finish_reasons", [bounded(message.stop_reason)])
    usage(span, message.usage)


def usage(span: GuardedSpan, usage: Usage) -> None:
    """The GenAI conventions' usage names; the cache counts only when the API sent them."""
    span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
    span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
    if usage.cache_creation_input_tokens is not None:
        span.set_attribute(
            "gen_ai.usage.cache_creation.input_tokens", usage.cache_creation_input_tokens
        )
    if usage.cache_read_input_tokens is not None:
        span.set_attribute("gen_ai.usage.cache_read.input_tokens", usage.cache_read_input_tokens)
    if usage.cost_usd is not None:  # the turn's (the loop prices each call)
        span.set_attribute("trio_agent.usage.cost_usd", usage.cost_usd)
