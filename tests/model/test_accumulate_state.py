"""Stateful test: MessageAccumulator against a simple model of the protocol."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from trio_agent import StreamProtocolError, ToolUseBlock, Usage
from trio_agent.lowlevel import MessageAccumulator
from trio_agent.testing import ScriptedAnswer

texts = st.text(max_size=8)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)


class AccumulatorMachine(RuleBasedStateMachine):
    """The model: a list of blocks as plain dicts, each with its accumulated parts."""

    def __init__(self) -> None:
        super().__init__()
        self.acc = MessageAccumulator()
        self.started = False
        self.stopped = False
        self.blocks: list[dict[str, Any]] = []
        self.stop_reason: str | None = None
        self.output_tokens = 1
        self.pings = 0
        self.ignored = 0
        self.events = 0

    def feed(self, event: dict[str, Any]) -> list[Any]:
        self.events += 1
        return self.acc.feed(event)

    def open_blocks(self, kind: str | None = None) -> list[int]:
        return [
            i
            for i, b in enumerate(self.blocks)
            if not b["stopped"] and (kind is None or b["kind"] == kind)
        ]

    # -- valid moves -----------------------------------------------------------------

    @precondition(lambda self: not self.started)
    @rule()
    def message_start(self) -> None:
        answer = ScriptedAnswer(blocks=[], message_id="msg", model="m", usage=Usage(3, 1))
        assert self.feed(answer.events()[0]) == ()  # the scripted model's message_start
        self.started = True

    @precondition(lambda self: self.started and not self.stopped)
    @rule(kind=st.sampled_from(["text", "thinking", "tool_use"]))
    def block_start(self, kind: str) -> None:
        index = len(self.blocks)
        block: dict[str, Any] = {"type": kind}
        if kind == "text":
            block["text"] = ""
        elif kind == "thinking":
            block.update(thinking="", signature="")
        else:
            block.update(id=f"toolu_{index}", name="tool", input={})
        assert (
            self.feed({"type": "content_block_start", "index": index, "content_block": block}) == ()
        )
        self.blocks.append(
            {"kind": kind, "parts": [], "signature": "", "stopped": False, "input": None}
        )

    @precondition(lambda self: bool(self.open_blocks("text") or self.open_blocks("thinking")))
    @rule(data=st.data(), text=texts)
    def text_delta(self, data: st.DataObject, text: str) -> None:
        index = data.draw(st.sampled_from(self.open_blocks("text") + self.open_blocks("thinking")))
        kind = self.blocks[index]["kind"]
        delta = (
            {"type": "text_delta", "text": text}
            if kind == "text"
            else {"type": "thinking_delta", "thinking": text}
        )
        assert self.feed({"type": "content_block_delta", "index": index, "delta": delta}) == ()
        self.blocks[index]["parts"].append(text)

    @precondition(lambda self: bool(self.open_blocks("thinking")))
    @rule(data=st.data(), signature=texts)
    def signature_delta(self, data: st.DataObject, signature: str) -> None:
        index = data.draw(st.sampled_from(self.open_blocks("thinking")))
        delta = {"type": "signature_delta", "signature": signature}
        self.feed({"type": "content_block_delta", "index": index, "delta": delta})
        self.blocks[index]["signature"] = signature

    @precondition(lambda self: bool(self.open_blocks("tool_use")))
    @rule(data=st.data())
    def tool_input(self, data: st.DataObject) -> None:
        index = data.draw(st.sampled_from(self.open_blocks("tool_use")))
        block = self.blocks[index]
        if block["input"] is None:
            value = data.draw(st.dictionaries(st.text(max_size=4), json_values, max_size=3))
            block["input"] = value
            block["raw"] = json.dumps(value)
            block["sent"] = 0
        raw: str = block["raw"]
        if block["sent"] < len(raw):
            n = data.draw(st.integers(1, len(raw) - block["sent"]))
            part = raw[block["sent"] : block["sent"] + n]
            block["sent"] += n
            delta = {"type": "input_json_delta", "partial_json": part}
            self.feed({"type": "content_block_delta", "index": index, "delta": delta})

    @precondition(lambda self: bool(self.open_blocks()))
    @rule(data=st.data())
    def block_stop(self, data: st.DataObject) -> None:
        index = data.draw(st.sampled_from(self.open_blocks()))
        block = self.blocks[index]
        (done,) = self.feed({"type": "content_block_stop", "index": index})
        block["stopped"] = True
        assert done.to_api() == self.expected_block(index)
        if block["kind"] == "tool_use":
            assert isinstance(done, ToolUseBlock)
            complete = block["input"] is None or block["sent"] == len(block["raw"])
            assert done.is_valid == complete

    @precondition(lambda self: self.started and not self.stopped)
    @rule(reason=st.sampled_from(["end_turn", "tool_use", "max_tokens"]), tokens=st.integers(0, 99))
    def message_delta(self, reason: str, tokens: int) -> None:
        event = {
            "type": "message_delta",
            "delta": {"stop_reason": reason},
            "usage": {"output_tokens": tokens},
        }
        assert self.feed(event) == ()
        self.stop_reason, self.output_tokens = reason, tokens

    @precondition(lambda self: self.started and not self.stopped and not self.open_blocks())
    @rule()
    def message_stop(self) -> None:
        (final,) = self.feed({"type": "message_stop"})
        self.stopped = True
        assert final.to_api() == self.expected_message()

    @rule()
    def ping(self) -> None:
        assert self.feed({"type": "ping"}) == ()
        self.pings += 1

    @rule(name=st.sampled_from(["future_event", "message_annotation"]))
    def unknown_event(self, name: str) -> None:
        assert self.feed({"type": name}) == ()
        self.ignored += 1

    # -- violations: raise, and leave the state as it was -----------------------------

    @rule(data=st.data())
    def violation(self, data: st.DataObject) -> None:
        candidates: list[dict[str, Any]] = [
            {
                "type": "content_block_delta",
                "index": len(self.blocks),
                "delta": {"type": "text_delta", "text": "x"},
            },
            {"type": "content_block_stop", "index": len(self.blocks) + 1},
            {
                "type": "content_block_start",
                "index": len(self.blocks) + 1,
                "content_block": {"type": "text", "text": ""},
            },
        ]
        if self.started:
            candidates.append({"type": "message_start", "message": {"id": "x", "model": "m"}})
        stopped = [i for i, b in enumerate(self.blocks) if b["stopped"]]
        if stopped:
            candidates.append(
                {"type": "content_block_stop", "index": data.draw(st.sampled_from(stopped))}
            )
        if self.open_blocks("tool_use"):
            index = data.draw(st.sampled_from(self.open_blocks("tool_use")))
            candidates.append(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "text_delta", "text": "x"},
                }
            )
        if self.open_blocks() and not self.stopped:
            candidates.append({"type": "message_stop"})
        event = data.draw(st.sampled_from(candidates))
        before = self.acc.message.to_api() if self.started else None
        with pytest.raises(StreamProtocolError):
            self.feed(event)
        if self.started:
            assert self.acc.message.to_api() == before

    # -- the model's view ------------------------------------------------------------

    def expected_block(self, index: int) -> dict[str, Any]:
        block = self.blocks[index]
        if block["kind"] == "text":
            return {"type": "text", "text": "".join(block["parts"])}
        if block["kind"] == "thinking":
            return {
                "type": "thinking",
                "thinking": "".join(block["parts"]),
                "signature": block["signature"],
            }
        complete = block["input"] is None or block["sent"] == len(block["raw"])
        value = (block["input"] or {}) if block["stopped"] and complete else {}
        return {"type": "tool_use", "id": f"toolu_{index}", "name": "tool", "input": value}

    def expected_message(self) -> dict[str, Any]:
        return {
            "id": "msg",
            "type": "message",
            "role": "assistant",
            "model": "m",
            "content": [self.expected_block(i) for i in range(len(self.blocks))],
            "stop_reason": self.stop_reason,
            "stop_sequence": None,
            "usage": {"input_tokens": 3, "output_tokens": self.output_tokens},
        }

    @invariant()
    def snapshot_matches_model(self) -> None:
        if self.started:
            assert self.acc.message.to_api() == self.expected_message()
        stats = self.acc.statistics()
        assert (stats.pings, stats.ignored) == (self.pings, self.ignored)
        assert stats.events == self.events


AccumulatorMachine.TestCase.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None
)
TestAccumulatorMachine = AccumulatorMachine.TestCase
