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
otherwise hang under the model call. A subagent's call (:func:`trio_agent.subagent`)
is an ``execute_tool`` span whose child is the subagent's own ``invoke_agent``
span, its ``chat`` and ``execute_tool`` spans under it. Without ``opentelemetry-api`` nothing is
imported and :func:`traced_submit` is ``session.submit``.

Tracing is observation only: every OpenTelemetry call made here (getting the tracer,
starting a span, its attributes, events and status, ending it) goes through one
guard (:mod:`._guard`); what a span processor, an exporter or a tracer raises is
logged once per kind (logger ``trio_agent.otel``) and the turn goes on as if
untraced. A span that cannot be started is a non-recording one.

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
    ContentBlock,
    PermissionDecision,
    QueryEvent,
    Session,
    Tool,
    ToolContext,
    TurnEnd,
    TurnEndReason,
    _util,
)
from .._models import price_provider
from .._subagent import SubagentRunner
from ._client import traced_client
from ._guard import GuardedSpan, get_tracer, start_span
from ._spans import MAX_STATUS_CHARS, Turn, attributes_of, bounded, error, trace_api, usage

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

__all__ = ["ENABLED", "traced_submit"]

#: Whether ``opentelemetry-api`` is installed (spans are emitted).
ENABLED: bool = trace_api is not None

#: ``gen_ai.provider.name`` of a client whose API is not known from its ``url``.
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
    if trace_api is None:  # pragma: no cover - checked in a subprocess without the API
        async with session.submit(prompt, approvals=approvals) as events:
            yield events
        return
    tracer = get_tracer(tracer_provider)
    client, tools = session.client, session.tools
    provider = price_provider(client) or _PROVIDER
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": provider,
        "gen_ai.agent.name": agent_name,
        "gen_ai.request.model": session.model,
    }
    if conversation_id is not None:
        attributes["gen_ai.conversation.id"] = conversation_id
    span = start_span(tracer, bounded(f"invoke_agent {agent_name}"), attributes_of(attributes))
    turn = Turn(tracer, span)
    session.client = traced_client(client, turn, provider)
    session.tools = [attrs.evolve(t, run=_traced_tool(turn, t, client, provider)) for t in tools]
    try:
        async with (
            session.submit(prompt, approvals=approvals) as events,
            _observed(events, turn) as observed,
        ):
            yield observed
    except BaseException as exc:
        error(span, exc)
        raise
    finally:
        session.client, session.tools = client, tools
        span.end()


def _traced_tool(turn: Turn, tool: Tool, client: Any, provider: str) -> Any:
    """*tool*'s ``run`` under an ``execute_tool`` span, its progress as span events
    (a subagent's turn under an ``invoke_agent`` span of its own, child of that one;
    *client* is the untraced client its calls are made with)."""
    run = tool.run

    async def traced(input: Mapping[str, Any], ctx: ToolContext) -> Any:
        span = turn.child(
            f"execute_tool {tool.name}",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": tool.name,
                "gen_ai.tool.call.id": ctx.tool_use_id,
                "gen_ai.tool.type": "function",
            },
        )

        def report(data: Any) -> None:
            span.add_event("gen_ai.tool.progress", {"trio_agent.progress": _repr(data)})
            ctx.progress(data)

        traced_ctx = ToolContext(ctx.tool_use_id, ctx.tool_name, ctx.context, report=report)
        try:
            if isinstance(run, SubagentRunner):
                value = await _traced_subagent(turn, span, run, input, traced_ctx, client, provider)
            else:
                value = await run(input, traced_ctx)
        except BaseException as exc:
            error(span, exc)
            raise
        finally:
            span.end()
        return value

    return traced


async def _traced_subagent(
    turn: Turn,
    call_span: GuardedSpan,
    run: SubagentRunner,
    input: Mapping[str, Any],
    ctx: ToolContext,
    client: Any,
    provider: str,
) -> Any:
    """The subagent's call with its turn under an ``invoke_agent`` span, child of the
    call's ``execute_tool`` span *call_span*."""
    parent = ctx.turn
    model = run.model if run.model is not None else (parent.model if parent else "")
    span = start_span(
        turn.tracer,
        bounded(f"invoke_agent {run.name}"),
        attributes_of(
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.provider.name": provider,
                "gen_ai.agent.name": run.name,
                "gen_ai.request.model": model,
            }
        ),
        call_span,
    )
    child = Turn(turn.tracer, span)
    try:
        # ctx.turn.client is the parent's traced client: the child's calls go through
        # the client the session was given, traced under the child's span.
        tools = [attrs.evolve(t, run=_traced_tool(child, t, client, provider)) for t in run.tools]
        output, end = await run.call(
            input, ctx, tools=tools, client=traced_client(client, child, provider)
        )
        if end is not None:
            _turn_end(span, end)
        return output
    except BaseException as exc:
        error(span, exc)
        raise
    finally:
        span.end()


def _repr(data: object) -> str:
    try:
        text = repr(data)
    except Exception:
        text = f"<unprintable {type(data).__qualname__}>"
    return bounded(text, 1000)


@trio.as_safe_channel
async def _observed(
    events: trio.abc.ReceiveChannel[QueryEvent], turn: Turn
) -> AsyncGenerator[QueryEvent]:
    async for event in events:
        if isinstance(event, TurnEnd):
            _turn_end(turn.span, event)
        yield event


def _turn_end(span: GuardedSpan, end: TurnEnd) -> None:
    assert trace_api is not None
    usage(span, end.usage)
    span.set_attribute("trio_agent.turn.end_reason", str(end.reason))
    span.set_attribute("trio_agent.turn.model_calls", end.turns)
    if end.reason in (TurnEndReason.COMPLETED, TurnEndReason.MAX_TURNS):
        return
    if end.abort_reason is not None:
        span.add_event("aborted", {"trio_agent.abort_reason": bounded(str(end.abort_reason))})
    description = end.message or (_repr(end.error) if end.error is not None else str(end.reason))
    span.set_attribute("error.type", str(end.reason))
    span.set_status(
        trace_api.Status(trace_api.StatusCode.ERROR, bounded(description, MAX_STATUS_CHARS))
    )


_util.fixup_module_metadata(__name__, globals())
