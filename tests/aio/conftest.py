"""Fixtures of the asyncio bridge's tests: plain ``asyncio.run``, checked.

``run_asyncio(main)`` runs ``main()`` under ``asyncio.run`` with a loop exception
handler that records what asyncio would only log ("Task exception was never
retrieved", an error in a callback...), then checks that nothing was recorded and
that every Trio guest run the test used has stopped with no task of its own left.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import socket
import sys
import types
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
import uvicorn

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


# -- the example app under a real uvicorn ---------------------------------------------------

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fastapi_app.py"


def _load_example() -> types.ModuleType:
    name = "trio_agent_example_fastapi_app"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, EXAMPLE)
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # pydantic and FastAPI resolve its annotations there
        spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def example() -> types.ModuleType:
    """examples/fastapi_app.py, imported."""
    return _load_example()


@contextlib.asynccontextmanager
async def serving(app: Any, **config: Any) -> AsyncIterator[tuple[str, uvicorn.Server]]:
    """*app* under a real uvicorn server on 127.0.0.1 (a random port), in this loop:
    yields its base URL and the server; stops it (and waits for that) on exit."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(256)  # clients may connect before uvicorn accepts: they queue
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", lifespan="on", http="h11", ws="none", **config)
    )
    serve = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        yield f"http://127.0.0.1:{port}", server
    finally:
        server.should_exit = True
        await serve
        sock.close()


@pytest.fixture
def serve_app() -> Callable[..., Any]:
    """``async with serve_app(app, **uvicorn_config) as (url, server)``."""
    return serving
