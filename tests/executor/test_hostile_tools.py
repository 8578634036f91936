"""Hostile tools: what a tool (or a permission check) can throw at the executor.

Exceptions whose ``__str__`` raises, returns the API cannot take, results too large,
progress at any rate: each becomes a result (or bounded progress), never a crash.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Mapping
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import (
    OpaqueBlock,
    TextBlock,
    ThinkingBlock,
    Tool,
    ToolContext,
    ToolFinished,
    ToolOutput,
    ToolProgress,
    ToolResult,
    ToolResultBlock,
    ToolUseBlock,
    TurnOptions,
    open_tool_executor,
)
from trio_agent._executor._progress import MAX_UNREAD
from trio_agent.testing import run_virtual

SCHEMA: Mapping[str, Any] = {"type": "object"}


def use(i: int, name: str) -> ToolUseBlock:
    return ToolUseBlock(f"toolu_{i}", name, {})


def returning(value: Any, **kw: Any) -> Tool:
    async def run(input: Mapping[str, Any], ctx: ToolContext) -> Any:
        return value

    return Tool("T", "d", SCHEMA, run, **kw)


# -- exceptions whose __str__ / __repr__ raise ----------------------------------------


class Nasty(Exception):
    def __init__(self, str_raises: bool, repr_raises: bool) -> None:
        super().__init__("nasty")
        self.str_raises, self.repr_raises = str_raises, repr_raises

    def __str__(self) -> str:
        if self.str_raises:
            raise RuntimeError("__str__ raised")
        return "plain"

    def __repr__(self) -> str:
        if self.repr_raises:
            raise ValueError("__repr__ raised")
        return "Nasty(repr)"


@pytest.mark.parametrize(("str_raises", "repr_raises"), [(True, False), (True, True)])
async def test_tool_exception_whose_str_raises_is_an_error_result(
    str_raises: bool, repr_raises: bool, run_calls: Any
) -> None:
    async def run(input: Mapping[str, Any], ctx: ToolContext) -> str:
        raise Nasty(str_raises, repr_raises)

    (result,) = await run_calls([Tool("T", "d", SCHEMA, run)], [use(0, "T")])
    assert result.is_error
    assert result.started
    assert isinstance(result.content, str)
    assert result.content.startswith("Error: T raised Nasty: ")
    expected = "Nasty(repr)" if not repr_raises else "(its __str__ and __repr__ raised)"
    assert result.content.endswith(expected)


@pytest.mark.parametrize(("str_raises", "repr_raises"), [(True, False), (True, True)])
async def test_permission_check_exception_whose_str_raises_is_a_denial(
    str_raises: bool, repr_raises: bool, run_calls: Any
) -> None:
    ran: list[str] = []

    async def run(input: Mapping[str, Any], ctx: ToolContext) -> str:
        ran.append(ctx.tool_use_id)
        return "ran"

    async def can_use_tool(tool: Tool, input: Mapping[str, Any], ctx: ToolContext) -> Any:
        raise Nasty(str_raises, repr_raises)

    (result,) = await run_calls(
        [Tool("T", "d", SCHEMA, run)], [use(0, "T")], options=TurnOptions(can_use_tool=can_use_tool)
    )
    assert ran == []
    assert result.is_error
    assert not result.started
    assert isinstance(result.content, str)
    assert result.content.startswith("Error: the permission check for T failed: Nasty: ")


# -- what a tool may return -------------------------------------------------------------

BAD_RETURNS = st.one_of(
    st.binary(max_size=4),
    st.just(bytearray(b"x")),
    st.integers(),
    st.none(),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.just(ToolUseBlock("t", "n", {})),
    st.just(ToolResultBlock("t", "x")),
    st.just(ThinkingBlock("x", "s")),
    st.just(object()),
    st.just(OpaqueBlock({"type": "tool_use", "id": "t"})),
)
GOOD_BLOCKS = st.sampled_from(
    [
        TextBlock("a"),
        OpaqueBlock({"type": "image", "source": {"type": "base64", "data": "AA=="}}),
        OpaqueBlock({"type": "document", "source": {"type": "text", "data": "d"}}),
        OpaqueBlock({"type": "search_result", "source": "s", "title": "t", "content": []}),
    ]
)


@settings(max_examples=60, deadline=None)
@given(
    bad=BAD_RETURNS,
    good=st.lists(GOOD_BLOCKS, max_size=3),
    shape=st.sampled_from(["bare", "in list", "in ToolOutput", "list in ToolOutput"]),
    position=st.integers(0, 3),
)
def test_invalid_returns_are_error_results_naming_tool_and_type(
    bad: Any, good: list[Any], shape: str, position: int, run_calls: Any
) -> None:
    items = list(good)
    items.insert(min(position, len(items)), bad)
    value: Any = {
        "bare": bad,
        "in list": items,
        "in ToolOutput": ToolOutput(bad),
        "list in ToolOutput": ToolOutput(items),
    }[shape]
    (result,) = run_virtual(lambda: run_calls([returning(value)], [use(0, "T")]))
    assert result.is_error
    assert result.started
    assert isinstance(result.content, str)
    assert result.content.startswith("Error: T returned ")
    assert type(bad).__name__ in result.content


@settings(max_examples=30, deadline=None)
@given(good=st.lists(GOOD_BLOCKS, max_size=4), wrap=st.booleans())
def test_result_blocks_the_api_accepts_are_kept(
    good: list[Any], wrap: bool, run_calls: Any
) -> None:
    value = ToolOutput(good) if wrap else good
    (result,) = run_virtual(lambda: run_calls([returning(value)], [use(0, "T")]))
    assert result == ToolResult("toolu_0", tuple(good), started=True)


# -- the size cap -------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    size=st.integers(0, 3000),
    cap=st.integers(1, 2000),
    tool_cap=st.one_of(st.none(), st.integers(1, 2000)),
    as_blocks=st.booleans(),
)
def test_results_are_capped_with_a_note_of_the_cut(
    size: int, cap: int, tool_cap: int | None, as_blocks: bool, run_calls: Any
) -> None:
    text = "".join(chr(0x61 + i % 26) for i in range(size))
    value: Any = [TextBlock(text[: size // 2]), TextBlock(text[size // 2 :])] if as_blocks else text
    tool = returning(value, max_result_chars=tool_cap)
    (result,) = run_virtual(
        lambda: run_calls([tool], [use(0, "T")], options=TurnOptions(max_result_chars=cap))
    )
    limit = tool_cap if tool_cap is not None else cap
    content = result.content
    if isinstance(content, str):
        kept, note = content[: min(size, limit)], content[min(size, limit) :]
    else:
        texts = [b.text for b in content if isinstance(b, TextBlock)]
        note = texts.pop() if size > limit else ""
        kept = "".join(texts)
    assert kept == text[:limit]
    if size > limit:
        assert f"{size - limit:,} of {size:,} characters were cut" in note
        assert f"the limit is {limit:,}" in note
    else:
        assert note == ""
        assert result.content == (value if isinstance(value, str) else tuple(value))


def test_a_bad_cap_is_refused() -> None:
    from trio_agent import ToolDefinitionError

    with pytest.raises(ToolDefinitionError):
        returning("x", max_result_chars=0)

    async def main() -> None:
        with pytest.raises(ValueError, match="max_result_chars"):
            async with open_tool_executor([], options=TurnOptions(max_result_chars=0)):
                pass  # pragma: no cover

    run_virtual(main)


# -- bounded progress ----------------------------------------------------------------------


async def _report_storm(reports: int, tools: int) -> tuple[list[Any], int, float]:
    """*tools* tools report *reports* times each as fast as they can, to a slow reader;
    what the reader got, the peak traced memory, and when the tools were done."""

    async def run(input: Mapping[str, Any], ctx: ToolContext) -> str:
        for i in range(reports):
            ctx.progress({"line": i})
            if i % 1000 == 999:
                await trio.sleep(0.001)
        return "done"

    tool = Tool("P", "d", SCHEMA, run, concurrency_safe=True)
    received: list[Any] = []
    done_at = 0.0
    tracemalloc.start()
    tracemalloc.reset_peak()
    try:
        async with open_tool_executor([tool]) as executor:
            for i in range(tools):
                executor.add_tool(use(i, "P"))
            executor.finish()
            async for item in executor.progress:
                received.append(item)
                if isinstance(item, ToolFinished):
                    done_at = max(done_at, trio.current_time())
                await trio.sleep(0.05)  # a slow reader
            results = [r async for r in executor.results]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [r.content for r in results] == ["done"] * tools
    return received, peak, done_at


def test_progress_storms_keep_memory_flat_and_lose_nothing_silently() -> None:
    tools = 4
    small, small_peak, _ = run_virtual(lambda: _report_storm(2_000, tools))
    big, big_peak, _ = run_virtual(lambda: _report_storm(50_000, tools))
    # 25 times the reports, not 25 times the memory (the unbounded channel grew
    # by ~25x here: every report was kept until read).
    assert big_peak < 2 * small_peak
    for received, reports in ((small, 2_000), (big, 50_000)):
        progress = [p for p in received if isinstance(p, ToolProgress)]
        assert sum(isinstance(p, ToolFinished) for p in received) == tools
        for i in range(tools):
            mine = [p for p in progress if p.tool_use_id == f"toolu_{i}"]
            # Nothing lost silently: what arrived plus what it replaced is everything,
            # and the latest report always arrives, before its ToolFinished.
            assert sum(1 + p.dropped for p in mine) == reports
            assert mine[-1].data == {"line": reports - 1}
            finished = next(
                k
                for k, p in enumerate(received)
                if isinstance(p, ToolFinished) and p.tool_use_id == f"toolu_{i}"
            )
            assert received.index(mine[-1]) < finished
        # The slow reader was not buried: at most MAX_UNREAD reports per call waited.
        assert len(received) <= tools * (MAX_UNREAD + 2)
    assert len(big) <= tools * (MAX_UNREAD + 2)  # 200,000 reports: coalesced


async def test_progress_is_delivered_at_once_to_a_waiting_reader(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Normal rates are not coalesced: each report arrives at once, dropped == 0."""

    async def run(input: Mapping[str, Any], ctx: ToolContext) -> str:
        for i in range(20):
            ctx.progress(i)
            await trio.sleep(0.001)
        return "done"

    tool = Tool("P", "d", SCHEMA, run, concurrency_safe=True)
    got: list[tuple[float, Any]] = []
    async with open_tool_executor([tool]) as executor:
        for i in range(10):
            executor.add_tool(use(i, "P"))
        executor.finish()
        async for item in executor.progress:
            if isinstance(item, ToolProgress):
                assert item.dropped == 0
                got.append((trio.current_time(), item.data))
    assert len(got) == 200
    # Report i of every tool arrives at virtual time i ms: no delay.
    assert all(t == pytest.approx(data * 0.001) for t, data in got)


@pytest.mark.parametrize("depth", [150, 201, 5000])
async def test_deep_input_added_directly_is_an_error_result_not_a_recursion_error(
    depth: int, run_calls: Any
) -> None:
    ran: list[int] = []

    async def run(input: Mapping[str, Any], ctx: ToolContext) -> str:
        ran.append(depth)
        return "ran"

    deep: Any = []
    for _ in range(depth - 1):
        deep = [deep]
    tool = Tool("T", "d", {"type": "object", "properties": {"a": {}}}, run)
    (result,) = await run_calls([tool], [ToolUseBlock("toolu_0", "T", {"a": deep})])
    if depth <= 200:
        assert result.content == "ran"
    else:
        assert result.is_error
        assert not result.started
        assert ran == []
        assert "nested deeper than 200 levels" in str(result.content)
