"""The cost and the budget end in what trio_agent reports: OpenTelemetry spans and
the durable turn summary."""

from __future__ import annotations

from typing import Any

import opentelemetry.sdk.trace as sdk
import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from trio_agent import DEFAULT_MODEL, Session, TextBlock, TurnEnd, TurnEndReason, Usage, otel
from trio_agent._models import cost_usd
from trio_agent.durable import TurnSummary
from trio_agent.durable._worker import _summary  # pyright: ignore[reportPrivateUsage]
from trio_agent.testing import ScriptedAnswer, ScriptedModel

CACHED = Usage(
    input_tokens=40, output_tokens=7, cache_creation_input_tokens=300, cache_read_input_tokens=900
)


async def test_spans_carry_the_cache_tokens_and_the_cost(autojump_clock: Any) -> None:
    exporter = InMemorySpanExporter()
    provider = sdk.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    answer = ScriptedAnswer(blocks=[TextBlock("hi")], usage=CACHED, model=DEFAULT_MODEL)
    session = Session(ScriptedModel([answer]).client(), [], model=DEFAULT_MODEL)
    async with otel.traced_submit(
        session, "go", agent_name="a", conversation_id="s", tracer_provider=provider
    ) as events:
        async for _ in events:
            pass
    spans = {s.name: s for s in exporter.get_finished_spans()}
    for name in ("invoke_agent a", f"chat {DEFAULT_MODEL}"):
        attributes = spans[name].attributes or {}
        assert attributes["gen_ai.usage.input_tokens"] == 40
        assert attributes["gen_ai.usage.cache_creation.input_tokens"] == 300
        assert attributes["gen_ai.usage.cache_read.input_tokens"] == 900
    turn = spans["invoke_agent a"].attributes or {}
    assert turn["trio_agent.usage.cost_usd"] == pytest.approx(cost_usd(CACHED, DEFAULT_MODEL))


def test_the_durable_summary_carries_the_reason_and_the_cost() -> None:
    end = TurnEnd(
        reason=TurnEndReason.BUDGET_EXHAUSTED,
        usage=Usage(input_tokens=5, output_tokens=1, cost_usd=0.25),
        messages=(),
        turns=2,
        message="The turn cost $0.2500, which reaches max_budget_usd=0.2: the turn ends.",
    )
    record = _summary("t1", "s1", end, [], 0)
    summary = TurnSummary.from_record(record)
    assert summary.reason is TurnEndReason.BUDGET_EXHAUSTED
    assert summary.usage.cost_usd == 0.25
    assert summary.usage.input_tokens == 5
    unknown = TurnSummary.from_record({**record, "cost_usd": None})
    assert unknown.usage.cost_usd is None
