"""Fixtures of the asyncio bridge's tests: plain ``asyncio.run``, checked.

``run_asyncio(main)`` runs ``main()`` under ``asyncio.run`` with a loop exception
handler that records what asyncio would only log ("Task exception was never
retrieved", an error in a callback...), then checks that nothing was recorded and
that every Trio guest run the test used has stopped with no task of its own left.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

import trio_agent.aio as aio
from trio_agent import DEFAULT_MODEL

T = TypeVar("T")

MODEL = DEFAULT_MODEL


def _run_checked(main: Callable[[], Awaitable[T]]) -> T:
    problems: list[dict[str, Any]] = []
    runs: list[aio.GuestRun] = []

    async def wrapper() -> T:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _loop, context: problems.append(context))
        try:
            return await main()
        finally:
            run = _guest_run_of(loop)  # stopped by asyncio.run's shutdown, checked after
            if run is not None:
                runs.append(run)

    result = asyncio.run(wrapper())
    assert problems == [], problems
    for run in runs:
        assert run.stopped, run
        assert run.statistics().tasks == 0, run.statistics()
    return result


def _guest_run_of(loop: asyncio.AbstractEventLoop) -> aio.GuestRun | None:
    from trio_agent.aio import _guest

    return _guest._RUNS.get(loop)  # pyright: ignore[reportPrivateUsage]


@pytest.fixture
def run_asyncio() -> Callable[[Callable[[], Awaitable[Any]]], Any]:
    """``run_asyncio(main)``: ``asyncio.run(main())``, checked (see the module doc)."""
    return _run_checked
