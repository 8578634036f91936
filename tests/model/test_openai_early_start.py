"""Tools start while an OpenAI Responses answer still streams: query() + the executor,
in virtual time, against the executor's reference schedule."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

import trio_agent as ta
from trio_agent.testing import (
    ScenarioCall,
    ScriptedAnswer,
    ScriptedModel,
    Timing,
    ToolScenario,
    reference_schedule,
)

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}}


def _client(model: ScriptedModel) -> ta.OpenAIClient:
    http = httpx.AsyncClient(transport=model.transport())
    return ta.OpenAIClient(api_key="sk-test", base_url="http://scripted/v1", http_client=http)


def _tools(specs: list[tuple[bool, float]], log: dict[str, list[float]]) -> list[ta.Tool]:
    tools: list[ta.Tool] = []
    for i, (safe, duration) in enumerate(specs):

        async def run(
            input: Mapping[str, Any], ctx: Any, name: str = f"t{i}", d: float = duration
        ) -> str:
            log.setdefault(name, []).append(trio.current_time())
            await trio.sleep(d)
            log[name].append(trio.current_time())
            return f"{name} ok"

        tools.append(
            ta.Tool(
                name=f"t{i}",
                description="a tool",
                input_schema=SCHEMA,
                run=run,
                concurrency_safe=safe,
            )
        )
    return tools


def _answer(n: int, timing: Timing, tail: str) -> ScriptedAnswer:
    blocks: list[Any] = [ta.ToolUseBlock(f"call_{i}", f"t{i}", {"n": i}) for i in range(n)]
    return ScriptedAnswer(blocks=[*blocks, ta.TextBlock(tail)], timing=timing)


async def _arrivals(answer: ScriptedAnswer) -> tuple[list[float], float]:
    """When the client hands each call over, and when the stream ends (alone)."""
    model = ScriptedModel([answer], protocol="openai-responses")
    start = trio.current_time()
    times: list[float] = []
    async with _client(model).stream(
        model="m", max_tokens=9, messages=[ta.UserMessage("go")]
    ) as items:
        async for item in items:
            if isinstance(item, ta.AssistantMessage) and item.tool_uses:
                times.append(trio.current_time() - start)
    return times, trio.current_time() - start


@settings(max_examples=30, deadline=None)
@given(
    specs=st.lists(
        st.tuples(st.booleans(), st.sampled_from([0.25, 0.5, 1.0, 3.0])), min_size=1, max_size=4
    ),
    token_delay=st.sampled_from([0.05, 0.1, 0.25]),
    tail=st.text(alphabet="abc ", min_size=8, max_size=60),
)
def test_query_starts_responses_tools_on_the_reference_schedule(
    specs: list[tuple[bool, float]], token_delay: float, tail: str
) -> None:
    timing = Timing(token_delay=token_delay, json_chunk_size=3, text_chunk_size=2)
    answer = _answer(len(specs), timing, tail)

    async def measure() -> tuple[list[float], float]:
        return await _arrivals(answer)

    arrivals, stream_end = trio.run(measure, clock=trio.testing.MockClock(autojump_threshold=0))
    assert len(arrivals) == len(specs)
    assert arrivals[-1] < stream_end  # every call is handed over before the text ends

    log: dict[str, list[float]] = {}

    async def main() -> ta.TurnEnd:
        model = ScriptedModel(
            [answer, ScriptedAnswer(blocks=[ta.TextBlock("done")])], protocol="openai-responses"
        )
        start = trio.current_time()
        end: ta.TurnEnd | None = None
        async with ta.query(
            _client(model),
            [ta.UserMessage("go")],
            tools=_tools(specs, log),
            model="gpt-x",
            max_tokens=64,
        ) as events:
            async for event in events:
                if isinstance(event, ta.TurnEnd):
                    end = event
        for times in log.values():
            times[:] = [t - start for t in times]
        assert end is not None
        sent = model.requests[1].body["input"]
        outputs = [i for i in sent if i.get("type") == "function_call_output"]
        assert [o["call_id"] for o in outputs] == [f"call_{i}" for i in range(len(specs))]
        return end

    end = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert end.reason is ta.TurnEndReason.COMPLETED
    scenario = ToolScenario(
        calls=[
            ScenarioCall(arrival=a, duration=d, safe=safe, name=f"t{i}")
            for i, (a, (safe, d)) in enumerate(zip(arrivals, specs, strict=True))
        ]
    )
    expected = reference_schedule(scenario)
    for i, outcome in enumerate(expected.calls):
        assert log[f"t{i}"] == [pytest.approx(outcome.start), pytest.approx(outcome.end)]
    # The first tool started while the answer was still streaming.
    assert log["t0"][0] == pytest.approx(arrivals[0])
    assert log["t0"][0] < stream_end
