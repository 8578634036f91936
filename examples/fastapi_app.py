"""trio_agent in a FastAPI app: each session's turns stream as Server-Sent Events.

    python examples/fastapi_app.py            # uvicorn on http://127.0.0.1:8000

    curl -N -X POST localhost:8000/sessions/demo -H 'content-type: application/json' \\
         -d '{"prompt": "$ echo hello; sleep 2; echo world"}'
    curl -X POST localhost:8000/sessions/demo/abort      # from another shell
    curl localhost:8000/sessions/demo                     # the history

- ``POST /sessions/{id}`` (``{"prompt": ...}``) runs a turn of session *id* (created on
  first use) and streams its events: ``id:`` numbers them, ``event:`` names them
  (``text_delta``, ``tool_progress``, ``tool_result``, ``turn_end``...), ``data:`` is
  JSON. A turn that fails sends an ``error`` event. 409 if the session is busy.
- ``POST /sessions/{id}/abort`` aborts its running turn (the stream then ends with
  its ``turn_end``).
- ``GET /sessions/{id}`` is its history, as Messages API JSON.

The turns run in the loop's Trio guest run (:mod:`trio_agent.aio`), opened for the
app's lifespan. A client that disconnects mid-turn gets its handler task cancelled,
which aborts that turn only: its tool calls answered, its processes killed, the
history valid, before the handler returns. Shutting the server down aborts the
turns still running the same way.

The model is scripted by default (trio_agent.testing.ScriptedModel), so the app
runs offline: a prompt ``$ <command>`` makes it run the command with Bash, ``!fail``
makes the model call fail, anything else is answered with text. ``--anthropic``
uses the real API (``ANTHROPIC_API_KEY``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import fastapi
import pydantic
import uvicorn
from fastapi.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

import trio_agent
import trio_agent.aio
from trio_agent import (
    AssistantMessage,
    BlockFinished,
    ModelClient,
    TextBlock,
    TextDelta,
    ToolFinished,
    ToolProgress,
    ToolResult,
    ToolUseBlock,
    Transition,
    TurnEnd,
    UserMessage,
)
from trio_agent.testing import HTTPErrorAnswer, ScriptedAnswer, ScriptedModel
from trio_agent.tools import Bash, Workspace

# -- the scripted model: offline answers chosen by the prompt ---------------------------


class ScriptedBrain:
    """A session's scripted model: each prompt adds the answers that turn gets."""

    def __init__(self) -> None:
        self.model = ScriptedModel()
        self.calls = 0

    def client(self) -> ModelClient:
        return self.model.client()

    def prepare(self, prompt: str) -> None:
        self.calls += 1
        if prompt.startswith("$ "):
            command = prompt[2:]
            tool_id = f"toolu_{self.calls}"
            self.model.extend(
                [
                    ScriptedAnswer(
                        blocks=[
                            TextBlock(f"Running `{command}`."),
                            ToolUseBlock(tool_id, "Bash", {"command": command}),
                        ]
                    ),
                    ScriptedAnswer(blocks=[TextBlock("The command ran.")]),
                ]
            )
        elif prompt == "!fail":
            self.model.append(HTTPErrorAnswer(status=400))
        else:
            self.model.append(ScriptedAnswer(blocks=[TextBlock(f"You said: {prompt}")]))


# -- events as SSE ------------------------------------------------------------------------


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")


def event_data(event: Any) -> dict[str, Any]:
    """A turn event as JSON-able data."""
    if isinstance(event, TextDelta):
        return {"text": event.text, "index": event.index}
    if isinstance(event, ToolProgress):
        return {"tool_use_id": event.tool_use_id, "data": str(event.data)}
    if isinstance(event, ToolFinished):
        return {"tool_use_id": event.tool_use_id, "is_error": event.is_error}
    if isinstance(event, ToolResult):
        content = event.content if isinstance(event.content, str) else "(blocks)"
        return {"tool_use_id": event.tool_use_id, "is_error": event.is_error, "content": content}
    if isinstance(event, BlockFinished):
        return {"index": event.index, "block": event.block.to_api()}
    if isinstance(event, AssistantMessage | UserMessage):
        return {"message": event.to_api()}
    if isinstance(event, Transition):
        return {"reason": str(event.reason), "turn": event.turn}
    if isinstance(event, TurnEnd):
        return {
            "reason": str(event.reason),
            "turns": event.turns,
            "message": event.message,
            "error": None if event.error is None else type(event.error).__name__,
        }
    return {}


def sse(number: int, name: str, data: dict[str, Any]) -> bytes:
    return f"id: {number}\nevent: {name}\ndata: {json.dumps(data)}\n\n".encode()


