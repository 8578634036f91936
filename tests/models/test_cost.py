"""Usage.cost_usd: each call priced at its model's published price, summed per turn
and per session; an unknown price is None, never a guess."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import (
    DEFAULT_MODEL,
    Session,
    TextBlock,
    ToolUseBlock,
    TurnEndReason,
    Usage,
    UserMessage,
    query,
    tool,
)
from trio_agent._models import cost_usd
from trio_agent.testing import ScriptedAnswer, ScriptedModel

USAGE = Usage(
    input_tokens=1000, output_tokens=100, cache_creation_input_tokens=2000,
    cache_read_input_tokens=5000,
)  # fmt: skip


def by_hand(prices: dict[str, float], *, inp: int, out: int, w5: int, w1: int, read: int) -> float:
    return (
        inp * prices["input"]
        + out * prices["output"]
        + w5 * prices["write_5m"]
        + w1 * prices["write_1h"]
        + read * prices["read"]
    ) / 1_000_000


def test_one_call_at_the_published_price(anthropic_prices: dict[str, float]) -> None:
    expected = by_hand(anthropic_prices, inp=1000, out=100, w5=2000, w1=0, read=5000)
    assert cost_usd(USAGE, DEFAULT_MODEL, "anthropic") == pytest.approx(expected)
    assert expected == pytest.approx(0.0085)
    # The provider left out: the model's maker, from its name.
    assert cost_usd(USAGE, DEFAULT_MODEL) == pytest.approx(expected)


def test_one_hour_cache_writes_cost_more(anthropic_prices: dict[str, float]) -> None:
    split = Usage(
        input_tokens=1000, output_tokens=100, cache_creation_input_tokens=2000,
        cache_read_input_tokens=5000,
        extra={"cache_creation": {"ephemeral_5m_input_tokens": 500,
                                  "ephemeral_1h_input_tokens": 1500}},
    )  # fmt: skip
    expected = by_hand(anthropic_prices, inp=1000, out=100, w5=500, w1=1500, read=5000)
    assert cost_usd(split, DEFAULT_MODEL, "anthropic") == pytest.approx(expected)


def test_an_unknown_price_is_none() -> None:
    assert cost_usd(USAGE, "mystery-model-1") is None
    assert cost_usd(USAGE, DEFAULT_MODEL, "openai") is None  # not an OpenAI model
    assert cost_usd(USAGE, DEFAULT_MODEL, "no-such-provider") is None


def test_the_sum_rule() -> None:
    known = Usage(input_tokens=1, cost_usd=0.5)
    assert (known + Usage(input_tokens=2, cost_usd=0.25)).cost_usd == 0.75
    assert (known + Usage(input_tokens=2)).cost_usd is None  # None + x is None
    assert (Usage(cost_usd=0.0) + known).cost_usd == 0.5
    # The API never sends a cost, and to_api never writes one.
    assert Usage.from_api({"input_tokens": 3, "output_tokens": 1}).cost_usd is None
    assert "cost_usd" not in known.to_api()


@tool
async def Read(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


def answers() -> list[ScriptedAnswer]:
    return [
        ScriptedAnswer(
            blocks=[ToolUseBlock("r1", "Read", {"path": "a"})],
            usage=Usage(input_tokens=1000, output_tokens=100, cache_creation_input_tokens=2000),
            model=DEFAULT_MODEL,
        ),
        ScriptedAnswer(
            blocks=[TextBlock("done")],
            usage=Usage(input_tokens=50, output_tokens=20, cache_read_input_tokens=3000),
            model=DEFAULT_MODEL,
        ),
    ]


async def test_a_turn_and_a_session_sum_their_calls(
    autojump_clock: Any, anthropic_prices: dict[str, float]
) -> None:
    first = by_hand(anthropic_prices, inp=1000, out=100, w5=2000, w1=0, read=0)
    second = by_hand(anthropic_prices, inp=50, out=20, w5=0, w1=0, read=3000)
    model = ScriptedModel(answers())
    async with query(
        model.client(), [UserMessage("go")], tools=[Read], model=DEFAULT_MODEL
    ) as events:
        end = [e async for e in events][-1]
    assert end.reason is TurnEndReason.COMPLETED
    assert end.usage.cost_usd == pytest.approx(first + second)

    session = Session(ScriptedModel(answers() * 2).client(), [Read], model=DEFAULT_MODEL)
    for prompt in ("one", "two"):
        async with session.submit(prompt) as events:
            async for _ in events:
                pass
    assert session.usage.cost_usd == pytest.approx(2 * (first + second))
    assert session.cost == session.usage.cost_usd


async def test_a_resumed_session_prices_its_transcript(
    autojump_clock: Any, tmp_path: Any, anthropic_prices: dict[str, float]
) -> None:
    path = tmp_path / "t.jsonl"
    session = Session(
        ScriptedModel(answers()).client(), [Read], model=DEFAULT_MODEL, transcript_path=path
    )
    async with session.submit("go") as events:
        async for _ in events:
            pass
    resumed = Session.resume(path, ScriptedModel([]).client(), [Read])
    assert resumed.cost == pytest.approx(session.cost)


async def test_an_unknown_model_has_no_cost(autojump_clock: Any) -> None:
    session = Session(ScriptedModel([ScriptedAnswer(blocks=[TextBlock("hi")])]).client(), [],
                      model="m")  # fmt: skip
    async with session.submit("go") as events:
        async for _ in events:
            pass
    assert session.usage.input_tokens > 0
    assert session.cost is None


COUNTS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
usages = st.builds(
    Usage,
    input_tokens=st.integers(0, 10**7),
    output_tokens=st.integers(0, 10**6),
    cache_creation_input_tokens=st.one_of(st.none(), st.integers(0, 10**7)),
    cache_read_input_tokens=st.one_of(st.none(), st.integers(0, 10**7)),
)
MODELS = [DEFAULT_MODEL, "claude-opus-5-5", "claude-haiku-4-5", "gpt-4o", "mystery-model-1", "m"]


@settings(max_examples=200, deadline=None)
@given(usage=usages, field=st.sampled_from(COUNTS), more=st.integers(1, 10**6),
       model=st.sampled_from(MODELS))  # fmt: skip
def test_cost_is_monotone_and_none_iff_unpriced(
    usage: Usage, field: str, more: int, model: str
) -> None:
    import attrs

    cost = cost_usd(usage, model)
    priced = model not in ("mystery-model-1", "m")
    assert (cost is None) == (not priced)
    if cost is None:
        return
    assert cost >= 0
    bigger = attrs.evolve(usage, **{field: (getattr(usage, field) or 0) + more})
    later = cost_usd(bigger, model)
    assert later is not None
    assert later >= cost
