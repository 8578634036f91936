"""examples/fastapi_app.py under a real uvicorn server on 127.0.0.1, driven by a
real HTTP client (httpx, SSE read with httpx-sse): many turns at once, a client
that disconnects, an error turn, the server shut down mid-turn."""

from __future__ import annotations

import asyncio
import json
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import httpx_sse

import trio_agent.aio as aio
from trio_agent import UserMessage
from trio_agent.testing import check_history, process_exited

RunAsyncio = Callable[..., Any]

TURNS = 50


async def _turn(
    http: httpx.AsyncClient,
    url: str,
    prompt: str,
    leave: Callable[[httpx_sse.ServerSentEvent], bool] = lambda _: False,
) -> list[httpx_sse.ServerSentEvent]:
    """The events of one turn, read to the end or until *leave* says so (then the
    client disconnects)."""
    got: list[httpx_sse.ServerSentEvent] = []
    async with httpx_sse.aconnect_sse(http, "POST", url, json={"prompt": prompt}) as source:
        assert source.response.status_code == 200
        async for event in source.aiter_sse():
            got.append(event)
            if leave(event):
                break
    return got


def _data(event: httpx_sse.ServerSentEvent) -> Any:
    return json.loads(event.data)


def _check_complete(events: list[httpx_sse.ServerSentEvent], output: str) -> None:
    """One whole tool turn, in order: numbered 0..n-1, the tool's output, the end."""
    assert [int(e.id) for e in events] == list(range(len(events)))
    names = [e.event for e in events]
    assert names[-1] == "turn_end"
    assert _data(events[-1])["reason"] == "completed"
    assert names.index("assistant_message") < names.index("tool_result") < names.index("transition")
    progress = [_data(e)["data"] for e in events if e.event == "tool_progress"]
    assert progress == [output]
    text = "".join(_data(e)["text"] for e in events if e.event == "text_delta")
    assert text.endswith("The command ran.")


def _pid_of(event: httpx_sse.ServerSentEvent) -> int | None:
    if event.event == "tool_progress" and _data(event)["data"].isdigit():
        return int(_data(event)["data"])
    return None


def test_fifty_turns_at_once_and_a_client_that_leaves(
    run_asyncio: RunAsyncio, serve_app: Any, example: types.ModuleType, tmp_path: Path
) -> None:
    async def main() -> None:
        app = example.create_app(tmp_path)
        sessions = app.state.sessions
        async with serve_app(app) as (url, _server):
            limits = httpx.Limits(max_connections=TURNS + 10)
            async with httpx.AsyncClient(timeout=120, limits=limits) as http:
                pid: list[int] = []

                def leave_at_pid(event: httpx_sse.ServerSentEvent) -> bool:
                    found = _pid_of(event)
                    if found is not None:
                        pid.append(found)
                    return found is not None

                gone = asyncio.create_task(
                    _turn(http, f"{url}/sessions/gone", "$ echo $$; exec sleep 60", leave_at_pid)
                )
                turns = [
                    asyncio.create_task(_turn(http, f"{url}/sessions/s{i}", f"$ echo turn {i}"))
                    for i in range(TURNS - 1)
                ]
                await gone
                results = await asyncio.gather(*turns)
                # The client that left: its turn was aborted, its process is gone.
                assert await asyncio.to_thread(process_exited, pid[0], timeout=60)
                await sessions.wait_idle("gone")
                history = await http.get(f"{url}/sessions/gone")
                assert history.json()["running"] is False

        for i, events in enumerate(results):
            _check_complete(events, f"turn {i}")
            check_history(sessions.get(f"s{i}").messages, strict=True)
        left = sessions.get("gone")
        check_history(left.messages, strict=True)
        last = left.messages[-1]
        assert isinstance(last, UserMessage)
        assert last.content[0].is_error  # its Bash call answered, as aborted
        assert len(sessions.brains["gone"].model.requests) == 1  # it went no further
        assert sessions.peak_running >= 2

    run_asyncio(main)


