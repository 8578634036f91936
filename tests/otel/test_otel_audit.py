"""Tracing is observation only (the audit's findings 3 and 4): a span processor that
raises in ``on_start`` or ``on_end`` of any span the library makes, or a tracer
whose spans raise at every call, changes nothing of the turn: its events and
history are an untraced run's, and each tool runs once. A durable turn too: a
processor raising as its ``invoke_agent`` span ends does not throw the completed
turn away."""

from __future__ import annotations

import logging
import pathlib
from collections.abc import Mapping
from typing import Any

import httpx
import opentelemetry.sdk.trace as sdk
import opentelemetry.trace as trace_api
import pytest
import trio
import trio.testing
from opentelemetry.sdk.trace import SpanProcessor
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from trio_agent import (
    AnthropicClient,
    RetryPolicy,
    Session,
    TextBlock,
    Tool,
    ToolContext,
    ToolUseBlock,
    TurnEnd,
    subagent,
)
from trio_agent.otel import traced_submit
from trio_agent.testing import ScriptedAnswer, ScriptedModel, Timing, serve_scripted_model

FAST = Timing(first_event_delay=0.0, token_delay=0.0)
SCHEMA: dict[str, Any] = {"type": "object"}

#: Every span a traced turn with a tool and a subagent (which has a tool) makes.
SPAN_NAMES = [
    "invoke_agent trio-agent",
    "chat claude-scripted",
    "execute_tool t",
    "execute_tool helper",
    "invoke_agent helper",
    "chat claude-sub",
    "execute_tool sub_t",
]


class Raising(SpanProcessor):
    """Raises in *hook* (``start`` or ``end``) of the spans named *name*."""

    def __init__(self, hook: str, name: str) -> None:
        self.hook, self.name = hook, name
        self.raised = 0

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        if self.hook == "start" and span.name == self.name:
            self.raised += 1
            raise RuntimeError("processor on_start boom")

    def on_end(self, span: Any) -> None:
        if self.hook == "end" and span.name == self.name:
            self.raised += 1
            raise RuntimeError("processor on_end boom")


def _model() -> ScriptedModel:
    return ScriptedModel(
        [
            ScriptedAnswer(
                blocks=[
                    ToolUseBlock("toolu_t", "t", {}),
                    ToolUseBlock("toolu_h", "helper", {"prompt": "help", "description": "d"}),
                ],
                timing=FAST,
            ),
            # The subagent's turn: its tool, then its answer.
            ScriptedAnswer(blocks=[ToolUseBlock("toolu_s", "sub_t", {})], timing=FAST),
            ScriptedAnswer(blocks=[TextBlock("sub done")], timing=FAST),
            ScriptedAnswer(blocks=[TextBlock("done")], timing=FAST),
        ]
    )


def _session(model: ScriptedModel, ran: list[str]) -> Session:
    async def tool(input: Mapping[str, Any], ctx: ToolContext) -> str:
        ran.append(ctx.tool_name)
        ctx.progress({"step": 1})
        return f"RESULT of {ctx.tool_name}"

    client = AnthropicClient(
        api_key="k",
        base_url="http://scripted",
        http_client=httpx.AsyncClient(transport=model.transport()),
        retry=RetryPolicy(max_retries=0),
    )
    sub_tool = Tool("sub_t", "s", SCHEMA, tool)
    helper = subagent("helper", "Helps.", tools=[sub_tool], system="Help.", model="claude-sub")
    # Sequential tools: the scripted answers are consumed in one order.
    return Session(client, [Tool("t", "t", SCHEMA, tool), helper], model="claude-scripted")


async def _turn(provider: Any | None) -> tuple[list[Any], Session, list[str]]:
    ran: list[str] = []
    session = _session(_model(), ran)
    if provider is None:
        opened = session.submit("go")
    else:
        opened = traced_submit(session, "go", tracer_provider=provider, conversation_id="c1")
    async with opened as events:
        seen = [e async for e in events]
    return seen, session, ran


def _shape(events: list[Any]) -> list[str]:
    """The events, comparable across runs: a turn's end without its timings, in any
    order (tracing's checkpoints may interleave a tool's events with the stream's
    differently; the history holds the order that matters)."""
    return sorted(
        repr((type(e).__name__, e.reason, e.messages)) if isinstance(e, TurnEnd) else repr(e)
        for e in events
    )


async def _untraced() -> tuple[list[Any], Session, list[str]]:
    return await _turn(None)


