"""Tool.validate's shortcut for ``{"type": "object"}`` answers as full validation does."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import Tool, ToolContext, ToolUseBlock


async def run(input: Mapping[str, Any], ctx: ToolContext) -> str:
    return "x"  # pragma: no cover - never run here


scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=3), inner, max_size=3)
        | st.dictionaries(st.text(max_size=3), inner, max_size=3).map(MappingProxyType)
    ),
    max_leaves=12,
)


@settings(max_examples=150)
@given(json_values)
def test_the_object_shortcut_answers_as_the_validator(value: Any) -> None:
    fast = Tool("A", "d", {"type": "object"}, run)
    # Same meaning, but not the exact shortcut schema: the compiled validator runs.
    full = Tool("B", "d", {"type": "object", "title": "t"}, run)
    expected = full.validate(value)
    assert fast.validate(value) == expected
    is_object = isinstance(value, Mapping)
    assert (expected is None) == is_object


def test_wire_input_passes_the_shortcut() -> None:
    fast = Tool("A", "d", {"type": "object"}, run)
    assert fast.validate(ToolUseBlock("t", "A", {"a": (1, {"b": 2})}).input) is None
    assert fast.validate([1]) == "[1] is not of type 'object'"  # pyright: ignore[reportArgumentType]
