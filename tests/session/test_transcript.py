import json
import os
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import (
    AssistantMessage,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    TranscriptError,
    Usage,
    UserMessage,
)
from trio_agent._session._transcript import (
    INTERRUPTED_TOOL_MESSAGE,
    TranscriptWriter,
    read_transcript,
    repair_history,
)
from trio_agent.testing import check_history


def assistant(n: int, *tool_ids: str, text: str = "ok") -> AssistantMessage:
    blocks = [TextBlock(f"{text} {n}")] + [
        ToolUseBlock(i, "Read", {"path": f"f{i}.py"}) for i in tool_ids
    ]
    return AssistantMessage(
        id=f"msg_{n}",
        model="claude-test",
        content=blocks,
        stop_reason="tool_use" if tool_ids else "end_turn",
        usage=Usage(input_tokens=10 * n, output_tokens=n),
    )


def results(*tool_ids: str) -> UserMessage:
    return UserMessage([ToolResultBlock(i, f"content of {i}") for i in tool_ids])


def write(path: Path, messages: Sequence[Message], *, system: object = "be brief") -> None:
    w = TranscriptWriter.open(path, model="claude-test", system=system)
    for m in messages:
        w.append(m)
    w.sync()
    w.close()


def test_round_trip(tmp_path: Path, history: tuple[Message, ...]) -> None:
    path = tmp_path / "t.jsonl"
    write(path, history, system=[{"type": "text", "text": "sys"}])
    t = read_transcript(path)
    assert t.messages == tuple(history)
    assert t.model == "claude-test"
    assert t.system == [{"type": "text", "text": "sys"}]
    assert not t.torn_line
    assert t.repaired_tool_use_ids == ()
    assert t.valid_length == path.stat().st_size
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b""
    records = [json.loads(line) for line in lines[:-1]]
    assert [r["type"] for r in records] == [
        "header",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    assert records[2]["message"] == history[1].to_api()
    assert all(isinstance(r["ts"], float) for r in records)


def test_file_is_private_and_appended(tmp_path: Path, history: tuple[Message, ...]) -> None:
    path = tmp_path / "t.jsonl"
    write(path, history[:2])
    assert path.stat().st_mode & 0o077 == 0
    # a second writer (a resumed session) appends after a new header
    write(path, [results("t1", "t2")])
    t = read_transcript(path)
    assert t.messages == tuple(history[:3])


def test_line_separators_stay_inside_one_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    weird = UserMessage("a\nb\u2028c\u2029d\x85e\r")
    write(path, [weird])
    assert path.read_bytes().count(b"\n") == 2
    assert read_transcript(path).messages == (weird,)


def test_crash_mid_tools_gets_synthetic_results(
    tmp_path: Path, history: tuple[Message, ...]
) -> None:
    path = tmp_path / "t.jsonl"
    write(path, history[:4])  # the last answer's tool t3 never finished
    t = read_transcript(path)
    assert t.repaired_tool_use_ids == ("t3",)
    assert t.messages[-1] == UserMessage(
        [ToolResultBlock("t3", INTERRUPTED_TOOL_MESSAGE, is_error=True)]
    )
    check_history(t.messages)


def last_line_start(data: bytes) -> int:
    return data.rindex(b"\n", 0, len(data) - 1) + 1


@pytest.mark.parametrize("upto", [2, 3, 4, 6])
def test_crash_at_every_byte_of_the_last_line(
    tmp_path: Path, upto: int, history: tuple[Message, ...]
) -> None:
    path = tmp_path / "t.jsonl"
    write(path, history[:upto])
    data = path.read_bytes()
    start = last_line_start(data)
    whole = read_transcript(path).messages
    before = read_transcript_bytes(tmp_path, data[:start])
    for cut in range(start, len(data)):
        t = read_transcript_bytes(tmp_path, data[:cut])
        assert t.torn_line == (cut > start)
        assert t.valid_length == start
        assert t.messages == before.messages
        check_history(t.messages)
    assert read_transcript_bytes(tmp_path, data).messages == whole


def read_transcript_bytes(tmp_path: Path, data: bytes):
    path = tmp_path / "cut.jsonl"
    path.write_bytes(data)
    return read_transcript(path)


def test_corrupt_middle_line_names_it(tmp_path: Path, history: tuple[Message, ...]) -> None:
    path = tmp_path / "t.jsonl"
    write(path, history)
    lines = path.read_bytes().split(b"\n")
    lines[3] = lines[3][:-5]
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(TranscriptError, match="line 4"):
        read_transcript(path)


@pytest.mark.parametrize(
    ("line", "match"),
    [
        (b"[1, 2]", "line 2: not a JSON object"),
        (b'{"type": "user"}', "line 2: user line without a message"),
        (b'{"type": "user", "message": {"role": "assistant", "content": []}}', "holds a assistant"),
        (b'{"type": "assistant", "message": {"id": 3, "model": "m"}}', "line 2: bad message"),
        (b"\xff\xfe", "line 2: not JSON"),
    ],
)
def test_bad_records(tmp_path: Path, line: bytes, match: str) -> None:
    path = tmp_path / "t.jsonl"
    write(path, [])
    with path.open("ab") as f:
        f.write(line + b"\n")
    with pytest.raises(TranscriptError, match=match):
        read_transcript(path)


def test_blank_and_unknown_lines_are_skipped(tmp_path: Path, history: tuple[Message, ...]) -> None:
    path = tmp_path / "t.jsonl"
    write(path, history[:1])
    with path.open("ab") as f:
        f.write(b'\n{"type": "summary", "text": "x"}\n')
    assert read_transcript(path).messages == tuple(history[:1])


def test_history_line_replaces_everything_before(
    tmp_path: Path, history: tuple[Message, ...]
) -> None:
    path = tmp_path / "t.jsonl"
    w = TranscriptWriter.open(path, model="m")
    for m in history[:4]:
        w.append(m)
    w.replace_history([UserMessage("summary of before"), assistant(9)])
    w.append(UserMessage("and now"))
    w.close()
    t = read_transcript(path)
    assert t.messages == (UserMessage("summary of before"), assistant(9), UserMessage("and now"))
    assert t.repaired_tool_use_ids == ()


@pytest.mark.parametrize(
    ("line", "match"),
    [
        (b'{"type": "history"}', "line 2: history line without messages"),
        (b'{"type": "history", "messages": [1]}', "line 2: a history entry is not an object"),
        (b'{"type": "history", "messages": [{"id": "x", "model": 1}]}', "line 2: bad message"),
    ],
)
def test_bad_history_lines(tmp_path: Path, line: bytes, match: str) -> None:
    path = tmp_path / "t.jsonl"
    write(path, [])
    with path.open("ab") as f:
        f.write(line + b"\n")
    with pytest.raises(TranscriptError, match=match):
        read_transcript(path)


def test_missing_file() -> None:
    with pytest.raises(TranscriptError, match="cannot read"):
        read_transcript("/nonexistent/t.jsonl")


def test_closed_writer_refuses(tmp_path: Path) -> None:
    w = TranscriptWriter.open(tmp_path / "t.jsonl", model="m")
    w.close()
    w.close()
    assert w.closed
    w.sync()  # no-op once closed
    with pytest.raises(TranscriptError, match="closed"):
        w.append(UserMessage("x"))


def test_resume_truncates_the_torn_line_before_appending(
    tmp_path: Path, history: tuple[Message, ...]
) -> None:
    path = tmp_path / "t.jsonl"
    write(path, history[:4])
    data = path.read_bytes()
    path.write_bytes(data[:-7])  # torn line: the assistant message with t3
    t = read_transcript(path)
    assert t.torn_line
    w = TranscriptWriter.open(path, model="m2", truncate_to=t.valid_length)
    w.append(UserMessage("go on"))
    w.close()
    t2 = read_transcript(path)
    assert not t2.torn_line
    assert t2.model == "m2"
    assert t2.messages == (*history[:3], UserMessage("go on"))


def test_repair_keeps_given_results_and_orders_them_first() -> None:
    history: list[Message] = [
        UserMessage("hi"),
        assistant(1, "a"),
        assistant(2, "b", "c"),  # one answer split per block, as the stream hands it out
        UserMessage([ToolResultBlock("b", "done"), TextBlock("and then")]),
        assistant(3, "d"),
        UserMessage("new prompt"),
    ]
    fixed, ids = repair_history(history, reason="gone")
    assert ids == ("a", "c", "d")
    assert fixed[3] == UserMessage(
        [
            ToolResultBlock("b", "done"),
            ToolResultBlock("a", "gone", is_error=True),
            ToolResultBlock("c", "gone", is_error=True),
            TextBlock("and then"),
        ]
    )
    assert fixed[5] == UserMessage(
        [ToolResultBlock("d", "gone", is_error=True), TextBlock("new prompt")]
    )
    check_history(fixed)
    assert repair_history(fixed) == (fixed, ())
    assert repair_history([UserMessage(""), assistant(1, "x"), UserMessage("")])[0][
        -1
    ] == UserMessage([ToolResultBlock("x", INTERRUPTED_TOOL_MESSAGE, is_error=True)])


# A history as a session writes it: prompts, answers (maybe with tool uses), results.
@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    out: list[Message] = []
    counter = 0
    for turn in range(draw(st.integers(1, 3))):
        out.append(UserMessage(draw(st.text(max_size=20))))
        for it in range(draw(st.integers(0, 3))):
            n = draw(st.integers(0, 3))
            ids = [f"toolu_{counter + k}" for k in range(n)]
            counter += n
            out.append(assistant(turn * 10 + it, *ids, text=draw(st.text(max_size=30))))
            if ids:
                out.append(results(*ids))
    return out


@settings(max_examples=150, deadline=None)
@given(history=histories(), data=st.data())
def test_any_crash_point_resumes_to_a_valid_prefix(
    tmp_path_factory: pytest.TempPathFactory, history: list[Message], data: st.DataObject
) -> None:
    tmp = tmp_path_factory.mktemp("crash")
    path = tmp / "t.jsonl"
    write(path, history)
    size = path.stat().st_size
    # (timestamps vary in width, so the cut is drawn as a fraction of the size)
    cut = data.draw(st.integers(0, 10**6), label="cut") * size // 10**6
    with open(path, "r+b") as f:
        f.truncate(cut)
    t = read_transcript(path)
    check_history(t.messages)
    # what survived is the written history's prefix, plus synthetic results
    kept = [
        m
        for m in t.messages
        if not (
            isinstance(m, UserMessage)
            and m.tool_results
            and all(r.content == INTERRUPTED_TOOL_MESSAGE for r in m.tool_results)
        )
    ]
    assert kept == history[: len(kept)]
    # resuming appends cleanly after the crash
    w = TranscriptWriter.open(path, model="m", truncate_to=t.valid_length)
    for m in t.messages[len(kept) :]:
        w.append(m)
    w.append(UserMessage("next"))
    w.close()
    again = read_transcript(path)
    assert not again.torn_line
    assert again.messages == (*t.messages, UserMessage("next"))
    os.remove(path)
