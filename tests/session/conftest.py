"""Fixtures for the Session tests (tests/session): one way to run a submitted turn.

A test takes ``drain`` as an argument and awaits it::

    async def test_something(autojump_clock: Any, drain: Any) -> None:
        session = Session(ScriptedModel([...]).client(), tools, model="m")
        events = await drain(session, "go")
        assert events[-1].reason is TurnEndReason.COMPLETED

A test that acts during the turn (an abort, an interrupt, leaving early) uses
``run_turn_acting_at`` (tests/conftest.py) or ``session.submit(...)`` itself.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from trio_agent import Session, TurnEnd


async def _drain(session: Session, prompt: Any = None, **kw: Any) -> list[Any]:
    """Every event of ``session.submit(prompt, **kw)``; the last must be a TurnEnd."""
    events: list[Any] = []
    async with session.submit(prompt, **kw) as stream:
        async for event in stream:
            events.append(event)
    assert events, "the turn sent no event"
    assert isinstance(events[-1], TurnEnd), f"the last event is {events[-1]!r:.200}"
    return events


@pytest.fixture(scope="session")
def drain() -> Callable[..., Awaitable[list[Any]]]:
    """``events = await drain(session, prompt=None, *, approvals=None)``: every event
    of one submitted turn, run to its end, the last a TurnEnd (an error the turn
    raises, such as ``ApprovalError``, raises out of it)."""
    return _drain
