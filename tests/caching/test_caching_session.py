"""Issue 22's "done when": a session against a loopback server that caches as the
Messages API does reads nearly all of every prompt from the cache, and costs what
the cache's own figures, priced by hand, say.

A 20-call tool loop, then the session resumed from its transcript by a new client
(a new process, as far as the cache can tell), then a turn that compacts: every
call after the very first reads at least 90% of its prompt from the cache.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest
from genai_prices import Usage as PriceUsage
from genai_prices import calc_price

from trio_agent import (
    AnthropicClient,
    CacheBust,
    Message,
    Session,
    TextBlock,
    ToolUseBlock,
    TurnOptions,
    UserMessage,
    tool,
)
from trio_agent.testing import PromptCache, ScriptedAnswer, ScriptedModel, serve_scripted_model

MODEL = "claude-sonnet-5-5"
#: A system prompt of Claude Code's order of size (about 6,000 tokens here).
SYSTEM = "\n".join(
    f"Rule {n}: keep the build green, the diff small and the tests honest." for n in range(340)
)


@tool
async def read(path: str) -> str:
    """Read a file of the project."""
    return f"{path}:\n" + "def f():\n    return 42\n" * 12


def calls(count: int, turn: str) -> list[ScriptedAnswer]:
    """*count* - 1 answers that each read a file, then one that ends the turn."""
    answers = [
        ScriptedAnswer(
            blocks=[
                TextBlock(f"Reading file {n}."),
                ToolUseBlock(f"{turn}_{n}", "read", {"path": f"src/{turn}_{n}.py"}),
            ],
            model=MODEL,
        )
        for n in range(count - 1)
    ]
    return [*answers, ScriptedAnswer(blocks=[TextBlock(f"Done with {turn}.")], model=MODEL)]


async def compact(history: tuple[Message, ...]) -> tuple[Message, ...]:
    """Keep the last call and its results after a short summary."""
    return (UserMessage("Summary: the build was fixed; the tests are next."), *history[-2:])


async def run_turn(session: Session, prompt: str, events: list[Any]) -> None:
    async with session.submit(prompt) as stream:
        async for event in stream:
            events.append(event)


def hand_priced(cache: PromptCache, output_tokens: list[int]) -> float:
    """Each request priced at the published Sonnet 5.5 rates from the cache's own
    token counts (not from the usage the client parsed)."""
    total = 0.0
    for use, output in zip(cache.uses, output_tokens, strict=True):
        usage = PriceUsage(
            input_tokens=use.prompt,  # genai-prices counts the cached tokens inside
            cache_write_tokens=use.written,
            cache_read_tokens=use.read,
            output_tokens=output,
        )
        total += float(calc_price(usage, model_ref=MODEL, provider_id="anthropic").total_price)
    return total


async def test_a_tool_loop_a_resume_and_a_compaction_read_from_the_cache(tmp_path: Path) -> None:
    cache = PromptCache()
    script = [*calls(20, "build"), *calls(2, "tests"), *calls(3, "docs")]
    scripted = ScriptedModel(script, prompt_cache=cache)
    path = tmp_path / "session.jsonl"
    options = TurnOptions(cache="5m")
    events: list[Any] = []
    async with serve_scripted_model(scripted) as base_url:
        async with AnthropicClient(api_key="test", base_url=base_url) as client:
            session = Session(
                client,
                [read],
                model=MODEL,
                system=SYSTEM,
                max_tokens=1000,
                transcript_path=path,
                options=options,
            )
            await run_turn(session, "Fix the build.", events)
            session.close()
        assert len(cache.uses) == 20

        # A new client and session from the transcript: the same bytes go out.
        async with AnthropicClient(api_key="test", base_url=base_url) as client:
            resumed = Session.resume(path, client, [read], max_tokens=1000, options=options)
            await run_turn(resumed, "And the tests?", events)
            assert len(cache.uses) == 22
            # Compact before the next call once a request passed half this window:
            # the first call of the next turn does.
            window = 2 * cache.uses[-1].prompt + 2
            resumed.options = attrs.evolve(
                options, compactor=compact, auto_compact=0.5, context_window=window
            )
            await run_turn(resumed, "Now the docs.", events)
            resumed.close()

    assert len(cache.uses) == 25
    first, *rest = cache.uses
    assert first.read == 0
    assert first.written > 0.9 * first.prompt
    low = [(n, u) for n, u in enumerate(rest, 2) if u.read < 0.9 * u.prompt]
    assert not low, low
    # The compaction changed the history: the call after it read the tools and the
    # system prompt (their own breakpoint) and wrote the new history.
    compacted = cache.uses[23]
    assert compacted.written > 0
    assert compacted.read < cache.uses[22].read
    # Not a bust: the prompt's bulk (tools and system) was still read.
    assert compacted.read >= 0.5 * (cache.uses[22].read + cache.uses[22].written)
    assert not [e for e in events if isinstance(e, CacheBust)]

    outputs = [a.resolved_usage.output_tokens for a in script]
    expected = hand_priced(cache, outputs)
    assert resumed.usage.cost_usd is not None
    assert resumed.usage.cost_usd == pytest.approx(expected, abs=0.01)
    uncached = sum(u.prompt for u in cache.uses) * 2.0 / 1e6
    assert expected < 0.25 * uncached  # what caching saves, roughly
