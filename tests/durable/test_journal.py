"""The turn journal without DBOS: a turn cut short, then re-run from its start,
answers recorded model calls and tool calls from the record."""

from __future__ import annotations

import pathlib
from collections.abc import Mapping
from typing import Any

import attrs
import httpx
import trio

from trio_agent import (
    AnthropicClient,
    RetryPolicy,
    Session,
    TextBlock,
    Tool,
    ToolContext,
    ToolUseBlock,
    TurnEnd,
)
from trio_agent.durable import SqlSessionStore, current_turn_id, idempotency_key
from trio_agent.durable._journal import TurnJournal
from trio_agent.testing import Faults, ScriptedAnswer, ScriptedModel, Timing

FAST = Timing(first_event_delay=0.0, token_delay=0.0)


@attrs.define
class World:
    effects: list[str] = attrs.field(factory=list)
    keys: list[str] = attrs.field(factory=list)
    block_started: trio.Event = attrs.field(factory=trio.Event)
    block_forever: bool = True


def tools(world: World) -> list[Tool]:
    async def effect(input: Mapping[str, Any], ctx: ToolContext) -> str:
        world.effects.append(ctx.tool_use_id)
        world.keys.append(idempotency_key(ctx))
        return f"effect {input['n']}"

    async def block(input: Mapping[str, Any], ctx: ToolContext) -> str:
        world.keys.append(idempotency_key(ctx))
        world.block_started.set()
        if world.block_forever:
            await trio.sleep_forever()
        return "unblocked"

    schema: dict[str, Any] = {"type": "object"}
    return [Tool("Effect", "Side effect.", schema, effect), Tool("Block", "Waits.", schema, block)]


def client(model: ScriptedModel) -> AnthropicClient:
    return AnthropicClient(
        api_key="k",
        base_url="http://scripted",
        http_client=httpx.AsyncClient(transport=model.transport()),
        retry=RetryPolicy(max_retries=0),
    )


async def run_turn(
    store: SqlSessionStore, model: ScriptedModel, world: World
) -> tuple[TurnEnd | None, TurnJournal]:
    journal = await TurnJournal.open(store, "turn-1")
    journal.bind()
    session = Session(journal.client(client(model)), journal.tools(tools(world)), model="m")
    end = None
    async with session.submit("go") as events:
        async for event in events:
            if isinstance(event, TurnEnd):
                end = event
    return end, journal


async def crash_when(
    predicate: Any, store: SqlSessionStore, model: ScriptedModel, world: World
) -> TurnJournal:
    """Run the turn and cut it (as a crash would) once *predicate(journal)* holds."""
    journal = await TurnJournal.open(store, "turn-1")
    session = Session(journal.client(client(model)), journal.tools(tools(world)), model="m")
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:

            async def turn() -> None:
                journal.bind()
                async with session.submit("go") as events:
                    async for _ in events:
                        pass

            nursery.start_soon(turn)
            await world.block_started.wait()
            while not predicate(store.journal("turn-1")):
                await trio.sleep(0.01)
            scope.cancel()
    assert scope.cancelled_caught
    return journal


def effect(i: str) -> ToolUseBlock:
    return ToolUseBlock(i, "Effect", {"n": 1})


async def test_recorded_answer_and_tool_result_are_replayed(tmp_path: pathlib.Path) -> None:
    store = SqlSessionStore.connect(f"sqlite:///{tmp_path / 'db.sqlite'}")
    world = World()
    blocks = [effect("toolu_a"), ToolUseBlock("toolu_b", "Block", {})]
    first = ScriptedModel([ScriptedAnswer(blocks=blocks, timing=FAST)])
    await crash_when(lambda j: "model/0" in j and len(j) == 2, store, first, world)
    assert world.effects == ["toolu_a"]

    # The re-run: the model is asked only for what was not recorded.
    world.block_forever = False
    again = ScriptedModel([ScriptedAnswer(blocks=[TextBlock("fin")], timing=FAST)])
    end, journal = await run_turn(store, again, world)
    assert end is not None
    assert end.reason == "completed"
    assert len(again.requests) == 1
    assert journal.replayed_tools == 1
    assert world.effects == ["toolu_a"]  # not run again
    assert [m.role for m in end.messages] == ["user", "assistant", "user", "assistant"]
    assert end.messages[2].tool_results[0].content == "effect 1"


async def test_a_cut_answer_asked_again_still_finds_the_recorded_tool(
    tmp_path: pathlib.Path,
) -> None:
    store = SqlSessionStore.connect(f"sqlite:///{tmp_path / 'db.sqlite'}")
    world = World()
    blocks = [effect("toolu_a"), ToolUseBlock("toolu_b", "Block", {})]
    events = ScriptedAnswer(blocks=blocks).events()
    # The answer stalls before its message_delta: its blocks are out, it never ends.
    stall = Faults(stall_before_event=len(events) - 2, stall_seconds=3600.0)
    first = ScriptedModel([ScriptedAnswer(blocks=blocks, timing=FAST, faults=stall)])
    journal = await crash_when(lambda j: len(j) == 1, store, first, world)
    assert "model/0" not in store.journal("turn-1")  # the answer never ended
    assert journal.replayed_tools == 0

    # Asked again, the model makes the same call under another id.
    world.block_forever = False
    again = ScriptedModel(
        [
            ScriptedAnswer(
                blocks=[effect("toolu_z"), ToolUseBlock("toolu_y", "Block", {})], timing=FAST
            ),
            ScriptedAnswer(blocks=[TextBlock("fin")], timing=FAST),
        ]
    )
    end, journal = await run_turn(store, again, world)
    assert end is not None
    assert end.reason == "completed"
    assert journal.replayed_tools == 1
    assert world.effects == ["toolu_a"]
    assert end.messages[2].tool_results[0].tool_use_id == "toolu_z"
    # Block was cut (it never returned) and ran again under the new id toolu_y:
    # its idempotency key is the same both times, and is not made of the ids.
    effect_seen, first_key, second_key = world.keys
    assert effect_seen == "turn-1/" + effect_key()  # the effect ran once, before the cut
    assert first_key == second_key
    assert first_key.startswith("turn-1/tool/0/Block/")
    assert "toolu" not in first_key


def effect_key() -> str:
    from trio_agent.durable._journal import _call_key  # pyright: ignore[reportPrivateUsage]

    return _call_key(0, "Effect", {"n": 1}, 0)


async def test_outside_a_durable_turn_the_key_is_the_tool_use_id(tmp_path: pathlib.Path) -> None:
    assert current_turn_id() is None
    assert idempotency_key(ToolContext("toolu_q", "Effect")) == "toolu_q"