class TurnResponse(Response):
    """Runs one turn of *session* while streaming its events as SSE.

    A watcher task waits for the client's ``http.disconnect`` and then cancels the
    handler task: the cancellation lands inside ``session.submit``'s block, which
    aborts the turn and waits for it to end before the handler goes on.
    """

    media_type = "text/event-stream"

    def __init__(self, sessions: Sessions, session_id: str, prompt: str) -> None:
        # Not Response.__init__: it would send a content-length for an empty body.
        self.status_code = 200
        self.background = None
        self.raw_headers = [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-cache"),
        ]
        self.sessions = sessions
        self.session_id = session_id
        self.session = sessions.get(session_id)
        self.prompt = prompt

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        handler = asyncio.current_task()
        assert handler is not None
        disconnected = False

        async def watch() -> None:
            nonlocal disconnected
            while (await receive())["type"] != "http.disconnect":
                pass
            disconnected = True
            handler.cancel()  # the client left: end its turn

        watcher = asyncio.create_task(watch())
        self.sessions.started(self.session_id)
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            # aclosing: a cancellation that lands in send() still closes the
            # generator here, so its submit() block aborts the turn now.
            async with contextlib.aclosing(self.chunks()) as chunks:
                async for chunk in chunks:
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except asyncio.CancelledError:
            if not disconnected:
                raise  # the server is shutting down: let it go on
            handler.uncancel()  # ours: the turn is over, the request is done
        finally:
            watcher.cancel()
            self.sessions.ended(self.session_id)

    async def chunks(self) -> AsyncIterator[bytes]:
        number = 0
        try:
            async with self.session.submit(self.prompt) as events:
                async for event in events:
                    yield sse(number, _snake(type(event).__name__), event_data(event))
                    number += 1
                    if isinstance(event, TurnEnd) and event.error is not None:
                        error = event.error
                        yield sse(
                            number, "error", {"type": type(error).__name__, "message": str(error)}
                        )
                        number += 1
        except trio_agent.TrioAgentError as exc:  # the turn raised (a transcript write...)
            yield sse(number, "error", {"type": type(exc).__name__, "message": str(exc)})


# -- the app --------------------------------------------------------------------------------


class Prompt(pydantic.BaseModel):
    prompt: str


class Sessions:
    """The app's sessions by id, each with its own scripted model (or a shared client)."""

    def __init__(self, workspace: Path, client: ModelClient | None) -> None:
        self.workspace = Workspace(workspace)
        self.client = client
        self.sessions: dict[str, trio_agent.aio.Session] = {}
        self.brains: dict[str, ScriptedBrain] = {}
        self.running = 0  # turns streaming now
        self.peak_running = 0  # the most at once

        self.streaming: set[str] = set()  # sessions whose stream is open
        self._waiters: list[asyncio.Future[None]] = []

    def started(self, session_id: str) -> None:
        self.streaming.add(session_id)
        self.running += 1
        self.peak_running = max(self.peak_running, self.running)

    def ended(self, session_id: str) -> None:
        self.streaming.discard(session_id)
        self.running -= 1
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def get(self, session_id: str) -> trio_agent.aio.Session:
        session = self.sessions.get(session_id)
        if session is None:
            client = self.client
            if client is None:
                brain = self.brains[session_id] = ScriptedBrain()
                client = brain.client()
            tools = [Bash(self.workspace, timeout=60)]
            session = trio_agent.aio.Session(client, tools, model=trio_agent.DEFAULT_MODEL)
            self.sessions[session_id] = session
        return session

    async def wait_idle(self, session_id: str) -> None:
        """Wait until session *session_id* has no stream open (its turn is over)."""
        while session_id in self.streaming:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            await waiter


def create_app(workspace: Path, client: ModelClient | None = None) -> fastapi.FastAPI:
    """The app; *client* for a real model (None: a scripted model per session)."""
    sessions = Sessions(workspace, client)

    @contextlib.asynccontextmanager
    async def lifespan(app: fastapi.FastAPI) -> AsyncIterator[None]:
        # One Trio run for the app's life; leaving aborts the turns still running.
        async with trio_agent.aio.open_guest_run() as run:
            app.state.guest_run = run
            yield

    app = fastapi.FastAPI(title="trio_agent over SSE", lifespan=lifespan)
    app.state.sessions = sessions

    @app.post("/sessions/{session_id}")
    async def turn(session_id: str, body: Prompt) -> Response:
        session = sessions.get(session_id)
        if session.running:
            raise fastapi.HTTPException(409, f"session {session_id!r} is running a turn")
        brain = sessions.brains.get(session_id)
        if brain is not None:
            brain.prepare(body.prompt)
        return TurnResponse(sessions, session_id, body.prompt)

    @app.post("/sessions/{session_id}/abort", status_code=202)
    async def abort(session_id: str) -> dict[str, bool]:
        session = sessions.sessions.get(session_id)
        if session is None:
            raise fastapi.HTTPException(404, f"no session {session_id!r}")
        running = session.running
        session.abort()
        return {"aborted": running}

    @app.get("/sessions/{session_id}")
    async def history(session_id: str) -> JSONResponse:
        session = sessions.sessions.get(session_id)
        if session is None:
            raise fastapi.HTTPException(404, f"no session {session_id!r}")
        return JSONResponse(
            {"running": session.running, "messages": [m.to_api() for m in session.messages]}
        )

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--workspace", type=Path, default=None)
    parser.add_argument("--anthropic", action="store_true", help="the real API, not a script")
    args = parser.parse_args()
    client = trio_agent.AnthropicClient() if args.anthropic else None
    with contextlib.ExitStack() as stack:
        workspace = args.workspace or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        app = create_app(workspace, client)
        # Streams in flight get 5 s at shutdown; then their handlers are cancelled,
        # which aborts their turns.
        uvicorn.run(app, host=args.host, port=args.port, timeout_graceful_shutdown=5)


if __name__ == "__main__":
    main()
