"""The SQL session store (durable turns) and the session ids it files histories under."""

from __future__ import annotations

import pathlib
import threading

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from trio_agent import (
    AssistantMessage,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    TranscriptError,
    UserMessage,
)
from trio_agent._session import check_session_id
from trio_agent.durable import DurableError, SqlSessionStore

texts = st.text(max_size=30)


@st.composite
def turns(draw: st.DrawFn) -> list[UserMessage | AssistantMessage]:
    """One turn's messages: a prompt, maybe a tool round trip (a tool_use id used only
    once in a conversation, as the API's are), an answer."""
    out: list[UserMessage | AssistantMessage] = [UserMessage(draw(texts))]
    if draw(st.booleans()):
        use_id = f"toolu_{draw(st.uuids()).hex}"
        out.append(AssistantMessage("m1", "x", (ToolUseBlock(use_id, "Read", {"p": draw(texts)}),)))
        out.append(UserMessage((ToolResultBlock(use_id, draw(texts)),)))
    out.append(AssistantMessage("m2", "x", (TextBlock(draw(texts)),)))
    return out


@pytest.fixture
def make_store(tmp_path_factory: pytest.TempPathFactory):
    def make() -> SqlSessionStore:
        directory = tmp_path_factory.mktemp("store")
        return SqlSessionStore.connect(f"sqlite:///{directory / 'db.sqlite'}")

    return make


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(history=st.lists(turns(), max_size=3))
def test_append_then_load_gives_the_history_back(make_store, history) -> None:
    store = make_store()
    assert store.load("alice") == ()
    for turn in history:
        store.append("alice", turn)
    assert list(store.load("alice")) == [m for turn in history for m in turn]
    assert store.load("bob") == ()


def test_load_answers_a_tool_use_left_without_result(make_store) -> None:
    store = make_store()
    store.append(
        "s", [UserMessage("go"), AssistantMessage("m", "x", (ToolUseBlock("t1", "Read", {}),))]
    )
    history = store.load("s")
    assert len(history) == 3
    (result,) = history[2].tool_results
    assert result.tool_use_id == "t1"
    assert result.is_error


@settings(max_examples=200, deadline=None)
@given(session_id=st.text(max_size=40))
@example(session_id="session-1")  # accepted: the assertions run, whatever is drawn
def test_a_session_id_never_names_another_place(session_id) -> None:
    """An accepted id is one path component (no separator, not ``.`` or ``..``, no
    control character); anything else is a TranscriptError."""
    try:
        assert check_session_id(session_id) == session_id
    except TranscriptError:
        return  # refused: fine
    assert 1 <= len(session_id) <= 200
    assert pathlib.PurePath(session_id).name == session_id
    assert "/" not in session_id
    assert "\\" not in session_id
    assert session_id not in (".", "..")
    assert session_id.isprintable()


def test_sql_commit_turn_is_idempotent(tmp_path: pathlib.Path) -> None:
    store = SqlSessionStore.connect(f"sqlite:///{tmp_path / 'db.sqlite'}")
    turn = [UserMessage("hi"), AssistantMessage("m", "x", (TextBlock("hello"),))]
    store.record("turn-1", "model/0", {"a": 1})
    first = store.commit_turn("s", "turn-1", turn, {"text": "hello"})
    again = store.commit_turn("s", "turn-1", turn, {"text": "other"})
    assert first == again == {"text": "hello"}
    assert store.turn_summary("turn-1") == {"text": "hello"}
    assert store.turn_summary("turn-2") is None
    assert list(store.load("s")) == turn  # appended once
    assert store.journal("turn-1") == {}  # dropped with the commit


def test_turn_numbers_are_counted_once_each_under_concurrent_submits(
    tmp_path: pathlib.Path,
) -> None:
    """Submitters numbering turns of the same sessions at once, each on its own
    connection of one database file, the first turn of a session included: every
    number 1..N of a session is handed out exactly once."""
    store = SqlSessionStore.connect(f"sqlite:///{tmp_path / 'db.sqlite'}")
    got: dict[str, list[int]] = {"a": [], "b": []}
    start = threading.Barrier(6)

    def submitter(session_id: str) -> None:
        start.wait()
        for _ in range(20):
            got[session_id].append(store.next_turn_number(session_id))

    try:
        threads = [
            threading.Thread(target=submitter, args=(session_id,))
            for session_id in ("a", "b", "a", "b", "a", "b")
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert sorted(got["a"]) == list(range(1, 61))
        assert sorted(got["b"]) == list(range(1, 61))
        assert store.next_turn_number("a") == 61
        assert store.next_turn_number("c") == 1
    finally:
        store.close()


def test_sql_journal_first_record_wins(tmp_path: pathlib.Path) -> None:
    store = SqlSessionStore.connect(f"sqlite:///{tmp_path / 'db.sqlite'}")
    store.record("t", "k", {"v": 1})
    store.record("t", "k", {"v": 2})
    store.record("t", "k2", [1, "x"])
    assert store.journal("t") == {"k": {"v": 1}, "k2": [1, "x"]}
    assert store.journal("other") == {}


@pytest.mark.parametrize("url", ["", "mysql://u@h/db", "not a url at all", "sqlite+pysqlite"])
def test_bad_database_urls_are_durable_errors(url: str) -> None:
    with pytest.raises(DurableError):
        SqlSessionStore.connect(url)


@pytest.mark.parametrize("stored", ["not json", "[1]", '"text"', "[" * 10_000])
def test_a_corrupt_stored_message_is_a_transcript_error(
    tmp_path: pathlib.Path, stored: str
) -> None:
    store = SqlSessionStore.connect(f"sqlite:///{tmp_path / 'db.sqlite'}")
    store.append("s", [UserMessage("hi")])
    with store.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE trio_agent_messages SET message = ?", (stored,))
    with pytest.raises(TranscriptError, match="message 0"):
        store.load("s")