async def test_the_parametrized_names_are_every_span_of_the_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    exporter = InMemorySpanExporter()
    provider = sdk.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    events, session, ran = await _turn(provider)
    assert sorted({s.name for s in exporter.get_finished_spans()}) == sorted(SPAN_NAMES)
    plain_events, plain, plain_ran = await _untraced()
    assert _shape(events) == _shape(plain_events)
    assert session.messages == plain.messages
    assert sorted(ran) == sorted(plain_ran) == ["sub_t", "t"]


@pytest.mark.parametrize("hook", ["start", "end"])
@pytest.mark.parametrize("name", SPAN_NAMES)
async def test_a_raising_span_processor_changes_nothing_of_the_turn(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture, hook: str, name: str
) -> None:
    exporter = InMemorySpanExporter()
    raising = Raising(hook, name)
    provider = sdk.TracerProvider()
    provider.add_span_processor(raising)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    caplog.set_level(logging.WARNING, logger="trio_agent.otel")
    events, session, ran = await _turn(provider)
    plain_events, plain, plain_ran = await _untraced()
    assert raising.raised >= 1  # the processor did raise
    assert _shape(events) == _shape(plain_events)
    assert isinstance(events[-1], TurnEnd)
    assert events[-1].reason == "completed"
    assert session.messages == plain.messages
    results = [r.content for m in session.messages for r in getattr(m, "tool_results", ())]
    assert "RESULT of t" in results
    assert sorted(ran) == sorted(plain_ran) == ["sub_t", "t"]  # each tool once
    # The other spans are still traced (a span that could not start is not exported).
    exported = {s.name for s in exporter.get_finished_spans()}
    assert exported >= set(SPAN_NAMES) - {name}


class _Hostile:
    """A span, tracer and provider whose every call raises (past ``get_tracer``)."""

    def __init__(self) -> None:
        self.calls = 0

    def get_tracer(self, *args: Any, **kwargs: Any) -> Any:
        return self

    def start_span(self, *args: Any, **kwargs: Any) -> Any:
        return self

    def __getattr__(self, name: str) -> Any:
        def boom(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            raise RuntimeError(f"{name} boom")

        return boom


class _NoTracer:
    def get_tracer(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("get_tracer boom")


@pytest.mark.parametrize("provider", [_Hostile, _NoTracer])
async def test_a_tracer_that_raises_at_every_call_changes_nothing(
    autojump_clock: trio.testing.MockClock, provider: Any
) -> None:
    hostile = provider()
    events, session, ran = await _turn(hostile)
    plain_events, plain, _ = await _untraced()
    assert _shape(events) == _shape(plain_events)
    assert session.messages == plain.messages
    assert sorted(ran) == ["sub_t", "t"]
    if isinstance(hostile, _Hostile):
        assert hostile.calls > 10  # set_attribute, add_event, end... each raised


async def test_a_processor_raising_as_a_durable_turn_ends_keeps_the_turn(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker traces its turns under the global tracer provider: a processor that
    raises as the turn's ``invoke_agent`` span ends (after the turn completed) does
    not fail the turn, whose history is committed."""
    from trio_agent.durable import Agent, DurableClient, open_worker

    raising = Raising("end", "invoke_agent w")
    provider = sdk.TracerProvider()
    provider.add_span_processor(raising)
    monkeypatch.setattr(trace_api, "get_tracer_provider", lambda: provider)
    ran: list[str] = []

    async def tool(input: Mapping[str, Any], ctx: ToolContext) -> str:
        ran.append("t")
        return "RESULT"

    model = ScriptedModel(
        [
            ScriptedAnswer(blocks=[ToolUseBlock("toolu_1", "t", {})]),
            ScriptedAnswer(blocks=[TextBlock("done")]),
        ]
    )
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    async with serve_scripted_model(model) as base_url:
        model_client = AnthropicClient(api_key="k", base_url=base_url)

        def build(session_id: str) -> Session:
            return Session(model_client, [Tool("t", "t", SCHEMA, tool)], model="claude-scripted")

        client = await trio.to_thread.run_sync(lambda: DurableClient.connect(url, agent="w"))
        try:
            with trio.fail_after(60):
                async with open_worker(Agent("w", build), database_url=url, lease=3):
                    handle = await trio.to_thread.run_sync(client.submit, "s1", "hello")
                    summary = await handle.wait(no_worker_timeout=30)
            history = client.history("s1")
        finally:
            await trio.to_thread.run_sync(client.close)
    assert raising.raised == 1
    assert (summary.reason, summary.text) == ("completed", "done")
    assert len(history) == 4
    assert history[2].tool_results[0].content == "RESULT"
    assert ran == ["t"]
