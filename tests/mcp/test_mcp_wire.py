"""The stdio lines before the SDK sees them (trio_agent.mcp._wire): framing of any
byte stream, and any bytes in an answer, checked against a simple model."""

from __future__ import annotations

from typing import Any

import mcp
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp.shared.message import SessionMessage

from trio_agent.mcp._wire import LineFramer, Oversized, Reader

LIMIT = 20
lines = st.lists(st.binary(max_size=3 * LIMIT).filter(lambda b: b"\n" not in b), max_size=8)


@settings(max_examples=300)
@given(lines=lines, cuts=st.lists(st.integers(0, 400), max_size=10))
def test_any_stream_in_any_chunks_gives_its_lines_or_their_sizes(
    lines: list[bytes], cuts: list[int]
) -> None:
    stream = b"".join(line + b"\n" for line in lines)
    framer = LineFramer(limit=LIMIT)
    out: list[bytes | Oversized] = []
    start = 0
    for cut in [*sorted(c for c in cuts if c <= len(stream)), len(stream)]:
        out.extend(framer.feed(stream[start:cut]))
        start = max(start, cut)
    expected = [
        line if len(line) <= LIMIT else Oversized(len(line), line[:4096], line[-4096:])
        for line in lines
    ]
    assert out == expected


def test_an_oversized_line_keeps_only_its_ends() -> None:
    framer = LineFramer(limit=10)
    out = [line for _ in range(1000) for line in framer.feed(b"y" * 10_000)]
    out += list(framer.feed(b"\n"))
    assert out == [Oversized(10_000_000, b"y" * 4096, b"y" * 4096)]


def reader() -> Reader:
    r = Reader("s")
    r.sent(mcp.types.JSONRPCRequest(jsonrpc="2.0", id=7, method="tools/call", params={}))
    return r


def answer_of(message: SessionMessage | Exception | None) -> dict[str, Any]:
    assert isinstance(message, SessionMessage)
    response = message.message
    assert isinstance(response, mcp.types.JSONRPCResponse)
    assert response.id == 7
    return response.result


HEAD = b'{"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": "'
TAIL = b'"}]}}'


@settings(max_examples=500)
@given(payload=st.binary(max_size=40).filter(lambda b: not set(b) & set(b'"\\\n')))
def test_any_bytes_in_an_answer_answer_its_call(payload: bytes) -> None:
    result = answer_of(reader().read(HEAD + payload + TAIL))
    try:
        text = payload.decode()
    except UnicodeDecodeError:
        assert result["isError"] is True
        assert "not valid UTF-8" in result["content"][0]["text"]
        return
    if any(ord(c) < 0x20 for c in text):  # a raw control character: not JSON
        assert "not JSON" in result["content"][0]["text"]
    else:
        assert result["content"] == [{"type": "text", "text": text}]


def test_an_oversized_answer_is_found_by_its_id_at_either_end() -> None:
    for line in (
        Oversized(10**9, HEAD, TAIL),
        Oversized(
            10**9,
            b'{"result": {"content": [{"type": "text", "text": "xx',
            b'x"}]}, "jsonrpc": "2.0", "id": 7}',
        ),
    ):
        result = answer_of(reader().read(line))
        assert result["isError"] is True
        assert "1,000,000,000 bytes" in result["content"][0]["text"]


def test_garbage_that_names_no_call_is_dropped() -> None:
    r = reader()
    for line in (b"\xff", b"[1, 2]", b"{nope", b'{"jsonrpc": "2.0", "id": 99, "result": 5}', b"  "):
        assert not isinstance(r.read(line), SessionMessage)
    assert r.in_flight == {7: "tools/call"}
