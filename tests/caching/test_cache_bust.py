"""Cache busts: a call that reads far less from the prompt cache than the call before
it cached gets a ``CacheBust`` event and a log line naming the part that changed.

In process, in virtual time, against the emulated cache (``PromptCache``).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio

from trio_agent import (
    CacheBust,
    Session,
    TextBlock,
    ToolUseBlock,
    TurnOptions,
    Usage,
    UserMessage,
    query,
    tool,
)
from trio_agent.testing import PromptCache, ScriptedAnswer, ScriptedModel

SYSTEM = "\n".join(f"Rule {n}: say what you do, then do it." for n in range(400))


@tool
async def read(path: str) -> str:
    """Read a file."""
    return f"the contents of {path}"


@tool
async def write(path: str, text: str) -> str:
    """Write a file."""
    return "written"


def answers(count: int) -> list[ScriptedAnswer]:
    tools = [
        ScriptedAnswer(blocks=[ToolUseBlock(f"t{n}", "read", {"path": f"f{n}"})])
        for n in range(count - 1)
    ]
    return [*tools, ScriptedAnswer(blocks=[TextBlock("Done.")])]


async def turn(session: Session, prompt: str) -> list[Any]:
    events: list[Any] = []
    async with session.submit(prompt) as stream:
        async for event in stream:
            events.append(event)
    return events


def busts(events: list[Any]) -> list[CacheBust]:
    return [e for e in events if isinstance(e, CacheBust)]


def session_for(model: ScriptedModel, **kw: Any) -> Session:
    kw.setdefault("system", SYSTEM)
    return Session(
        model.client(), [read], model="m", max_tokens=100, options=TurnOptions(cache="5m"), **kw
    )


async def test_a_tool_loop_and_its_next_turn_bust_nothing(autojump_clock: Any) -> None:
    cache = PromptCache()
    session = session_for(ScriptedModel([*answers(5), *answers(2)], prompt_cache=cache))
    events = await turn(session, "go") + await turn(session, "more")
    assert busts(events) == []
    assert all(u.read > 0.9 * u.prompt for u in cache.uses[1:])


async def test_a_new_system_prompt_is_named(
    autojump_clock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    cache = PromptCache()
    session = session_for(ScriptedModel([*answers(2), *answers(1)], prompt_cache=cache))
    await turn(session, "go")
    session.system = "Today is 2026-07-01.\n" + SYSTEM  # a timestamp first: the classic
    with caplog.at_level(logging.WARNING, "trio_agent.loop"):
        events = await turn(session, "more")
    [bust] = busts(events)
    assert bust.changed == ("system",)
    assert bust.model_call == 1
    assert bust.read < bust.expected / 2
    assert "prompt cache bust" in caplog.text
    assert "changed: system" in caplog.text


async def test_new_tools_are_named(autojump_clock: Any) -> None:
    cache = PromptCache()
    model = ScriptedModel([*answers(2), *answers(1)], prompt_cache=cache)
    client = model.client()
    history: list[Any] = [UserMessage("go")]
    for tools in ([read], [read, write]):
        async with query(
            client,
            history,
            tools=tools,
            model="m",
            max_tokens=100,
            system=SYSTEM,
            options=TurnOptions(cache="5m"),
        ) as events:
            seen = [e async for e in events]
        history = [*seen[-1].messages, UserMessage("more")]
    assert [b.changed for b in busts(seen)] == [("tools",)]


async def test_an_edited_history_is_named(autojump_clock: Any) -> None:
    cache = PromptCache(min_tokens=1)
    model = ScriptedModel([*answers(2), *answers(1)], prompt_cache=cache)
    session = session_for(model, system="short")
    await turn(session, "go " * 3000)
    # Rewrite the first prompt: everything after the tools and system is new.
    session._messages[0] = UserMessage("gone " * 3000)  # pyright: ignore[reportPrivateUsage]
    events = await turn(session, "more")
    assert [b.changed for b in busts(events)] == [("history",)]


async def test_expired_entries_change_nothing(autojump_clock: Any) -> None:
    cache = PromptCache()
    session = session_for(
        ScriptedModel([*answers(2), *answers(1), *answers(1)], prompt_cache=cache)
    )
    await turn(session, "go")
    await trio.sleep(301)  # past the 5-minute TTL
    [bust] = busts(await turn(session, "more"))
    assert bust.changed == ()
    assert cache.uses[2].read == 0
    # With the 1-hour TTL, the same wait is no bust.
    session.options = TurnOptions(cache="1h")
    await turn(session, "again")  # written for an hour this time
    await trio.sleep(301)
    assert cache.uses[-1].written_1h > 0


async def test_one_hour_survives_a_long_approval_wait(autojump_clock: Any) -> None:
    cache = PromptCache()
    model = ScriptedModel([*answers(1), *answers(1)], prompt_cache=cache)
    session = Session(
        model.client(),
        [read],
        model="m",
        max_tokens=100,
        system=SYSTEM,
        options=TurnOptions(cache="1h"),
    )
    await turn(session, "go")
    await trio.sleep(45 * 60)
    assert busts(await turn(session, "more")) == []
    assert cache.uses[1].read > 0.9 * cache.uses[1].prompt


async def test_no_cache_figures_no_event(autojump_clock: Any) -> None:
    # A provider (or a scripted answer) that reports nothing of caching.
    model = ScriptedModel(
        [
            ScriptedAnswer(blocks=[ToolUseBlock("t", "read", {"path": "a"})]),
            ScriptedAnswer(blocks=[TextBlock("Done.")], usage=Usage(input_tokens=5)),
        ]
    )
    assert busts(await turn(session_for(model), "go")) == []
