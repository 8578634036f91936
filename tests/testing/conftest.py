"""Fixtures of the trio_agent.testing tests.

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