def test_an_error_turn_sends_the_error_event(
    run_asyncio: RunAsyncio, serve_app: Any, example: types.ModuleType, tmp_path: Path
) -> None:
    async def main() -> None:
        app = example.create_app(tmp_path)
        async with serve_app(app) as (url, _server), httpx.AsyncClient(timeout=60) as http:
            events = await _turn(http, f"{url}/sessions/e", "!fail")
            after = await _turn(http, f"{url}/sessions/e", "hello")
            busy_free = await http.get(f"{url}/sessions/e")
        names = [e.event for e in events]
        assert names[-2:] == ["turn_end", "error"]
        assert _data(events[-2])["reason"] == "error"
        assert _data(events[-1])["type"] == "InvalidRequestError"
        # The session goes on after the error.
        assert _data(after[-1])["reason"] == "completed"
        assert busy_free.json()["running"] is False
        check_history(app.state.sessions.get("e").messages, strict=True)

    run_asyncio(main)


def test_abort_endpoint_ends_the_stream_with_its_turn_end(
    run_asyncio: RunAsyncio, serve_app: Any, example: types.ModuleType, tmp_path: Path
) -> None:
    async def main() -> None:
        app = example.create_app(tmp_path)
        async with serve_app(app) as (url, _server), httpx.AsyncClient(timeout=60) as http:
            pids: list[int] = []
            aborted: list[Any] = []

            async def abort_at_pid(event: httpx_sse.ServerSentEvent) -> None:
                found = _pid_of(event)
                if found is not None:
                    pids.append(found)
                    aborted.append((await http.post(f"{url}/sessions/a/abort")).json())

            got: list[httpx_sse.ServerSentEvent] = []
            payload = {"prompt": "$ echo $$; exec sleep 60"}
            async with httpx_sse.aconnect_sse(
                http, "POST", f"{url}/sessions/a", json=payload
            ) as source:
                async for event in source.aiter_sse():
                    got.append(event)
                    await abort_at_pid(event)
        assert aborted == [{"aborted": True}]
        assert got[-1].event == "turn_end"
        assert _data(got[-1])["reason"] == "aborted_tools"
        assert process_exited(pids[0], timeout=0)
        check_history(app.state.sessions.get("a").messages, strict=True)

    run_asyncio(main)


def test_shutdown_during_turns_ends_them_cleanly(
    run_asyncio: RunAsyncio, serve_app: Any, example: types.ModuleType, tmp_path: Path
) -> None:
    async def main() -> None:
        app = example.create_app(tmp_path)
        sessions = app.state.sessions
        pids: list[int] = []
        all_started = asyncio.Event()
        streams = 3

        def note_pid(event: httpx_sse.ServerSentEvent) -> bool:
            found = _pid_of(event)
            if found is not None:
                pids.append(found)
                if len(pids) == streams:
                    all_started.set()
            return False

        async def stream(i: int) -> BaseException | None:
            try:
                await _turn(http, f"{url}/sessions/x{i}", "$ echo $$; exec sleep 60", note_pid)
            except httpx.HTTPError as exc:  # the server closed the connection mid-stream
                return exc
            return None

        before = asyncio.all_tasks()
        async with httpx.AsyncClient(timeout=60) as http:
            # Streams get no grace at shutdown: their handlers are cancelled at once.
            async with serve_app(app, timeout_graceful_shutdown=0) as (url, server):
                clients = [asyncio.create_task(stream(i)) for i in range(streams)]
                await all_started.wait()
                run = app.state.guest_run
                assert run.statistics().turns == streams
                server.should_exit = True
            closed = await asyncio.gather(*clients)
        assert all(isinstance(exc, httpx.HTTPError) for exc in closed), closed
        # serve() has returned: the lifespan closed the guest run, which waited for
        # every turn; no process of theirs is left, no task of the run either.
        assert run.stopped
        assert run.statistics() == aio.GuestRunStatistics("stopped", 0, 0)
        for pid in pids:
            assert process_exited(pid, timeout=0)
        for i in range(streams):
            session = sessions.get(f"x{i}")
            assert not session.running
            check_history(session.messages, strict=True)
        # The request handlers ended (cancelled): nothing the server started is left.
        left = asyncio.all_tasks() - before
        if left:
            await asyncio.wait(left)
        assert sessions.running == 0

    run_asyncio(main)
