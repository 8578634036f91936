"""Fixtures of the trio_agent.testing tests.

``checked_run`` is a good record of each kind (a scenario trace, a run of real tools)
for the checker-mutation tests.

``reference`` is an independent, deliberately naive reference: a spec-following SSE
decoder (lines end at CR, LF or CRLF only; one leading BOM is dropped) and a plain-dict
Messages API accumulator. The differential tests check the bytes and events that
``trio_agent.testing`` renders against it, so it must not reuse the library's own
parser or accumulator.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs
import pytest
import trio

from trio_agent import Tool, ToolUseBlock
from trio_agent.testing import (
    ScenarioCall,
    ToolCall,
    ToolCallBatch,
    ToolScenario,
    check_tool_run,
    check_trace,
    run_scenario,
    run_tool_calls,
)

_LINE = re.compile(r"\r\n|\r|\n")


def decode_sse(data: bytes) -> list[tuple[str, dict[str, Any]]]:
    """``(event name, parsed data)`` for each event in a complete SSE byte string."""
    text = data.decode("utf-8")
    text = text.removeprefix("\ufeff")
    events: list[tuple[str, dict[str, Any]]] = []
    name, lines = "message", list[str]()
    for line in _LINE.split(text):
        if not line:
            if lines:
                events.append((name, json.loads("\n".join(lines))))
            name, lines = "message", []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            name = value
        elif field == "data":
            lines.append(value)
    return events


def accumulate(events: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The message JSON a stream of raw event dicts builds up (naive, for comparison)."""
    message: dict[str, Any] = {}
    partial: dict[int, str] = {}
    for event in events:
        kind = event["type"]
        if kind == "message_start":
            message = copy.deepcopy(dict(event["message"]))
        elif kind == "content_block_start":
            assert event["index"] == len(message["content"])
            message["content"].append(copy.deepcopy(dict(event["content_block"])))
        elif kind == "content_block_delta":
            block = message["content"][event["index"]]
            delta = event["delta"]
            if delta["type"] == "text_delta":
                block["text"] += delta["text"]
            elif delta["type"] == "thinking_delta":
                block["thinking"] += delta["thinking"]
            elif delta["type"] == "signature_delta":
                block["signature"] = delta["signature"]
            elif delta["type"] == "citations_delta":
                block.setdefault("citations", []).append(delta["citation"])
            elif delta["type"] == "input_json_delta":
                partial[event["index"]] = partial.get(event["index"], "") + delta["partial_json"]
            else:
                raise AssertionError(f"unknown delta {delta!r}")
        elif kind == "content_block_stop":
            raw = partial.pop(event["index"], None)
            if raw is not None:
                message["content"][event["index"]]["input"] = json.loads(raw) if raw else {}
        elif kind == "message_delta":
            message.update(event["delta"])
            message["usage"].update({k: v for k, v in event["usage"].items() if v is not None})
        elif kind not in ("message_stop", "ping"):
            raise AssertionError(f"unexpected event {event!r}")
    return message


@attrs.frozen
class SSEReference:
    """The reference decoder and accumulator, handed to tests as one fixture."""

    decode_sse: Callable[[bytes], list[tuple[str, dict[str, Any]]]] = decode_sse
    accumulate: Callable[[Iterable[Mapping[str, Any]]], dict[str, Any]] = accumulate


@pytest.fixture(scope="session")
def reference() -> SSEReference:
    """The independent SSE decoder and accumulator the differential tests compare with."""
    return SSEReference()


# -- a good record of each kind, for the checker-mutation tests --------------------------


@attrs.frozen
class CheckedRun:
    """A record that passes its checker, and how to check and edit it."""

    kind: str
    good: Any  # a Trace or a ToolRun
    check: Callable[[Any], None]

    def with_events(self, events: Iterable[Any]) -> Any:
        return attrs.evolve(self.good, events=tuple(events))

    def with_cap(self, cap: int) -> Any:
        if self.kind == "trace":
            return attrs.evolve(
                self.good, scenario=attrs.evolve(self.good.scenario, max_concurrency=cap)
            )
        return attrs.evolve(self.good, max_concurrency=cap)

    def find(self, kind: str, index: int) -> int:
        return next(
            p for p, e in enumerate(self.good.events) if e.kind == kind and e.index == index
        )


_N_SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "number", "minimum": 0}},
    "required": ["n"],
}


def _tool_run() -> Any:
    async def look(input: Mapping[str, Any], ctx: Any) -> str:
        ctx.progress("looking")
        await trio.sleep(input["n"])
        return f"looked {input['n']}"

    async def write(input: Mapping[str, Any], ctx: Any) -> str:
        await trio.sleep(input["n"])
        return f"wrote {input['n']}"

    tools = [
        Tool("look", "Wait n seconds, reporting progress.", _N_SCHEMA, look, concurrency_safe=True),
        Tool("write", "Wait n seconds; not concurrency-safe.", _N_SCHEMA, write),
    ]
    calls = [(0, "look", 2), (0, "look", 1), (0, "write", 1), (1.5, "look", 1)]
    return run_tool_calls(
        tools,
        ToolCallBatch(
            [
                ToolCall(ToolUseBlock(f"toolu_{i}", name, {"n": n}), arrival)
                for i, (arrival, name, n) in enumerate(calls)
            ]
        ),
    )


@pytest.fixture(scope="module", params=["trace", "tool_run"])
def checked_run(request: pytest.FixtureRequest) -> CheckedRun:
    """The same four calls as a synthetic scenario trace and as a run of real tools:
    0 and 1 safe (0 reports progress), 2 not safe, 3 safe and arriving at 1.5 s."""
    if request.param == "trace":
        scenario = ToolScenario(
            [
                ScenarioCall(duration=2, progress=(0.5,), safe=True),
                ScenarioCall(duration=1, safe=True),
                ScenarioCall(duration=1, safe=False),
                ScenarioCall(arrival=1.5, duration=1, safe=True),
            ]
        )
        run = CheckedRun("trace", run_scenario(scenario), check_trace)
    else:
        run = CheckedRun("tool_run", _tool_run(), check_tool_run)
    run.check(run.good)
    return run
