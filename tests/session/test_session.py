"""Session: history, usage, transcript, abort / interrupt and resume, on the scripted model."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from trio_agent import (
    AssistantMessage,
    Message,
    Session,
    TextBlock,
    TextDelta,
    Tool,
    ToolContext,
    ToolUseBlock,
    TurnEnd,
    TurnEndReason,
    TurnOptions,
    Usage,
    UserMessage,
    read_transcript,
)
from trio_agent._session._transcript import INTERRUPTED_TOOL_MESSAGE
from trio_agent.testing import ScriptedAnswer, ScriptedModel, Timing, check_history

SLOW = Timing(token_delay=0.1, block_delay=0.1, text_chunk_size=4, json_chunk_size=4)


@attrs.define
class Log:
    starts: dict[str, float] = attrs.field(factory=dict[str, float])
    ends: dict[str, float] = attrs.field(factory=dict[str, float])


def make_tools(log: Log, *, duration: float = 1.0) -> list[Tool]:
    async def run(input: Mapping[str, Any], ctx: ToolContext) -> str:
        log.starts[ctx.tool_use_id] = trio.current_time()
        await trio.sleep(float(input.get("seconds", duration)))
        log.ends[ctx.tool_use_id] = trio.current_time()
        return f"{ctx.tool_name} done: {input.get('path', '')}"

    schema: dict[str, Any] = {"type": "object"}
    return [
        Tool("Read", "Read a file.", schema, run, concurrency_safe=True),
        Tool("Slow", "Takes a while, cannot be stopped.", schema, run, concurrency_safe=True),
        Tool(
            "Bash",
            "Run a command.",
            schema,
            run,
            concurrency_safe=True,
            interrupt_behavior="cancel",
        ),
    ]


def answer(*blocks: Any, output_tokens: int = 7, timing: Timing = SLOW) -> ScriptedAnswer:
    return ScriptedAnswer(
        blocks=list(blocks),
        usage=Usage(input_tokens=100, output_tokens=output_tokens),
        timing=timing,
    )


def read(i: str, **input: Any) -> ToolUseBlock:
    return ToolUseBlock(i, "Read", {"path": i, **input})


#: For the tests that compare a request with the history byte for byte: no prompt-cache
#: marks (tests/caching tests those).
UNMARKED = TurnOptions(cache=None)


def session_for(model: ScriptedModel, log: Log | None = None, **kw: Any) -> Session:
    return Session(model.client(), make_tools(log or Log()), model="m", **kw)


def replayed(events: list[Any], before: tuple[Message, ...]) -> tuple[Message, ...]:
    return (*before, *(e for e in events if isinstance(e, AssistantMessage | UserMessage)))


async def test_two_iteration_turn_history_usage_transcript(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, drain: Any
) -> None:
    path = tmp_path / "t.jsonl"
    model = ScriptedModel(
        [
            answer(TextBlock("Reading."), read("a"), read("b"), output_tokens=5),
            answer(TextBlock("Both are fine."), output_tokens=3),
            answer(TextBlock("Hi again."), output_tokens=2),
        ]
    )
    session = session_for(model, transcript_path=path, system="Be brief.", options=UNMARKED)
    events = await drain(session, "Check a and b.")
    end = events[-1]
    assert isinstance(end, TurnEnd)
    assert end.reason is TurnEndReason.COMPLETED
    history = session.messages
    assert history == end.messages == replayed(events, (UserMessage("Check a and b."),))
    assert [type(m).__name__ for m in history] == [
        "UserMessage",
        "AssistantMessage",
        "UserMessage",
        "AssistantMessage",
    ]
    assert [r.tool_use_id for r in history[2].tool_results] == ["a", "b"]
    assert session.usage == Usage(input_tokens=200, output_tokens=8)
    assert not session.running
    # the transcript holds the same history, with the header's model and system
    t = read_transcript(path)
    assert (t.model, t.system, t.messages) == ("m", "Be brief.", history)
    # a second turn sends the whole history and adds to it
    await drain(session, "Hello?")
    assert model.requests[2].body["messages"][: len(history)] == [m.to_param() for m in history]
    assert session.messages[len(history)] == UserMessage("Hello?")
    assert session.usage == Usage(input_tokens=300, output_tokens=10)
    assert read_transcript(path).messages == session.messages
    assert session.cost is None  # "m" is no known model family
    session.close()


async def test_transcript_written_as_messages_complete_and_fsynced_per_turn(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    path = tmp_path / "t.jsonl"
    model = ScriptedModel(
        [
            answer(read("a", seconds=5.0)),
            answer(TextBlock("ok")),
        ]
    )
    session = session_for(model, transcript_path=path)
    checked = 0
    async with session.submit("go") as stream:
        async for event in stream:
            if isinstance(event, AssistantMessage | UserMessage):
                # the message is on disk before the consumer sees it (the reader
                # answers a pending tool_use synthetically: compare the prefix)
                on_disk = read_transcript(path).messages
                assert on_disk[: len(session.messages)] == session.messages
                assert session.messages[-1] is event
                assert synced == []  # fsynced at the end of the turn, not per message
                checked += 1
    assert checked == 3  # answer, results, answer
    assert len(session.messages) == 4
    assert len(synced) == 1
    session.close()


async def test_fsync_once_per_turn(
    autojump_clock: trio.testing.MockClock,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    drain: Any,
) -> None:
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    session = session_for(
        ScriptedModel([answer(TextBlock("one")), answer(TextBlock("two"))]),
        transcript_path=tmp_path / "t.jsonl",
    )
    await drain(session, "1")
    assert len(synced) == 1
    await drain(session, "2")
    assert len(synced) == 2
    session.close()


async def test_abort_mid_stream_keeps_pairing(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, run_turn_acting_at: Any
) -> None:
    path = tmp_path / "t.jsonl"
    log = Log()
    model = ScriptedModel(
        [
            answer(read("a", seconds=10.0), read("b"), TextBlock("a long tail " * 20)),
        ]
    )
    session = session_for(model, log, transcript_path=path)
    events = await run_turn_acting_at(
        session.submit("go"),
        session.abort,
        at=lambda i, e: isinstance(e, TextDelta) and e.index == 2,
    )
    end = events[-1]
    assert end.reason is TurnEndReason.ABORTED_STREAMING
    assert end.abort_reason == "user_interrupted"
    check_history(session.messages, strict=True)
    cut = session.messages[1]
    assert isinstance(cut, AssistantMessage)
    assert cut.stop_reason is None
    assert [u.id for u in cut.tool_uses] == ["a", "b"]
    assert all(r.is_error for r in session.messages[2].tool_results)
    assert "a" in log.starts
    assert "a" not in log.ends
    assert read_transcript(path).messages == session.messages
    session.close()


async def test_abort_mid_tools_keeps_pairing(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, run_turn_acting_at: Any, drain: Any
) -> None:
    path = tmp_path / "t.jsonl"
    model = ScriptedModel(
        [answer(TextBlock("Working."), read("a", seconds=0.1), read("b", seconds=30.0))]
    )
    session = session_for(model, transcript_path=path)
    events = await run_turn_acting_at(
        session.submit("go"),
        session.abort,
        at=lambda i, e: isinstance(e, AssistantMessage),
    )
    end = events[-1]
    assert end.reason is TurnEndReason.ABORTED_TOOLS
    check_history(session.messages, strict=True)
    a, b = session.messages[2].tool_results
    assert (a.is_error, b.is_error) == (False, True)
    assert read_transcript(path).messages == session.messages
    # the conversation goes on from the aborted turn
    model.append(answer(TextBlock("Sorry, stopping.")))
    await drain(session, "stop that")
    check_history(session.messages, strict=True)
    assert model.requests[1].body["messages"][-1] == UserMessage("stop that").to_param()
    session.close()


async def test_interrupt_spares_block_tools(
    autojump_clock: trio.testing.MockClock, run_turn_acting_at: Any
) -> None:
    log = Log()
    model = ScriptedModel(
        [
            answer(
                ToolUseBlock("s", "Slow", {"seconds": 5.0}),
                ToolUseBlock("c", "Bash", {"seconds": 5.0}),
                TextBlock("waiting"),
            ),
        ]
    )
    session = session_for(model, log)
    events = await run_turn_acting_at(
        session.submit("go"),
        session.interrupt,
        at=lambda i, e: isinstance(e, AssistantMessage),
    )
    end = events[-1]
    assert end.reason is TurnEndReason.ABORTED_TOOLS
    assert end.abort_reason == "interrupt"
    check_history(session.messages, strict=True)
    slow, bash = session.messages[-1].tool_results
    assert (slow.is_error, slow.content) == (False, "Slow done: ")
    assert bash.is_error
    assert "Interrupted" in str(bash.content)
    assert "s" in log.ends
    assert "c" not in log.ends


async def test_leaving_the_block_early_keeps_a_valid_history(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    path = tmp_path / "t.jsonl"
    model = ScriptedModel([answer(read("a", seconds=30.0))])
    session = session_for(model, transcript_path=path)
    async with session.submit("go") as stream:
        async for event in stream:
            if isinstance(event, AssistantMessage):
                break
    check_history(session.messages, strict=True)
    (result,) = session.messages[-1].tool_results
    assert result.is_error
    assert read_transcript(path).messages == session.messages
    # no TurnEnd came, but the answer received was billed and is counted
    assert session.usage == Usage(input_tokens=100, output_tokens=7)
    session.close()


async def test_one_turn_at_a_time(autojump_clock: trio.testing.MockClock) -> None:
    session = session_for(ScriptedModel([answer(TextBlock("hi"))]))
    async with session.submit("one") as stream:
        assert session.running
        with pytest.raises(trio.BusyResourceError):
            async with session.submit("two"):
                pass  # pragma: no cover
        async for _ in stream:
            pass
    assert not session.running
    assert len(session.messages) == 2


async def test_resume_after_a_crash_mid_turn(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, drain: Any
) -> None:
    """Copy the transcript while tools run (a crash: what is on disk then), tear a
    line at its end, resume from the copy and go on."""
    path = tmp_path / "t.jsonl"
    crashed = tmp_path / "crashed.jsonl"
    model = ScriptedModel(
        [
            answer(TextBlock("One moment."), read("a"), read("b", seconds=30.0)),
        ]
    )
    session = session_for(model, transcript_path=path, system="sys")
    async with session.submit("go") as stream:
        async for event in stream:
            if isinstance(event, AssistantMessage):
                shutil.copyfile(path, crashed)
                session.abort()
    session.close()
    with crashed.open("ab") as f:
        f.write(b'{"type": "user", "message": {"role": "us')  # torn by the crash
    before = read_transcript(crashed)
    assert before.torn_line
    assert before.repaired_tool_use_ids == ("a", "b")

    model2 = ScriptedModel([answer(TextBlock("Resumed."))])
    resumed = Session.resume(crashed, model2.client(), make_tools(Log()), options=UNMARKED)
    assert (resumed.model, resumed.system) == ("m", "sys")
    check_history(resumed.messages, strict=True)
    assert [type(m) for m in resumed.messages] == [UserMessage, AssistantMessage, UserMessage]
    assert [r.content for r in resumed.messages[2].tool_results] == [
        INTERRUPTED_TOOL_MESSAGE,
        INTERRUPTED_TOOL_MESSAGE,
    ]
    assert resumed.usage == resumed.messages[1].usage  # type: ignore[union-attr]
    await drain(resumed, "carry on")
    check_history(resumed.messages, strict=True)
    sent = model2.requests[0].body
    assert sent["system"] == "sys"
    assert sent["messages"] == [m.to_param() for m in resumed.messages[:-1]]
    resumed.close()
    # the repaired file reads back whole: no torn line, nothing to repair
    after = read_transcript(crashed)
    assert after.messages == resumed.messages
    assert not after.torn_line
    assert after.repaired_tool_use_ids == ()


async def test_resume_a_transcript_without_header_needs_a_model(tmp_path: Path) -> None:
    from trio_agent import TranscriptError

    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    with pytest.raises(TranscriptError, match="model="):
        Session.resume(path, None, [])


async def test_resume_from_a_crash_at_any_byte(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, run_turn_acting_at: Any, drain: Any
) -> None:
    """Issue 6 item 15: wherever a crash cuts the file the Session wrote (two turns,
    one aborted mid-tools), it resumes to a valid history and the next request is
    valid for the API."""
    path = tmp_path / "t.jsonl"
    model = ScriptedModel(
        [
            answer(TextBlock("Reading."), read("a", seconds=0.1), read("b")),
            answer(TextBlock("Done.")),
            answer(TextBlock("Again."), read("c", seconds=0.1), read("d", seconds=30.0)),
        ]
    )
    session = session_for(model, transcript_path=path, system="sys")
    await drain(session, "one")
    await run_turn_acting_at(
        session.submit("two"),
        session.abort,
        at=lambda i, e: isinstance(e, AssistantMessage),
    )
    session.close()
    data = path.read_bytes()
    header_end = data.index(b"\n") + 1
    line_ends = [i + 1 for i, byte in enumerate(data) if byte == ord("\n")]
    cuts = sorted({*line_ends, *range(header_end, len(data), 53), len(data) - 1})
    for cut in cuts:
        crashed = tmp_path / f"crash-{cut}.jsonl"
        crashed.write_bytes(data[:cut])
        replies = ScriptedModel([answer(TextBlock("ok"), timing=Timing())])
        resumed = Session.resume(crashed, replies.client(), make_tools(Log()), options=UNMARKED)
        check_history(resumed.messages, strict=True)
        # what survived is what was written, up to the cut (plus synthetic results)
        kept = [m for m in resumed.messages if isinstance(m, AssistantMessage)]
        written = [m for m in session.messages if isinstance(m, AssistantMessage)]
        assert kept == written[: len(kept)]
        await drain(resumed, "go on")
        resumed.close()
        check_history(resumed.messages, strict=True)
        sent = replies.requests[0].body["messages"]
        assert sent == [m.to_param() for m in resumed.messages[:-1]]
        assert read_transcript(crashed).messages == resumed.messages
