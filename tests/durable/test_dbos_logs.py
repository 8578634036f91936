"""The worker quiets DBOS's repeated warnings (its queue thread warns at every poll
while the database is unreachable) on DBOS's logger only: a handler DBOS's logger
shares with the rest of the process (pytest's log capture is one) keeps every
record of every other logger, however often a line repeats."""

from __future__ import annotations

import logging
import pathlib

from trio_agent import Session
from trio_agent.durable import Agent, open_worker
from trio_agent.testing import ScriptedModel


class Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(f"{record.name}: {record.getMessage()}")


def say(logger: logging.Logger, i: int) -> None:
    logger.warning("the same line, time %d", i)  # one place, every time


async def test_repeated_lines_of_other_loggers_all_reach_a_shared_handler(
    tmp_path: pathlib.Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    model = ScriptedModel([])

    def build(session_id: str) -> Session:
        return Session(model.client(), [], model="m", max_tokens=64)

    shared = Kept()
    dbos, ours = logging.getLogger("dbos"), logging.getLogger("trio_agent.durable.test")
    dbos.addHandler(shared)
    ours.addHandler(shared)
    try:
        async with open_worker(Agent("w", build), database_url=url, concurrency=1):
            assert shared.filters == []  # the handler is not the worker's to change
            shared.messages.clear()
            for i in range(3):
                say(ours, i)
            for i in range(3):
                say(dbos, i)
    finally:
        dbos.removeHandler(shared)
        ours.removeHandler(shared)
    assert shared.messages == [
        "trio_agent.durable.test: the same line, time 0",
        "trio_agent.durable.test: the same line, time 1",
        "trio_agent.durable.test: the same line, time 2",
        "dbos: the same line, time 0",  # DBOS's own: once per place per 10 s
    ]
