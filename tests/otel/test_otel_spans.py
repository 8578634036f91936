"""OpenTelemetry GenAI spans of a turn, read back with the SDK's in-memory exporter."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from typing import Any

import httpx
import opentelemetry.sdk.trace as sdk
import trio
import trio.testing
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import StatusCode

from trio_agent import (
    AnthropicClient,
    RetryPolicy,
    Session,
    TextBlock,
    Tool,
    ToolContext,
    ToolUseBlock,
    TurnEnd,
    Usage,
    otel,
)
from trio_agent.testing import ScriptedAnswer, ScriptedModel, Timing

SLOW = Timing(token_delay=0.1, block_delay=0.1, json_chunk_size=4, text_chunk_size=4)


def _provider() -> tuple[Any, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = sdk.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def _session(model: ScriptedModel, started: list[str]) -> Session:
    async def run(input: Mapping[str, Any], ctx: ToolContext) -> str:
        started.append(ctx.tool_use_id)
        ctx.progress({"step": 1})
        await trio.sleep(float(input.get("seconds", 1.0)))
        return "ok"

    client = AnthropicClient(
        api_key="k",
        base_url="http://scripted",
        http_client=httpx.AsyncClient(transport=model.transport()),
        retry=RetryPolicy(max_retries=0),
    )
    tools = [Tool("Read", "Read.", {"type": "object"}, run, concurrency_safe=True)]
    return Session(client, tools, model="claude-scripted")


def _answer(*blocks: Any) -> ScriptedAnswer:
    return ScriptedAnswer(
        blocks=list(blocks), usage=Usage(input_tokens=100, output_tokens=7), timing=SLOW
    )


async def test_turn_chat_and_tool_spans_with_genai_attributes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel(
        [
            _answer(
                ToolUseBlock("toolu_a", "Read", {"seconds": 5.0}),
                TextBlock("still streaming while a runs " * 5),
                ToolUseBlock("toolu_b", "Read", {}),
            ),
            _answer(TextBlock("done")),
        ]
    )
    provider, exporter = _provider()
    started: list[str] = []
    session = _session(model, started)
    client, tools = session.client, session.tools
    async with otel.traced_submit(
        session, "go", agent_name="helper", conversation_id="s1", tracer_provider=provider
    ) as events:
        ends = [e async for e in events if isinstance(e, TurnEnd)]
    assert ends[0].reason == "completed"
    assert started == ["toolu_a", "toolu_b"]
    # The session is given back its own client and tools.
    assert session.client is client
    assert session.tools == tools

    spans = exporter.get_finished_spans()
    by_name: dict[str, list[Any]] = {}
    for span in spans:
        by_name.setdefault(span.name, []).append(span)
    (turn,) = by_name["invoke_agent helper"]
    assert turn.parent is None
    assert turn.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert turn.attributes["gen_ai.conversation.id"] == "s1"
    assert turn.attributes["gen_ai.usage.input_tokens"] == 200
    assert turn.attributes["gen_ai.usage.output_tokens"] == 14
    assert turn.attributes["trio_agent.turn.end_reason"] == "completed"
    assert turn.status.status_code is StatusCode.UNSET

    chats = by_name["chat claude-scripted"]
    assert len(chats) == 2
    assert [c.attributes["gen_ai.response.finish_reasons"] for c in chats] == [
        ("tool_use",),
        ("end_turn",),
    ]
    assert all(c.attributes["gen_ai.usage.output_tokens"] == 7 for c in chats)

    tool_spans = by_name["execute_tool Read"]
    assert sorted(s.attributes["gen_ai.tool.call.id"] for s in tool_spans) == ["toolu_a", "toolu_b"]
    first = next(s for s in tool_spans if s.attributes["gen_ai.tool.call.id"] == "toolu_a")
    # toolu_a started while the first answer still streamed (inside the chat span's
    # time), yet its parent is the turn, not the model call.
    assert chats[0].start_time < first.start_time < chats[0].end_time
    for span in [*chats, *tool_spans]:
        assert span.parent.span_id == turn.context.span_id
        assert span.context.trace_id == turn.context.trace_id
    assert all([e.name for e in s.events] == ["gen_ai.tool.progress"] for s in tool_spans)


async def test_aborted_turn_marks_the_turn_and_the_cancelled_tool(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([_answer(ToolUseBlock("toolu_a", "Read", {"seconds": 50.0}))])
    provider, exporter = _provider()
    started: list[str] = []
    session = _session(model, started)
    async with otel.traced_submit(session, "go", tracer_provider=provider) as events:
        async for event in events:
            if started and not isinstance(event, TurnEnd):
                session.abort()
    assert started == ["toolu_a"]
    spans = {s.name: s for s in exporter.get_finished_spans()}
    turn = spans["invoke_agent trio-agent"]
    assert turn.status.status_code is StatusCode.ERROR
    assert turn.attributes["error.type"] == "aborted_streaming"
    assert [e.attributes["trio_agent.abort_reason"] for e in turn.events] == ["user_interrupted"]
    tool = spans["execute_tool Read"]
    assert tool.status.status_code is StatusCode.ERROR
    assert tool.attributes["error.type"] == "cancelled"


def test_nothing_imported_without_the_api() -> None:
    code = (
        "import sys; sys.modules['opentelemetry'] = None\n"
        "import trio_agent, trio_agent.otel as o\n"
        "assert not o.ENABLED\n"
        "assert not [m for m in sys.modules if m.startswith('opentelemetry.')]\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout == "ok\n"
