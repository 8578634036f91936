"""max_tokens escalation respects the model (issue 12, item 4) and
``model_context_window_exceeded`` continues (item 5): the ``max_tokens`` every
request carried, in virtual time, through ``query()`` and ``Session``."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import (
    AssistantMessage,
    AttemptDiscarded,
    ModelDeprecationWarning,
    Session,
    TextBlock,
    Transition,
    TransitionReason,
    TurnEndReason,
    TurnOptions,
    UserMessage,
)
from trio_agent._loop._recovery import (
    CONTINUE_PROMPT,
    DEFAULT_MAX_TOKENS,
    ESCALATED_MAX_TOKENS,
    MODEL_OUTPUT_CAPS,
    model_output_cap,
)
from trio_agent.testing import ScriptedAnswer, ScriptedModel, run_virtual


def cut(text: str, reason: str = "max_tokens") -> ScriptedAnswer:
    return ScriptedAnswer(blocks=[TextBlock(text)], stop_reason=reason)


DONE = ScriptedAnswer(blocks=[TextBlock("the end")])
WRITE = [UserMessage("write")]


def sent_max_tokens(model: ScriptedModel) -> list[int]:
    return [r.body["max_tokens"] for r in model.requests]


def reasons(events: list[Any]) -> list[TransitionReason]:
    return [e.reason for e in events if isinstance(e, Transition)]


@pytest.mark.parametrize(
    ("name", "first", "escalated"),
    [
        ("claude-sonnet-5-5-20250929", 8192, 64_000),
        ("claude-opus-4-8", 8192, 32_000),  # under claude-opus-4's 32k (OUTPUT_CAPS)
        ("claude-3-5-haiku-20241022", 8192, None),  # its cap is 8192: nothing to gain
        ("claude-3-haiku-20240307", 4096, None),  # the default is capped too
        ("some-other-model", 8192, None),  # unknown: never past the caller's value
    ],
)
async def test_the_default_escalates_up_to_the_models_cap(
    autojump_clock: Any, name: str, first: int, escalated: int | None, turn: Any
) -> None:
    model = ScriptedModel([cut("cut sho"), DONE, DONE])
    events, end = await turn(model.client(), WRITE, model=name, max_tokens=None)
    assert end.reason is TurnEndReason.COMPLETED
    if escalated is None:
        assert reasons(events) == [TransitionReason.MAX_OUTPUT_TOKENS_RECOVERY]
        assert sent_max_tokens(model) == [first, first]
        assert [m.text for m in end.messages if isinstance(m, AssistantMessage)] == [
            "cut sho",
            "the end",
        ]
    else:
        assert reasons(events) == [TransitionReason.MAX_OUTPUT_TOKENS_ESCALATE]
        assert sent_max_tokens(model) == [first, escalated]
        # the dropped answer: a tombstone, not in the history
        (tombstone,) = [e for e in events if isinstance(e, AttemptDiscarded)]
        assert tombstone.reason is TransitionReason.MAX_OUTPUT_TOKENS_ESCALATE
        assert tombstone.error is None
        assert [m.text for m in end.messages if isinstance(m, AssistantMessage)] == ["the end"]


async def test_an_explicit_max_tokens_goes_straight_to_continuation(
    autojump_clock: Any, turn: Any
) -> None:
    model = ScriptedModel([cut("a"), cut("b"), DONE])
    events, end = await turn(model.client(), WRITE, model="claude-sonnet-5-5", max_tokens=1000)
    assert reasons(events) == [TransitionReason.MAX_OUTPUT_TOKENS_RECOVERY] * 2
    assert sent_max_tokens(model) == [1000, 1000, 1000]
    assert end.reason is TurnEndReason.COMPLETED


async def test_the_cap_override_wins(autojump_clock: Any, turn: Any) -> None:
    model = ScriptedModel([cut("a"), DONE])
    events, _ = await turn(
        model.client(),
        WRITE,
        model="some-other-model",
        max_tokens=None,
        options=TurnOptions(output_token_cap=20_000),
    )
    assert reasons(events) == [TransitionReason.MAX_OUTPUT_TOKENS_ESCALATE]
    assert sent_max_tokens(model) == [8192, 20_000]


async def test_the_session_default_escalates(autojump_clock: Any) -> None:
    model = ScriptedModel([cut("a"), DONE])
    session = Session(model.client(), [], model="claude-sonnet-5-5")
    async with session.submit("write") as events:
        async for _ in events:
            pass
    assert sent_max_tokens(model) == [8192, 64_000]
    assert session.messages[-1].text == "the end"  # type: ignore[union-attr]


@pytest.mark.parametrize("max_tokens", [None, 500])
async def test_context_window_exceeded_continues(
    autojump_clock: Any, max_tokens: int | None, turn: Any
) -> None:
    model = ScriptedModel([cut("long answer, cut", "model_context_window_exceeded"), DONE])
    events, end = await turn(
        model.client(), WRITE, model="claude-sonnet-5-5", max_tokens=max_tokens
    )
    # never reported as completed with the cut answer: it is continued (no escalation,
    # which would not help)
    assert reasons(events) == [TransitionReason.MAX_OUTPUT_TOKENS_RECOVERY]
    expected = DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens
    assert sent_max_tokens(model) == [expected, expected]
    assert model.requests[1].body["messages"][-1] == {"role": "user", "content": CONTINUE_PROMPT}
    assert end.reason is TurnEndReason.COMPLETED
    assert end.messages[-1].text == "the end"  # type: ignore[union-attr]


async def test_context_window_exceeded_every_time_is_an_error(
    autojump_clock: Any, turn: Any
) -> None:
    model = ScriptedModel([cut(f"p{i}", "model_context_window_exceeded") for i in range(4)])
    _, end = await turn(model.client(), WRITE, model="m", max_tokens=100)
    assert end.reason is TurnEndReason.ERROR
    assert len(model.requests) == 4


@settings(max_examples=40, deadline=None)
@given(
    name=st.one_of(
        st.sampled_from(sorted(MODEL_OUTPUT_CAPS)).flatmap(
            lambda p: st.text("abc-0123456789", max_size=12).map(lambda s: p + s)
        ),
        st.text("xyz-0123456789", min_size=1, max_size=20),
    ),
    max_tokens=st.one_of(st.none(), st.integers(1, 200_000)),
    override=st.one_of(st.none(), st.integers(1, 200_000)),
    cuts=st.integers(0, 5),
)
def test_max_tokens_never_passes_the_cap(
    name: str, max_tokens: int | None, override: int | None, cuts: int, turn: Any
) -> None:
    """Whatever the model, caller value and override: the first request carries the
    caller's value (or the capped default); a later one differs only after a default,
    escalated once, to min(64k, cap) and only upward."""
    model = ScriptedModel([cut(f"c{i}") for i in range(cuts)] + [DONE])

    async def main() -> None:
        await turn(
            model.client(),
            WRITE,
            model=name,
            max_tokens=max_tokens,
            options=TurnOptions(output_token_cap=override),
        )

    with warnings.catch_warnings():
        # Some of the table's prefixes name retired models: their warning is not the point.
        warnings.simplefilter("ignore", ModelDeprecationWarning)
        run_virtual(main)
    sent = sent_max_tokens(model)
    cap = model_output_cap(name, override)
    if max_tokens is not None:
        assert set(sent) == {max_tokens}
    else:
        first = DEFAULT_MAX_TOKENS if cap is None else min(DEFAULT_MAX_TOKENS, cap)
        assert sent[0] == first
        assert all(s <= max(first, cap or first) for s in sent)
        if cuts and cap is not None and min(ESCALATED_MAX_TOKENS, cap) > first:
            assert sent[1] == min(ESCALATED_MAX_TOKENS, cap)
            assert set(sent[1:]) == {sent[1]}
        else:
            assert set(sent) == {first}
