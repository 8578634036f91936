"""A call's input is converted to plain JSON once: the safety check and the tool see it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import Tool, ToolContext, ToolUseBlock
from trio_agent._tools import plain_json

values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.text(max_size=4), values, max_size=4), st.booleans())
def test_the_safety_check_and_the_tool_get_the_same_plain_input(
    run_calls: Any, raw: dict[str, Any], check_raises: bool
) -> None:
    checked: list[Mapping[str, Any]] = []
    ran: list[Mapping[str, Any]] = []

    def safe(input: Mapping[str, Any]) -> bool:
        checked.append(input)
        if check_raises:
            raise ValueError("cannot tell")
        return True

    async def run(input: Mapping[str, Any], ctx: ToolContext) -> str:
        ran.append(input)
        return "ok"

    tool = Tool("T", "d", {"type": "object"}, run, concurrency_safe=safe)

    async def main() -> None:
        results = await run_calls(
            [tool], [ToolUseBlock("toolu_1", "T", raw), ToolUseBlock("toolu_2", "T", raw)]
        )
        assert [r.is_error for r in results] == [False, False]

    trio.run(main)
    assert len(checked) == len(ran) == 2
    for seen, given_to_tool in zip(checked, ran, strict=True):
        assert seen is given_to_tool
        assert type(seen) is dict
        assert seen == plain_json(ToolUseBlock("t", "T", raw).input)
    assert checked[0] is not checked[1]  # each call its own copy
