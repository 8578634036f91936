"""ScriptedModel renders each answer once: serving it again reuses the same bytes."""

from __future__ import annotations

import gc

import attrs
from hypothesis import given, settings

from trio_agent.testing import (
    ScriptedAnswer,
    _sse_render,  # pyright: ignore[reportPrivateUsage]
    plan_stream,
    strategies,
)


@settings(max_examples=20, deadline=None)
@given(strategies.scripted_answers())
def test_an_answer_is_rendered_once(answer: ScriptedAnswer) -> None:
    first = plan_stream(answer)
    assert plan_stream(answer) is first
    # An equal but distinct answer renders to the same bytes.
    twin = attrs.evolve(answer)
    assert twin is not answer
    assert plan_stream(twin).chunks == first.chunks


def test_the_cache_lets_answers_go() -> None:
    made = ScriptedAnswer(blocks=[])
    plan_stream(made)
    key = id(made)
    assert key in _sse_render._PLANS  # pyright: ignore[reportPrivateUsage]
    del made
    gc.collect()
    assert key not in _sse_render._PLANS  # pyright: ignore[reportPrivateUsage]
