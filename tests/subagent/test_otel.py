"""Under trio_agent.otel, a subagent's turn is an ``invoke_agent`` span child of its
call's ``execute_tool`` span; its model calls and tools are spans under it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import opentelemetry.sdk.trace as sdk
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from trio_agent import Session, TextBlock, Tool, ToolContext, ToolUseBlock, Usage, otel, subagent
from trio_agent.testing import ScriptedAnswer, ScriptedModel


async def look(input: Mapping[str, Any], ctx: ToolContext) -> str:
    return "seen"


async def test_the_childs_spans_nest_under_its_call(autojump_clock: Any) -> None:
    model = ScriptedModel(
        [
            ScriptedAnswer(blocks=[ToolUseBlock("p1", "helper", {"prompt": "look"})]),
            ScriptedAnswer(blocks=[ToolUseBlock("c1", "look", {})]),
            ScriptedAnswer(
                blocks=[TextBlock("seen it")], usage=Usage(input_tokens=5, output_tokens=2)
            ),
            ScriptedAnswer(blocks=[TextBlock("done")]),
        ]
    )
    exporter = InMemorySpanExporter()
    provider = sdk.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    helper = subagent(
        "helper", "Helps.", tools=[Tool("look", "Look.", {"type": "object"}, look)], system="h"
    )
    session = Session(model.client(), [helper], model="claude-scripted", max_tokens=50)
    async with otel.traced_submit(session, "go", tracer_provider=provider) as events:
        async for _ in events:
            pass
    spans = {s.name: s for s in exporter.get_finished_spans()}
    top = spans["invoke_agent trio-agent"]
    call = spans["execute_tool helper"]
    child = spans["invoke_agent helper"]
    inner = spans["execute_tool look"]
    assert call.parent is not None
    assert call.parent.span_id == top.context.span_id
    assert child.parent is not None
    assert child.parent.span_id == call.context.span_id
    assert inner.parent is not None
    assert inner.parent.span_id == child.context.span_id
    chats = [s for s in exporter.get_finished_spans() if s.name.startswith("chat ")]
    assert len(chats) == 4
    under_child = [s for s in chats if s.parent and s.parent.span_id == child.context.span_id]
    under_top = [s for s in chats if s.parent and s.parent.span_id == top.context.span_id]
    assert (len(under_child), len(under_top)) == (2, 2)
    assert child.attributes is not None
    assert child.attributes["gen_ai.agent.name"] == "helper"
    assert child.attributes["trio_agent.turn.end_reason"] == "completed"
    assert session.subagent_usage["helper"].input_tokens >= 5
