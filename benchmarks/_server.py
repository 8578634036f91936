"""The benchmark's scripted model server, run in its own process (``python -m benchmarks serve``).

One loopback server (trio_agent.testing's h11 server) answers every contestant. The
answer is chosen from the request alone, so any number of conversations can share it:
the path ``/s/<scenario>/<scale>/v1/messages`` names the scenario, and the number of
assistant messages already in the request's history says which answer comes next.
``/s/<scenario>/<scale>/v1/responses`` serves the same answers as OpenAI Responses
streams (the assistant turns of its ``input`` items counted instead).
A non-streaming request (``"stream": false``, as pydantic-ai sends) gets the same
message as JSON after the time the stream would have taken, like the real API.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

import trio

from ._scenarios import SCALE, SCENARIOS, answers


class Router:
    """Duck-typed like ScriptedModel for serve_scripted_model: only ``respond`` is used."""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, float], list[Any]] = {}
        self.served = 0

    def _answers(self, name: str, scale: float) -> list[Any]:
        key = (name, scale)
        if key not in self._cache:
            scenario = SCALE if name == "scale" else SCENARIOS[name]
            self._cache[key] = answers(scenario, scale)
        return self._cache[key]

    def respond(
        self, method: str, path: str, headers: Iterable[tuple[str, str]], content: bytes
    ) -> Any:
        from trio_agent.testing import HTTPErrorAnswer, ScriptedModel, ScriptedRequest, plan_stream

        self.served += 1
        request = ScriptedRequest.build(method, path, headers, content)
        parts = path.strip("/").split("/")
        body = request.body if isinstance(request.body, dict) else {}
        responses = parts[3:] == ["v1", "responses"]
        try:
            if parts[0] != "s" or not (responses or parts[3:] == ["v1", "messages"]):
                raise ValueError(f"unknown path {path}")
            script = self._answers(parts[1], float(parts[2]))
            if responses:
                turn = assistant_turns(body.get("input", []))
            else:
                turn = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
            answer = script[min(turn, len(script) - 1)]
        except (KeyError, IndexError, ValueError) as exc:
            answer = HTTPErrorAnswer(
                status=404,
                headers={"x-should-retry": "false"},
                body={"type": "error", "error": {"type": "not_found_error", "message": repr(exc)}},
            )
        else:
            if body.get("stream") is not True:
                duration = plan_stream(answer).schedule()[-1][0]
                message = {"type": "message", "role": "assistant", **answer.message.to_api()}
                answer = HTTPErrorAnswer(status=200, body=message, delay=duration)
        protocol = "openai-responses" if responses else "anthropic"
        return ScriptedModel([answer], protocol=protocol).respond(method, path, headers, content)


def assistant_turns(items: Any) -> int:
    """How many assistant turns a Responses ``input`` holds: runs of assistant items
    (``role: assistant`` messages, ``function_call`` and ``reasoning`` items)."""
    turns = 0
    inside = False
    for item in items if isinstance(items, list) else []:
        kind = item.get("type") if isinstance(item, dict) else None
        role = item.get("role") if isinstance(item, dict) else None
        assistant = role == "assistant" or kind in ("function_call", "reasoning")
        if assistant and not inside:
            turns += 1
        inside = assistant
    return turns


async def _serve(port: int) -> None:
    from trio_agent.testing import serve_scripted_model

    router = Router()
    async with serve_scripted_model(router, port=port) as base_url:  # type: ignore[arg-type]
        print(base_url, flush=True)
        # Serve until the parent closes our stdin.
        await trio.to_thread.run_sync(sys.stdin.read, abandon_on_cancel=True)


def serve_forever(port: int = 0) -> None:
    trio.run(_serve, port)
