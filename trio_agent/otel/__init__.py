"""OpenTelemetry spans for agent turns, following the GenAI semantic conventions.

With ``opentelemetry-api`` installed (``pip install 'trio-agent[otel]'``),
:func:`traced_submit` runs a :class:`~trio_agent.Session` turn under three kinds
of spans:

- ``invoke_agent <agent>``: the user turn (``gen_ai.operation.name = invoke_agent``,
  ``gen_ai.agent.name``, ``gen_ai.conversation.id``, usage totals, the end reason;
  an aborted or failed turn sets the span's status to error, with the abort reason);
- ``chat <model>``: each model call (request and response model, response id,
  finish reasons, ``gen_ai.usage.input_tokens`` / ``output_tokens``);
- ``execute_tool <name>``: each tool call (``gen_ai.tool.name``,
  ``gen_ai.tool.call.id``), its progress as span events, a cancellation or an
  error as its status.

Tool spans are children of the turn's span, set explicitly: Trio copies the
spawning task's context, so a tool started while the answer streams would
otherwise hang under the model call. Without ``opentelemetry-api`` nothing is
imported and :func:`traced_submit` is ``session.submit``.

Example::

    async with trio_agent.otel.traced_submit(session, "Fix it", conversation_id="s1") as events:
        async for event in events:
            ...
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import trio

from .. import (
    AssistantMessage,
    ContentBlock,
    ModelClient,
    PermissionDecision,
    QueryEvent,
    Session,
    Tool,
    ToolContext,
    TurnEnd,
    TurnEndReason,
    Usage,
    _util,
)
from ..lowlevel import StreamItem, StreamResult

if TYPE_CHECKING:
    from opentelemetry.trace import Span, TracerProvider

try:
    from opentelemetry import trace as _trace
except ImportError:  # pragma: no cover - the otel extra is part of the test extra
    _trace = None

__all__ = ["ENABLED", "traced_submit"]

#: Whether ``opentelemetry-api`` is installed (spans are emitted).
ENABLED: bool = _trace is not None

_PROVIDER = "anthropic"


@contextlib.asynccontextmanager
async def traced_submit(
    session: Session,
    prompt: str | Sequence[ContentBlock] | None = None,
    *,
    approvals: Mapping[str, PermissionDecision] | None = None,
    agent_name: str = "trio-agent",
    conversation_id: str | None = None,
    tracer_provider: TracerProvider | None = None,
) -> AsyncGenerator[trio.abc.ReceiveChannel[QueryEvent]]:
    """``session.submit(prompt)`` under an ``invoke_agent`` span and its children.

    Args:
        session: the session; its client and tools are wrapped for the turn only.
        prompt: the user's message.
        approvals: instead of a prompt, the decisions on the calls that await
            approval (see :meth:`Session.submit`).
        agent_name: ``gen_ai.agent.name``.
        conversation_id: ``gen_ai.conversation.id`` (e.g. the session id).
        tracer_provider: defaults to the global one.
    """
    if _trace is None:  # pragma: no cover - checked in a subprocess without the API
        async with session.submit(prompt, approvals=approvals) as events:
            yield events
        return
    tracer = _trace.get_tracer("trio_agent", tracer_provider=tracer_provider)
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": _PROVIDER,
        "gen_ai.agent.name": agent_name,
        "gen_ai.request.model": session.model,
    }
    if conversation_id is not None:
        attributes["gen_ai.conversation.id"] = conversation_id
    span = tracer.start_span(f"invoke_agent {agent_name}", attributes=attributes)
    turn = _Turn(tracer, span)
    client, tools = session.client, session.tools
    session.client = _TracedClient(client, turn)
    session.tools = [attrs.evolve(t, run=turn.wrap(t)) for t in tools]
    try:
        async with (
            session.submit(prompt, approvals=approvals) as events,
            _observed(events, turn) as observed,
        ):
            yield observed
    except BaseException as exc:
        _error(span, exc)
        raise
    finally:
        session.client, session.tools = client, tools
        span.end()


@attrs.define(eq=False)
class _Turn:
    tracer: Any
    span: Span

    def child(self, name: str, attributes: Mapping[str, Any]) -> Span:
        assert _trace is not None
        parent = _trace.set_span_in_context(self.span)
        return self.tracer.start_span(name, context=parent, attributes=dict(attributes))

    def wrap(self, tool: Tool) -> Any:
        run = tool.run

        async def traced(input: Mapping[str, Any], ctx: ToolContext) -> Any:
            span = self.child(
                f"execute_tool {tool.name}",
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": tool.name,
                    "gen_ai.tool.call.id": ctx.tool_use_id,
                    "gen_ai.tool.type": "function",
                },
            )

            def report(data: Any) -> None:
                span.add_event("gen_ai.tool.progress", {"trio_agent.progress": repr(data)[:1000]})
                ctx.progress(data)

            traced_ctx = ToolContext(ctx.tool_use_id, ctx.tool_name, ctx.context, report=report)
            try:
                value = await run(input, traced_ctx)
            except BaseException as exc:
                _error(span, exc)
                raise
            finally:
                span.end()
            return value

        return traced


def _error(span: Span, exc: BaseException) -> None:
    assert _trace is not None
    if isinstance(exc, trio.Cancelled):
        span.set_attribute("error.type", "cancelled")
        span.add_event("cancelled", {"trio_agent.abort_reason": str(exc.reason or "")})
        span.set_status(_trace.Status(_trace.StatusCode.ERROR, "cancelled"))
        return
    span.set_attribute("error.type", type(exc).__qualname__)
    span.set_status(_trace.Status(_trace.StatusCode.ERROR, str(exc)[:500]))
    if isinstance(exc, Exception):
        span.record_exception(exc)


@attrs.define(eq=False)
class _TracedClient:
    inner: ModelClient
    turn: _Turn

    def stream(
        self, **kwargs: Any
    ) -> contextlib.AbstractAsyncContextManager[trio.abc.ReceiveChannel[StreamItem]]:
        return _chat(self.inner, kwargs, self.turn)


@trio.as_safe_channel
async def _chat(
    inner: ModelClient, kwargs: dict[str, Any], turn: _Turn
) -> AsyncGenerator[StreamItem]:
    model = str(kwargs.get("model", ""))
    span = turn.child(
        f"chat {model}",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": _PROVIDER,
            "gen_ai.request.model": model,
            "gen_ai.request.max_tokens": int(kwargs.get("max_tokens", 0)),
        },
    )
    try:
        async with inner.stream(**kwargs) as items:
            async for item in items:
                if isinstance(item, StreamResult):
                    _answer(span, item.message)
                yield item
    except BaseException as exc:
        _error(span, exc)
        raise
    finally:
        span.end()


def _answer(span: Span, message: AssistantMessage) -> None:
    span.set_attribute("gen_ai.response.id", message.id)
    span.set_attribute("gen_ai.response.model", message.model)
    if message.stop_reason is not None:
        span.set_attribute("gen_ai.response.finish_reasons", [message.stop_reason])
    _usage(span, message.usage)


def _usage(span: Span, usage: Usage) -> None:
    # The GenAI conventions' names; the cache counts only when the API sent them.
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


@trio.as_safe_channel
async def _observed(
    events: trio.abc.ReceiveChannel[QueryEvent], turn: _Turn
) -> AsyncGenerator[QueryEvent]:
    async for event in events:
        if isinstance(event, TurnEnd):
            _turn_end(turn.span, event)
        yield event


def _turn_end(span: Span, end: TurnEnd) -> None:
    assert _trace is not None
    _usage(span, end.usage)
    span.set_attribute("trio_agent.turn.end_reason", str(end.reason))
    span.set_attribute("trio_agent.turn.model_calls", end.turns)
    if end.reason in (TurnEndReason.COMPLETED, TurnEndReason.MAX_TURNS):
        return
    if end.abort_reason is not None:
        span.add_event("aborted", {"trio_agent.abort_reason": str(end.abort_reason)})
    description = end.message or (repr(end.error) if end.error is not None else str(end.reason))
    span.set_attribute("error.type", str(end.reason))
    span.set_status(_trace.Status(_trace.StatusCode.ERROR, description[:500]))


_util.fixup_module_metadata(__name__, globals())
