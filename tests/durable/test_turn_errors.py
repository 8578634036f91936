"""Turns that end badly end: a tool's own BaseException gives an error summary (the
history kept, the session's next turn runs); a database whose tables have another
shape is a DurableError, never sqlalchemy's."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conftest import Workers  # pyright: ignore

import pathlib
import sqlite3

import pytest
import trio

from trio_agent import AssistantMessage, UserMessage
from trio_agent.durable import DurableClient, DurableError, SqlSessionStore
from trio_agent.testing import check_history


async def test_a_tools_own_base_exception_ends_the_durable_turn(
    tmp_path: pathlib.Path, workers: Workers
) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    client = await trio.to_thread.run_sync(lambda: DurableClient.connect(url, agent="durable-test"))
    try:
        workers.start(url, executor_id="boom")
        with trio.fail_after(60):  # before: PENDING for ever
            failed = await client.submit("frank", "boom now").wait()
            after = await client.submit("frank", "hello").wait()  # not blocked behind it
    finally:
        client.close()
    assert str(failed.reason) == "error"
    assert failed.error is not None
    assert "Boom" in failed.error
    assert "the tool blew up" in failed.error
    assert after.reason == "completed"
    assert after.text == "done: hello"
    check = await trio.to_thread.run_sync(lambda: DurableClient.connect(url, agent="durable-test"))
    try:
        history = check.history("frank")
    finally:
        check.close()
    check_history(history, strict=True)
    # The failed turn's prompt and call are kept, the call answered (interrupted).
    assert history[0] == UserMessage("boom now")
    assert isinstance(history[1], AssistantMessage)
    assert history[1].tool_uses[0].name == "effect"
    assert UserMessage("hello") in history
    assert history[-1].text == "done: hello"
    assert "Boom" in workers.logs()


def test_tables_of_another_shape_are_a_durable_error(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE trio_agent_messages (something_else INTEGER)")
        db.execute("CREATE TABLE trio_agent_turns (other TEXT)")
    client = DurableClient.connect(f"sqlite:///{path}", agent="a")
    try:
        with pytest.raises(DurableError, match=r"cannot read session 'alice'.*OperationalError"):
            client.history("alice")
        store = client.store
        with pytest.raises(DurableError, match="cannot read turn"):
            store.turn_summary("t1")
    finally:
        client.close()
    alone = SqlSessionStore.connect(f"sqlite:///{path}")
    try:
        with pytest.raises(DurableError, match="cannot read session 'bob'"):
            alone.load("bob")
    finally:
        alone.close()
