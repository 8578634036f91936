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
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import pytest
import trio

from trio_agent import AnthropicClient, Message, Tool, TurnEnd, UserMessage, query
from trio_agent.lowlevel import StreamItem
from trio_agent.testing import ScriptedModel, check_history


@attrs.define(eq=False)
class Models:
    """One client over several scripted models, chosen by each request's model."""

    models: Mapping[str, ScriptedModel]
    clients: dict[str, AnthropicClient] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.clients = {name: m.client() for name, m in self.models.items()}

    def stream(
        self, **request: Any
    ) -> contextlib.AbstractAsyncContextManager[trio.abc.ReceiveChannel[StreamItem]]:
        return self.clients[request["model"]].stream(**request)

    def requests(self, name: str) -> int:
        return len(self.models[name].requests)


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
