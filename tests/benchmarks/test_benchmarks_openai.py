"""The OpenAI Responses end-to-end rows: the benchmark server speaks Responses streams,
counts a Responses history's assistant turns right, and a trio_agent turn over
``OpenAIClient`` runs against it with its ideal computed."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks._ideal import ideal_turn
from benchmarks._registry import BENCHMARKS
from benchmarks._server import Router, assistant_turns
from benchmarks._turns import query_turn, scenario_tools, with_client
from trio_agent import (
    AssistantMessage,
    OpenAIClient,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
)


def _assistant(texts: int, calls: int, turn: int) -> AssistantMessage:
    blocks: list[Any] = [TextBlock(f"text {turn}.{n}") for n in range(texts)]
    blocks += [ToolUseBlock(f"call_{turn}_{n}", "Read", {"path": "a"}) for n in range(calls)]
    return AssistantMessage(
        f"msg_{turn}", "m", blocks, stop_reason="tool_use" if calls else "end_turn"
    )


@settings(max_examples=40, deadline=None)
@given(
    turns=st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 3)).filter(lambda t: t[0] + t[1] > 0),
        max_size=6,
    )
)
def test_assistant_turns_of_a_converted_history(turns: list[tuple[int, int]]) -> None:
    history: list[Any] = [UserMessage("go")]
    for k, (texts, calls) in enumerate(turns):
        message = _assistant(texts, calls, k)
        history.append(message)
        results = [ToolResultBlock(b.id, "ok") for b in message.tool_uses]
        history.append(UserMessage(results or "next"))
    body = OpenAIClient(api_key="k").build_request_body(model="m", messages=history, max_tokens=10)
    assert assistant_turns(body["input"]) == len(turns)


def test_the_openai_rows_are_registered() -> None:
    names = {b.name for b in BENCHMARKS}
    assert {"e2e.openai_responses.seed1", "e2e.openai_responses.fifty_safe"} <= names


def test_a_responses_turn_against_the_benchmark_server(tmp_path: Path) -> None:
    async def main() -> Any:
        from trio_agent.testing import serve_scripted_model

        router = Router()
        async with serve_scripted_model(router) as url:  # type: ignore[arg-type]

            async def body(client: Any) -> Any:
                return await query_turn(client, scenario_tools(tmp_path))

            run = await with_client(f"{url}/s/seed1/0.05", body, 60, "openai-responses")
        return run, router.served

    run, served = trio.run(main)
    assert served == 2  # the tool-calling answer, then the final one
    assert [b.name for _, b in run.blocks.values()] == ["Read", "Read", "Bash", "Read", "Read"]
    assert len(run.recorder.calls) == 2
    ideal = ideal_turn(run)
    assert math.isfinite(ideal)
    assert 0 < ideal <= run.end
