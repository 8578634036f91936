"""Session at the edges: consumers leaving at every event, BaseException from a tool.

The history stays valid and the transcript holds what happened: the text, every
finished tool_use, the results of tools that finished, "interrupted" results for
the rest; a resumed session reads the same history back.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import (
    AssistantMessage,
    Session,
    TextBlock,
    Tool,
    ToolContext,
    ToolResultBlock,
    ToolUseBlock,
    TurnOptions,
    UserMessage,
    read_transcript,
)
from trio_agent.testing import (
    LeakCheck,
    ScriptedAnswer,
    ScriptedModel,
    Timing,
    check_history,
    run_virtual,
)

INTERRUPTED_TOOL_MESSAGE = "interrupted: the session ended before this tool finished"


async def act(input: Mapping[str, Any], ctx: ToolContext) -> str:
    ctx.progress("working")
    if "raise" in input:
        await trio.sleep(input["after"])
        raise {"KeyboardInterrupt": KeyboardInterrupt, "SystemExit": SystemExit, "Base": Base}[
            input["raise"]
        ]("from the tool")
    await trio.sleep(input.get("d", 1))
    return f"acted {ctx.tool_use_id}"


class Base(BaseException):
    """A BaseException that is neither KeyboardInterrupt nor SystemExit."""


TOOLS = [Tool("Act", "d", {"type": "object"}, act, concurrency_safe=True)]


def model(blocks: list[Any]) -> ScriptedModel:
    return ScriptedModel(
        [
            ScriptedAnswer(blocks=blocks, timing=Timing(token_delay=0.1)),
            ScriptedAnswer(blocks=[TextBlock("done")], timing=Timing(token_delay=0.1)),
        ]
    )


ANSWER = [
    TextBlock("hello world"),
    ToolUseBlock("t1", "Act", {"d": 0.5}),
    ToolUseBlock("t2", "Act", {"d": 2}),
]


async def leave(path: Path, at: int, how: str, wait: float | None) -> tuple[int, Any, Session]:
    scripted = model(ANSWER)
    session = Session(scripted.client(), TOOLS, model="m", transcript_path=path)
    seen = 0
    raised: BaseException | None = None
    with LeakCheck(models=[scripted], processes=False, fds=False):
        try:
            async with session.submit("go") as events:
                async for _ in events:
                    seen += 1
                    if seen - 1 == at:
                        if wait is not None:
                            await trio.sleep(wait)
                        if how == "break":
                            break
                        raise ValueError("consumer") if how == "raise" else KeyboardInterrupt
        except BaseException as exc:
            raised = exc
        finally:
            session.close()
    return seen, raised, session


def test_leaving_submit_at_every_event(tmp_path: Path) -> None:
    scripted = model(ANSWER)
    whole = Session(scripted.client(), TOOLS, model="m")

    async def count() -> int:
        async with whole.submit("go") as events:
            return len([e async for e in events])

    n = run_virtual(count)
    assert n > 10
    runs = 0
    for how in ("break", "raise", "KeyboardInterrupt"):
        for wait in (None, 0.0, 0.3):
            for at in range(n):
                path = tmp_path / f"{how}-{wait}-{at}.jsonl"
                seen, raised, session = run_virtual(partial(leave, path, at, how, wait))
                runs += 1
                assert seen == at + 1
                expected = {"break": type(None), "raise": ValueError}.get(how, KeyboardInterrupt)
                assert type(raised) is expected, (how, wait, at, raised)
                assert not session.running
                check_history(session.messages)
                assert read_transcript(path).messages == session.messages
    assert runs == 9 * n


@settings(max_examples=25, deadline=None)
@given(
    kind=st.sampled_from(["KeyboardInterrupt", "SystemExit", "Base"]),
    after=st.sampled_from([0.0, 0.05, 0.3, 0.6, 1.0, 3.0]),
)
def test_base_exception_from_a_tool_keeps_what_happened(
    kind: str, after: float, drain: Any
) -> None:
    import tempfile

    blocks = [
        TextBlock("hello"),
        ToolUseBlock("t1", "Act", {"d": 0.5}),
        ToolUseBlock("t2", "Act", {"raise": kind, "after": after}),
        ToolUseBlock("t3", "Act", {"d": 50}),
    ]
    expected_type = {"KeyboardInterrupt": KeyboardInterrupt, "SystemExit": SystemExit}.get(
        kind, Base
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.jsonl"

        async def main() -> tuple[Session, float]:
            scripted = model(blocks)
            session = Session(scripted.client(), TOOLS, model="m", transcript_path=path)
            with LeakCheck(models=[scripted], processes=False, fds=False):
                try:
                    with pytest.raises(expected_type, match="from the tool"):
                        await drain(session, "go")
                finally:
                    session.close()
            return session, trio.current_time()

        session, _ = run_virtual(main)
        messages = session.messages
        check_history(messages)
        assert read_transcript(path).messages == messages
        resumed = Session.resume(path, None, TOOLS)
        assert resumed.messages == messages
    assistant = [m for m in messages if isinstance(m, AssistantMessage)]
    (answer,) = assistant
    assert answer.text == "hello"
    results = {
        b.tool_use_id: b for m in messages if isinstance(m, UserMessage) for b in m.tool_results
    }
    # Every finished tool_use block is in the history, answered.
    assert [u.id for u in answer.tool_uses] == list(results)
    assert "t2" in results  # the culprit had started: its block had finished
    # A tool that finished before the interrupt keeps its real result (the side
    # effect is known); the others are "interrupted".
    assert results["t1"] in (
        ToolResultBlock("t1", "acted t1"),
        ToolResultBlock("t1", INTERRUPTED_TOOL_MESSAGE, is_error=True),
    )
    if after >= 1.0:  # t1 (0.5 s, started first) certainly finished
        assert results["t1"] == ToolResultBlock("t1", "acted t1")
    for tool_id in ("t2", "t3"):
        if tool_id in results:
            assert results[tool_id] == ToolResultBlock(
                tool_id, INTERRUPTED_TOOL_MESSAGE, is_error=True
            )


@pytest.mark.parametrize(("session_cap", "tool_cap", "cut_at"), [(50, None, 50), (50, 20, 20)])
async def test_capped_results_are_the_same_in_history_transcript_and_request(
    autojump_clock: Any,
    tmp_path: Path,
    session_cap: int,
    tool_cap: int | None,
    cut_at: int,
    drain: Any,
) -> None:
    async def big(input: Mapping[str, Any], ctx: ToolContext) -> str:
        return "x" * 1000

    tool = Tool("Big", "d", {"type": "object"}, big, max_result_chars=tool_cap)
    scripted = ScriptedModel(
        [
            ScriptedAnswer(blocks=[ToolUseBlock("t1", "Big", {})]),
            ScriptedAnswer(blocks=[TextBlock("done")]),
        ]
    )
    path = tmp_path / "t.jsonl"
    session = Session(
        scripted.client(),
        [tool],
        model="m",
        transcript_path=path,
        # No prompt-cache marks: the request is compared with the history as it is.
        options=TurnOptions(max_result_chars=session_cap, cache=None),
    )
    with LeakCheck(models=[scripted], processes=False, fds=False):
        await drain(session, "go")
    session.close()
    (result,) = [b for m in session.messages if isinstance(m, UserMessage) for b in m.tool_results]
    assert isinstance(result.content, str)
    assert result.content.startswith("x" * cut_at + "\n\n[Output truncated: ")
    assert f"{1000 - cut_at:,} of 1,000 characters were cut" in result.content
    assert read_transcript(path).messages == session.messages
    sent = scripted.requests[1].body["messages"][2]["content"][0]
    assert sent == result.to_api()
