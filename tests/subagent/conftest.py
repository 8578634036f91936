"""Fixtures for the subagent tests (tests/subagent).

A subagent shares its parent's client, and two subagents side by side ask the model
in an order Trio's scheduler picks. So the tests give each agent a model name and
its own :class:`~trio_agent.testing.ScriptedModel`; :class:`Models` is the client
that sends each request to the scripted model of its ``model`` (a real
``AnthropicClient`` each: the loop sees one client, as a subagent does in
production).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any, final

import attrs
import pytest
import trio

from trio_agent import AnthropicClient, Message, Tool, TurnEnd, Usage, UserMessage, query
from trio_agent.lowlevel import StreamEvent, StreamItem, StreamResult
from trio_agent.testing import ScriptedModel, check_history


@attrs.define(eq=False)
class Models:
    """One client over several scripted models, chosen by each request's model."""

    models: Mapping[str, ScriptedModel]
    clients: dict[str, AnthropicClient] = attrs.field(init=False)

    #: What each model's calls were billed, as the loop counts it: a call's answer's
    #: usage, or for a call cut short the usage its ``message_start`` reported.
    billed: dict[str, Usage] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.clients = {name: m.client() for name, m in self.models.items()}
        self.billed = {name: Usage() for name in self.models}

    @contextlib.asynccontextmanager
    async def stream(self, **request: Any) -> AsyncGenerator[trio.abc.ReceiveChannel[StreamItem]]:
        name = request["model"]
        counted: _Counted | None = None
        try:
            async with self.clients[name].stream(**request) as items:
                counted = _Counted(items)
                yield counted
        finally:
            if counted is not None:
                self.billed[name] = self.billed[name] + counted.billed()


@final
class _Counted(trio.abc.ReceiveChannel[StreamItem]):
    """A call's stream items, passed on as they are; notes the usage it reported."""

    def __init__(self, items: trio.abc.ReceiveChannel[StreamItem]) -> None:
        self._items = items
        self.start: Usage | None = None
        self.result: Usage | None = None

    async def receive(self) -> StreamItem:
        item = await self._items.receive()
        if isinstance(item, StreamResult):
            self.result = item.message.usage
        elif isinstance(item, StreamEvent) and item.start_message is not None:
            self.start = item.start_message.usage
        return item

    async def aclose(self) -> None:
        await self._items.aclose()

    def billed(self) -> Usage:
        return self.result or self.start or Usage()


async def run_turn(
    client: Any,
    tools: Sequence[Tool],
    *,
    prompt: str = "go",
    model: str = "parent",
    on_event: Any = None,
    **kw: Any,
) -> tuple[list[Any], TurnEnd]:
    """One whole parent turn; every event and the checked TurnEnd."""
    events: list[Any] = []
    messages: list[Message] = [UserMessage(prompt)]
    async with query(client, messages, tools=tools, model=model, max_tokens=100, **kw) as stream:
        async for event in stream:
            events.append(event)
            if on_event is not None:
                on_event(event)
    end = events[-1]
    assert isinstance(end, TurnEnd), end
    check_history(end.messages, strict=True)
    for run in end.subagents:
        check_history(run.end.messages, strict=True)
    return events, end


@pytest.fixture(scope="session")
def routed() -> type[Models]:
    """``client = routed({"parent": ScriptedModel(...), "child": ...})``: one client
    over scripted models, each request sent to its model's."""
    return Models


@pytest.fixture(scope="session")
def parent_turn() -> Any:
    """``events, end = await parent_turn(client, tools, prompt="go", model="parent",
    **query_kw)``: one whole turn, its history and every subagent's checked."""
    return run_turn
