"""A journaled client's answers, recorded and replayed.

The recorded stream gives exactly what the inner client gave, its result recorded
before the caller has it; the replayed one gives each recorded block as a message,
then the result, without asking the model. Over answers of any shape (hypothesis), a
consumer cancelled mid-answer, and one that leaves early.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trio_agent import (
    AssistantMessage,
    ContentBlock,
    ModelClient,
    TextBlock,
    ToolUseBlock,
    UserMessage,
)
from trio_agent.durable import SqlSessionStore
from trio_agent.durable._journal import TurnJournal
from trio_agent.lowlevel import StreamEvent, StreamItem, StreamResult
from trio_agent.testing import Faults, ScriptedAnswer, ScriptedModel, Timing

FAST = Timing(first_event_delay=0.0, token_delay=0.0)
REQUEST: dict[str, Any] = {
    "model": "m",
    "messages": [UserMessage("go")],
    "max_tokens": 64,
}


async def read(
    client: ModelClient, on_item: Callable[[StreamItem], None] | None = None
) -> list[StreamItem]:
    """Every item of one answer of *client*."""
    items: list[StreamItem] = []
    async with client.stream(**REQUEST) as channel:
        async for item in channel:
            if on_item is not None:
                on_item(item)
            items.append(item)
    return items


def shape(item: StreamItem) -> Any:
    """What an item says, without its timings."""
    if isinstance(item, StreamEvent):
        return ("event", item.type, item.data)
    if isinstance(item, AssistantMessage):
        return ("block", item.content)
    assert isinstance(item, StreamResult)
    return ("result", item.message.content, item.message.stop_reason)


text_blocks = st.builds(TextBlock, st.text(min_size=1, max_size=40))
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
tool_inputs = st.dictionaries(st.text(min_size=1, max_size=8), json_values, max_size=4)


@st.composite
def answers(draw: st.DrawFn) -> list[ContentBlock]:
    kinds = draw(st.lists(st.sampled_from(["text", "tool"]), min_size=1, max_size=5))
    blocks: list[ContentBlock] = []
    for n, kind in enumerate(kinds):
        if kind == "text":
            blocks.append(draw(text_blocks))
        else:
            blocks.append(ToolUseBlock(f"toolu_{n:02}", "Effect", draw(tool_inputs)))
    return blocks


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(blocks=answers())
def test_a_recorded_answer_is_the_inner_one_and_replays_as_recorded(
    blocks: list[ContentBlock],
) -> None:
    async def body() -> None:
        with tempfile.TemporaryDirectory() as tmp:
            store = SqlSessionStore.connect(f"sqlite:///{Path(tmp) / 'db.sqlite'}")
            answer = ScriptedAnswer(blocks=blocks, timing=FAST)

            raw = await read(ScriptedModel([answer]).client())

            journal = await TurnJournal.open(store, "turn-1")
            model = ScriptedModel([answer])
            recorded = await read(journal.client(model.client()))
            assert [shape(i) for i in recorded] == [shape(i) for i in raw]
            assert len(model.requests) == 1
            assert journal.calls == 1

            # The turn runs again: the answer comes from the record, the model unasked.
            again = await TurnJournal.open(store, "turn-1")
            unasked = ScriptedModel([answer])
            replayed = await read(again.client(unasked.client()))
            assert unasked.requests == []
            result = raw[-1]
            assert isinstance(result, StreamResult)
            message = result.message
            assert [shape(i) for i in replayed] == [
                *(("block", (b,)) for b in message.content),
                ("result", message.content, message.stop_reason),
            ]

    trio.run(body, clock=trio.testing.MockClock(autojump_threshold=0))


async def test_the_result_is_recorded_before_the_caller_has_it(
    tmp_path: Path, autojump_clock: Any
) -> None:
    store = SqlSessionStore.connect(f"sqlite:///{tmp_path / 'db.sqlite'}")
    journal = await TurnJournal.open(store, "turn-1")
    seen: list[tuple[str, bool]] = []

    def on_item(item: StreamItem) -> None:
        seen.append((type(item).__name__, "model/0" in journal.recorded))

    model = ScriptedModel([ScriptedAnswer(blocks=[TextBlock("hi")], timing=FAST)])
    await read(journal.client(model.client()), on_item)
    assert seen[-1] == ("StreamResult", True)
    assert all(not recorded for _, recorded in seen[:-1])
    assert store.journal("turn-1")["model/0"]["content"] == [{"type": "text", "text": "hi"}]


async def test_a_caller_cancelled_mid_answer_records_nothing(
    tmp_path: Path, autojump_clock: Any
) -> None:
    store = SqlSessionStore.connect(f"sqlite:///{tmp_path / 'db.sqlite'}")
    blocks: list[ContentBlock] = [TextBlock("a"), TextBlock("b")]
    events = ScriptedAnswer(blocks=blocks).events()
    stall = Faults(stall_before_event=len(events) - 2, stall_seconds=3600.0)
    journal = await TurnJournal.open(store, "turn-1")
    model = ScriptedModel([ScriptedAnswer(blocks=blocks, timing=FAST, faults=stall)])
    got: list[StreamItem] = []
    with trio.move_on_after(60) as scope:
        await read(journal.client(model.client()), got.append)
    assert scope.cancelled_caught
    assert any(isinstance(i, AssistantMessage) for i in got)  # it was mid-answer
    assert journal.recorded == {}
    assert store.journal("turn-1") == {}

    # Nothing recorded: the turn run again asks the model.
    again = await TurnJournal.open(store, "turn-1")
    model2 = ScriptedModel([ScriptedAnswer(blocks=blocks, timing=FAST)])
    items = await read(again.client(model2.client()))
    assert len(model2.requests) == 1
    assert isinstance(items[-1], StreamResult)


async def test_a_replayed_answer_left_early_or_closed(tmp_path: Path, autojump_clock: Any) -> None:
    store = SqlSessionStore.connect(f"sqlite:///{tmp_path / 'db.sqlite'}")
    blocks: list[ContentBlock] = [TextBlock("a"), TextBlock("b")]
    journal = await TurnJournal.open(store, "turn-1")
    model = ScriptedModel([ScriptedAnswer(blocks=blocks, timing=FAST)])
    await read(journal.client(model.client()))

    replaying = (await TurnJournal.open(store, "turn-1")).client(model.client())
    async with replaying.stream(**REQUEST) as channel:
        first = await channel.receive()  # then leave
    assert isinstance(first, AssistantMessage)
    assert first.content == (TextBlock("a"),)

    replaying = (await TurnJournal.open(store, "turn-1")).client(model.client())
    async with replaying.stream(**REQUEST) as channel:
        kinds = [type(await channel.receive()).__name__ for _ in range(3)]
        with pytest.raises(trio.EndOfChannel):
            await channel.receive()
        await channel.aclose()
        with pytest.raises(trio.ClosedResourceError):
            await channel.receive()
    assert kinds == ["AssistantMessage", "AssistantMessage", "StreamResult"]
    assert len(model.requests) == 1  # both from the record
