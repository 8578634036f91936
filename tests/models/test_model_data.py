"""Model data from maintained sources, and the safe defaults for a model none knows."""

from __future__ import annotations

import logging
import warnings
from typing import Any

import pytest

from trio_agent import (
    DEFAULT_MODEL,
    ModelDeprecationWarning,
    TextBlock,
    ToolUseBlock,
    TurnEndReason,
    TurnOptions,
    Usage,
    UserMessage,
    query,
)
from trio_agent._models import (
    CONSERVATIVE_CONTEXT_WINDOW,
    check_model,
    context_window,
    lifecycle,
    output_cap,
    price_provider,
)
from trio_agent.testing import ScriptedAnswer, ScriptedModel

UNKNOWN = "mystery-model-1"


async def run_turn(model: ScriptedModel, name: str, **kw: Any) -> list[Any]:
    async with query(model.client(), [UserMessage("go")], tools=[], model=name, **kw) as events:
        return [e async for e in events]


def test_the_default_model_is_current_and_known() -> None:
    assert DEFAULT_MODEL == "claude-sonnet-5-5"
    assert lifecycle(DEFAULT_MODEL) is None
    assert context_window(DEFAULT_MODEL) == 1_000_000  # genai-prices
    assert output_cap(DEFAULT_MODEL) == 128_000  # the models overview page


def test_windows_come_from_genai_prices() -> None:
    assert context_window("claude-haiku-4-5") == 200_000
    assert context_window("claude-opus-5-5-20260901") == 1_000_000
    assert context_window("gpt-4o") == 128_000
    assert context_window(UNKNOWN) == CONSERVATIVE_CONTEXT_WINDOW
    assert context_window(UNKNOWN, 50_000) == 50_000


def test_output_caps_longest_prefix_and_override() -> None:
    assert output_cap("claude-opus-4-7") == 128_000
    assert output_cap("claude-opus-4-1-20250805") == 32_000
    assert output_cap("claude-sonnet-4-6") == 64_000
    assert output_cap(UNKNOWN) is None
    assert output_cap(UNKNOWN, 2000) == 2000


def test_the_provider_is_the_clients_api() -> None:
    class At:
        def __init__(self, url: str) -> None:
            self.url = url

    assert price_provider(At("https://api.anthropic.com/v1/messages")) == "anthropic"
    assert price_provider(At("https://api.openai.com/v1/responses")) == "openai"
    assert price_provider(At("https://api.groq.com/openai/v1/chat/completions")) == "groq"
    assert price_provider(At("http://127.0.0.1:8080/v1/messages")) == "anthropic"
    assert price_provider(At("http://localhost:8000/v1/chat/completions")) == "openai"
    assert price_provider(At("http://localhost:8000/other")) is None
    assert price_provider(object()) is None
    assert price_provider(ScriptedModel([]).client()) == "anthropic"


async def test_an_unknown_model_runs_with_safe_defaults_and_says_so_once(
    autojump_clock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    cut = ScriptedAnswer(blocks=[TextBlock("cut")], stop_reason="max_tokens", model=UNKNOWN)
    done = ScriptedAnswer(blocks=[TextBlock("done")], model=UNKNOWN)
    model = ScriptedModel([cut, done, done])
    with caplog.at_level(logging.WARNING, logger="trio_agent.models"):
        events = await run_turn(model, UNKNOWN)
        await run_turn(model, UNKNOWN)
    # No escalation: the "continue" recovery at the default, never above it.
    assert [r.body["max_tokens"] for r in model.requests] == [8192, 8192, 8192]
    assert events[-1].reason is TurnEndReason.COMPLETED
    assert events[-1].usage.cost_usd is None  # no price: no cost, never a guess
    lines = [r.getMessage() for r in caplog.records if r.name == "trio_agent.models"]
    assert len(lines) == 1
    assert UNKNOWN in lines[0]
    assert "no max_tokens escalation" in lines[0]
    assert f"conservative {CONSERVATIVE_CONTEXT_WINDOW}-token" in lines[0]
    assert "no price" in lines[0]


async def test_an_unknown_model_compacts_at_the_conservative_window(
    autojump_clock: Any,
) -> None:
    compacted: list[int] = []

    async def compactor(messages: Any) -> Any:
        compacted.append(len(messages))
        return [UserMessage("summary")]

    heavy = int(CONSERVATIVE_CONTEXT_WINDOW * 0.85)
    model = ScriptedModel(
        [
            ScriptedAnswer(
                blocks=[ToolUseBlock("t1", "Missing", {})],
                usage=Usage(input_tokens=heavy, output_tokens=5),
                model=UNKNOWN,
            ),
            ScriptedAnswer(blocks=[TextBlock("done")], model=UNKNOWN),
        ]
    )
    events = await run_turn(
        model, UNKNOWN, options=TurnOptions(compactor=compactor, auto_compact=0.8)
    )
    assert events[-1].reason is TurnEndReason.COMPLETED
    assert compacted == [3]  # prompt, answer, results: compacted before call 2


async def test_a_retired_model_warns_before_the_request_once(autojump_clock: Any) -> None:
    model = ScriptedModel([ScriptedAnswer(blocks=[TextBlock("hi")])] * 2)
    # As an error (the suite's filter), the warning stops the turn before any request.
    with pytest.raises(ModelDeprecationWarning, match="retired on 2026-11-30"):
        await run_turn(model, "claude-sonnet-4-5")
    assert model.requests == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        await run_turn(model, "claude-sonnet-4-5")  # once per model per process
    assert len(model.requests) == 1


async def test_a_fallback_model_is_checked_too(autojump_clock: Any) -> None:
    model = ScriptedModel([ScriptedAnswer(blocks=[TextBlock("hi")])])
    with pytest.warns(ModelDeprecationWarning, match="'claude-opus-4-1'"):
        await run_turn(model, DEFAULT_MODEL, options=TurnOptions(fallback_model="claude-opus-4-1"))


def test_a_deprecated_model_names_its_date() -> None:
    with pytest.warns(ModelDeprecationWarning, match="will be retired on 2027-01-22"):
        check_model("claude-opus-4-5-20251101")


def test_genai_prices_deprecation_flag() -> None:
    stage = lifecycle("gemini-2.0-flash")
    assert stage is not None
    assert (stage.state, stage.date, stage.source) == ("deprecated", None, "genai-prices")
    with pytest.warns(ModelDeprecationWarning, match="'gemini-2.0-flash' is deprecated"):
        check_model("gemini-2.0-flash")


def test_importing_the_package_loads_no_price_data() -> None:
    import subprocess
    import sys

    code = "import sys, trio_agent; print('genai_prices' in sys.modules)"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "False"
