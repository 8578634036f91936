"""Every fault of a scripted answer is observable, in process and in virtual time."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import trio

from trio_agent import TextBlock, ToolUseBlock
from trio_agent.testing import (
    Faults,
    ScriptedAnswer,
    ScriptedModel,
    Timing,
    plan_stream,
    render_sse,
)

URL = "https://api.anthropic.test/v1/messages"
BLOCKS = [TextBlock("Grüße"), ToolUseBlock("toolu_1", "Read", {"path": "a"})]


def _answer(**faults: Any) -> ScriptedAnswer:
    return ScriptedAnswer(blocks=BLOCKS, faults=Faults(**faults))


async def _receive(
    answer: ScriptedAnswer,
) -> tuple[list[tuple[float, bytes]], BaseException | None]:
    model = ScriptedModel([answer])
    received: list[tuple[float, bytes]] = []
    error: BaseException | None = None
    async with (
        httpx.AsyncClient(transport=model.transport()) as client,
        client.stream("POST", URL, json={}) as response,
    ):
        try:
            async for chunk in response.aiter_raw():
                received.append((trio.current_time(), chunk))
        except httpx.ReadError as exc:
            error = exc
    assert model.open_streams == 0
    return received, error


def _names(reference: Any, data: bytes) -> list[str]:
    return [name for name, _ in reference.decode_sse(data)]


async def test_stall_delays_exactly_one_event(autojump_clock: Any) -> None:
    answer = _answer(stall_before_event=3, stall_seconds=10.0)
    received, _ = await _receive(answer)
    assert [t for t, _ in received] == [0.0] * 3 + [10.0] * (len(answer.events()) - 3)


async def test_stall_with_pings_sends_only_pings(autojump_clock: Any, reference: Any) -> None:
    answer = _answer(stall_before_event=2, stall_seconds=3.5, pings_only_for=1.0)
    received, _ = await _receive(answer)
    times = [t for t, _ in received]
    names = [_names(reference, chunk)[0] for _, chunk in received]
    assert names[:6] == [
        "message_start",
        "content_block_start",
        "ping",
        "ping",
        "ping",
        "content_block_delta",
    ]
    assert times[:6] == [0.0, 0.0, 1.0, 2.0, 3.0, 3.5]
    # The pings are extra: the events after them are all still there.
    assert [n for n in names if n != "ping"] == [e["type"] for e in answer.events()]


async def test_stall_before_the_end_of_the_stream(autojump_clock: Any) -> None:
    answer = ScriptedAnswer(
        blocks=[TextBlock("a")], faults=Faults(stall_before_event=99, stall_seconds=5.0)
    )
    received, _ = await _receive(answer)
    assert trio.current_time() == 5.0
    assert b"".join(c for _, c in received) == render_sse(ScriptedAnswer(blocks=[TextBlock("a")]))


@pytest.mark.parametrize("after", [0, 1, 57, 10_000])
async def test_disconnect_after_byte(autojump_clock: Any, after: int) -> None:
    answer = _answer(disconnect_after_byte=after)
    full = render_sse(ScriptedAnswer(blocks=BLOCKS))
    received, error = await _receive(answer)
    assert b"".join(c for _, c in received) == full[:after]
    assert isinstance(error, httpx.ReadError)
    assert f"after byte {min(after, len(full))}" in str(error)


async def test_truncate_leaves_out_message_stop(autojump_clock: Any, reference: Any) -> None:
    received, error = await _receive(_answer(truncate=True))
    names = _names(reference, b"".join(c for _, c in received))
    assert error is None
    assert names[-1] == "message_delta"
    assert "message_stop" not in names


async def test_error_event_after_event_k(autojump_clock: Any, reference: Any) -> None:
    answer = _answer(error_event_after=2, error_type="overloaded_error")
    received, _ = await _receive(answer)
    decoded = reference.decode_sse(b"".join(c for _, c in received))
    assert [d for _, d in decoded[:3]] == answer.events()[:3]
    assert decoded[3:] == [
        ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    ]
    other = reference.decode_sse(render_sse(_answer(error_event_after=0, error_type="api_error")))
    assert other[-1][1]["error"] == {"type": "api_error", "message": "Internal server error"}


async def test_split_at_cuts_inside_utf8_and_between_cr_and_lf(autojump_clock: Any) -> None:
    clean = render_sse(ScriptedAnswer(blocks=BLOCKS, faults=Faults(line_ending="\r\n")))
    inside_utf8 = clean.index("ü".encode()) + 1
    between_cr_lf = clean.index(b"\r\n") + 1
    received, _ = await _receive(_answer(line_ending="\r\n", split_at=(between_cr_lf, inside_utf8)))
    chunks = [c for _, c in received]
    assert b"".join(chunks) == clean
    assert [len(c) for c in chunks] == [
        between_cr_lf,
        inside_utf8 - between_cr_lf,
        len(clean) - inside_utf8,
    ]
    assert chunks[0].endswith(b"\r")
    assert chunks[1].startswith(b"\n")
    assert chunks[1].endswith(b"\xc3")
    assert chunks[2].startswith(b"\xbc")


async def test_fixed_chunk_size(autojump_clock: Any) -> None:
    received, _ = await _receive(_answer(chunk_size=7))
    chunks = [c for _, c in received]
    assert {len(c) for c in chunks[:-1]} == {7}
    assert 1 <= len(chunks[-1]) <= 7
    assert b"".join(chunks) == render_sse(ScriptedAnswer(blocks=BLOCKS))


async def test_chunks_never_carry_bytes_before_their_time(
    autojump_clock: Any, reference: Any
) -> None:
    # One big chunk size, but a token delay: bytes after a delay come in a later chunk.
    answer = ScriptedAnswer(
        blocks=[TextBlock("abcdefgh")],
        timing=Timing(token_delay=1.0),
        faults=Faults(chunk_size=4096),
    )
    received, _ = await _receive(answer)
    assert [t for t, _ in received] == [0.0, 1.0, 2.0]
    assert _names(reference, received[0][1]) == ["message_start", "content_block_start"]
    assert _names(reference, received[2][1])[0] == "content_block_delta"


@pytest.mark.parametrize("ending", ["\n", "\r\n", "\r"])
async def test_line_endings_and_bom(autojump_clock: Any, ending: str, reference: Any) -> None:
    answer = _answer(line_ending=ending, bom=True)
    received, _ = await _receive(answer)
    data = b"".join(c for _, c in received)
    assert data.startswith(b"\xef\xbb\xbfevent: message_start" + ending.encode())
    assert data.endswith(b'"message_stop"}' + (ending * 2).encode())
    assert [d for _, d in reference.decode_sse(data)] == answer.events()


def test_bad_faults_and_timings_are_rejected() -> None:
    with pytest.raises(ValueError, match="line_ending"):
        Faults(line_ending="\n\r")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="chunk_size"):
        Faults(chunk_size=0)
    with pytest.raises(ValueError, match="stall_seconds"):
        Faults(stall_seconds=-1)
    with pytest.raises(ValueError, match="pings_only_for"):
        Faults(pings_only_for=0)
    with pytest.raises(ValueError, match="split_at"):
        Faults(split_at=(-1,))
    with pytest.raises(ValueError, match="stall_before_event"):
        Faults(stall_before_event=-2)
    with pytest.raises(ValueError, match="token_delay"):
        Timing(token_delay=-0.1)
    with pytest.raises(ValueError, match="json_chunk_size"):
        Timing(json_chunk_size=0)
    assert Faults(split_at=[5, 3, 5]).split_at == (3, 5)


def test_plan_of_an_empty_disconnect() -> None:
    plan = plan_stream(_answer(disconnect_after_byte=0))
    assert plan.chunks == ()
    assert plan.disconnect
