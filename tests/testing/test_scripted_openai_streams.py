"""The scripted OpenAI streams: byte-exact rendering, timing and faults."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import TextBlock, ToolUseBlock
from trio_agent.testing import (
    Faults,
    ScriptedAnswer,
    ScriptedModel,
    Timing,
    openai_events,
    plan_openai_stream,
    render_openai_sse,
    strategies,
)

ANSWER = ScriptedAnswer(
    blocks=[TextBlock("héllo wörld"), ToolUseBlock("call_1", "Read", {"path": "a"})],
    timing=Timing(first_event_delay=0.5, block_delay=0.25, token_delay=0.1),
)


def _data_lines(body: bytes) -> list[str]:
    return [
        line[len("data: ") :] for line in body.decode().split("\n") if line.startswith("data: ")
    ]


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_render_is_the_events_as_sse(api: Any) -> None:
    events = openai_events(ANSWER, api)
    data = _data_lines(render_openai_sse(ANSWER, api))
    assert len(data) == len(events)
    for line, event in zip(data, events, strict=True):
        assert line == event if isinstance(event, str) else json.loads(line) == event
    if api == "chat":
        assert events[-1] == "[DONE]"
        assert events[-2]["usage"]["prompt_tokens"] == 10
    else:
        assert [e["sequence_number"] for e in events] == list(range(len(events)))  # type: ignore[index]
        assert events[-1]["type"] == "response.completed"  # type: ignore[index]


@settings(max_examples=40, deadline=None)
@given(api=st.sampled_from(["responses", "chat"]), framing=strategies.framings())
def test_framing_changes_chunks_never_bytes(api: Any, framing: Faults) -> None:
    plain = render_openai_sse(ANSWER, api)
    framed = ScriptedAnswer(blocks=ANSWER.blocks, timing=ANSWER.timing, faults=framing)
    body = render_openai_sse(framed, api)
    if framing.bom:
        assert body.startswith(b"\xef\xbb\xbf")
        body = body[3:]
    assert body.replace(b"\r\n", b"\n").replace(b"\r", b"\n") == plain
    plan = plan_openai_stream(framed, api)
    for position in framing.split_at:
        if 0 < position < len(plan.data):
            offsets = [0]
            for _, chunk in plan.chunks:
                offsets.append(offsets[-1] + len(chunk))
            assert position in offsets


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_timing_is_on_the_schedule(api: Any) -> None:
    schedule = plan_openai_stream(ANSWER, api).schedule()
    assert schedule[0][0] == pytest.approx(0.5)  # first_event_delay
    # 3 text deltas of 4 chars + tool JSON ({"path":"a"}: 2 deltas of 8) at 0.1 each,
    # plus block delays; the stream ends after all of them.
    assert schedule[-1][0] == pytest.approx(
        0.5 + 2 * 0.25 + 0.1 * (3 + 2) - (0.1 if api == "chat" else 0)
    )


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_faults_truncate_and_error_event(api: Any) -> None:
    truncated = render_openai_sse(
        ScriptedAnswer(blocks=ANSWER.blocks, faults=Faults(truncate=True)), api
    )
    assert (
        truncated == render_openai_sse(ScriptedAnswer(blocks=ANSWER.blocks), api)[: len(truncated)]
    )
    assert b"response.completed" not in truncated
    assert b"[DONE]" not in truncated
    errored = render_openai_sse(
        ScriptedAnswer(blocks=ANSWER.blocks, faults=Faults(error_event_after=1)), api
    )
    last = json.loads(_data_lines(errored)[-1])
    assert len(_data_lines(errored)) == 3
    if api == "responses":
        assert last["type"] == "error"
        assert last["code"] == "server_is_overloaded"
    else:
        assert last["error"]["code"] == "server_is_overloaded"


def test_pings_are_comments() -> None:
    answer = ScriptedAnswer(blocks=[TextBlock("hi")], timing=Timing(ping_every=2))
    body = render_openai_sse(answer, "chat")
    assert b": ping\n\n" in body
    assert _data_lines(body) == [
        e if isinstance(e, str) else json.dumps(e, separators=(",", ":"))
        for e in openai_events(answer, "chat")
    ]


def test_blocks_without_an_openai_form_are_refused() -> None:
    from trio_agent import OpaqueBlock, ThinkingBlock

    with pytest.raises(ValueError, match="thinking"):
        render_openai_sse(ScriptedAnswer(blocks=[ThinkingBlock("x", "s")]), "responses")
    with pytest.raises(ValueError, match="reasoning"):
        render_openai_sse(
            ScriptedAnswer(blocks=[OpaqueBlock({"type": "reasoning", "id": "r"})]), "chat"
        )
    with pytest.raises(ValueError, match="protocol"):
        ScriptedModel(protocol="grpc")  # type: ignore[arg-type]


async def test_the_transport_serves_the_planned_bytes(autojump_clock: Any) -> None:
    model = ScriptedModel([ANSWER], protocol="openai-chat")
    async with httpx.AsyncClient(transport=model.transport()) as http:
        start = trio.current_time()
        response = await http.post("http://scripted/v1/chat/completions", json={"stream": True})
        assert response.headers["x-request-id"] == "req_scripted_1"
        assert response.content == render_openai_sse(ANSWER, "chat")
        assert trio.current_time() - start == pytest.approx(
            plan_openai_stream(ANSWER, "chat").schedule()[-1][0]
        )
    assert model.requests[0].path == "/v1/chat/completions"
