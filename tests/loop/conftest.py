"""Fixtures for the loop tests (tests/loop): one way to run a whole turn.

A test takes ``turn`` as an argument and awaits it::

    async def test_something(autojump_clock: Any, turn: Any) -> None:
        model = ScriptedModel([ScriptedAnswer(blocks=[TextBlock("Done.")])])
        events, end = await turn(model.client(), options=TurnOptions(max_turns=3))
        assert end.reason is TurnEndReason.COMPLETED

A module that always runs its turns one way (a compactor, a retry policy, a leak
check, a loopback server...) wraps ``turn`` in a fixture of its own, named for what
it adds (``compacting_turn``, ``timed_turn``...).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest

from trio_agent import Message, ModelClient, Tool, TurnEnd, UserMessage, query
from trio_agent.testing import check_history

#: The history a turn starts from unless the test passes its own.
GO: tuple[Message, ...] = (UserMessage("go"),)


async def _turn(
    client: ModelClient,
    messages: Sequence[Message] = GO,
    *,
    tools: Sequence[Tool] = (),
    model: str = "m",
    max_tokens: int | None = 100,
    strict: bool = True,
    on_event: Callable[[Any], object] | None = None,
    **kw: Any,
) -> tuple[list[Any], TurnEnd]:
    """Run ``query(client, messages, tools=, model=, max_tokens=, **kw)`` to its end.

    ``**kw`` goes to :func:`trio_agent.query` as it is (``options=TurnOptions(...)``,
    ``control=``, ``system=``, ``context=``, ``pending=``, ``approvals=``);
    ``max_tokens=None`` leaves it unset (the loop's default and escalation).
    ``on_event(event)`` is called as each event arrives (to note the time, say).

    Returns every event and the last one, which must be a :class:`TurnEnd` whose
    history passes :func:`~trio_agent.testing.check_history` (``strict`` as given:
    False for the checks the Messages API itself makes, True for the loop's own
    shape too).
    """
    events: list[Any] = []
    async with query(
        client, messages, tools=tools, model=model, max_tokens=max_tokens, **kw
    ) as stream:
        async for event in stream:
            events.append(event)
            if on_event is not None:
                on_event(event)
    assert events, "the turn sent no event"
    end = events[-1]
    assert isinstance(end, TurnEnd), f"the turn's last event is {end!r:.200}, not a TurnEnd"
    check_history(end.messages, strict=strict)
    return events, end


@pytest.fixture(scope="session")
def turn() -> Callable[..., Awaitable[tuple[list[Any], TurnEnd]]]:
    """``events, end = await turn(client, messages=[UserMessage("go")], *, tools=(),
    model="m", max_tokens=100, strict=True, on_event=None, **query_kw)``: one whole
    turn of :func:`trio_agent.query`, every event collected, the last a checked
    :class:`TurnEnd`."""
    return _turn
