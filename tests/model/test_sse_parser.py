"""SSEParser interprets SSE lines itself (for speed): checked against httpx-sse's own
event decoder on arbitrary field mixes, line endings, BOMs and chunk splits."""

from __future__ import annotations

import pytest
from httpx_sse._decoders import SSEDecoder, SSELineDecoder
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import StreamLimitError
from trio_agent._model._sse import SSEParser


def reference(data: bytes) -> list[str]:
    """httpx-sse's decoders on the whole input at once; events with empty data dropped."""
    text = data.decode("utf-8-sig", errors="replace")
    lines = SSELineDecoder()
    events = SSEDecoder()
    out: list[str] = []
    for line in [*lines.decode(text), *lines.flush()] if text else []:
        event = events.decode(line)
        if event is not None and event.data:
            out.append(event.data)
    return out


def parse(chunks: list[bytes]) -> list[str]:
    parser = SSEParser(1 << 20)
    out: list[str] = []
    for chunk in chunks:
        out.extend(parser.feed(chunk))
    out.extend(parser.flush())
    return out


values = st.text(alphabet=st.sampled_from(list('ab :é\u2028{}"')), max_size=5)
lines = st.one_of(
    st.builds(lambda v: f"data:{v}", values),
    st.builds(lambda v: f"data: {v}", values),
    st.builds(lambda v: f"data:  {v}", values),
    st.just("data"),
    st.just("data "),
    st.builds(lambda v: f"data :{v}", values),
    st.builds(lambda v: f"Data:{v}", values),
    st.builds(lambda v: f"event: {v}", values),
    st.builds(lambda v: f"id: {v}", values),
    st.builds(lambda v: f"retry: {v}", st.sampled_from(["10", "x", ""])),
    st.builds(lambda v: f":{v}", values),
    st.builds(lambda v: f"unknown:{v}", values),
    st.just(""),
    st.just(""),
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(lines, st.sampled_from(["\n", "\r", "\r\n"])), max_size=25),
    st.booleans(),
    st.lists(st.integers(0, 400), max_size=12),
)
def test_same_events_as_httpx_sse(body: list[tuple[str, str]], bom: bool, cuts: list[int]) -> None:
    data = ("\ufeff" if bom else "") + "".join(line + end for line, end in body)
    raw = data.encode()
    points = sorted({min(c, len(raw)) for c in cuts})
    chunks = [raw[a:b] for a, b in zip([0, *points], [*points, len(raw)], strict=True)]
    assert parse(chunks) == reference(raw)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(lines, st.sampled_from(["\n", "\n", "\r", "\r\n"])), max_size=25),
    st.booleans(),
    st.lists(st.sampled_from([b"", b"\xff", b"\xe2\x82", b"\xc3"]), max_size=25),
    st.lists(st.booleans(), max_size=60),
)
def test_chunks_of_whole_lines_as_httpx_sse(
    body: list[tuple[str, str]], bom: bool, junk: list[bytes], cut: list[bool]
) -> None:
    """Chunks that end after an LF (the way streams arrive: the fast path of feed),
    with invalid UTF-8, CRs and a BOM mixed in, give httpx-sse's events."""
    pieces = [
        (line.encode() + bad + end.encode())
        for (line, end), bad in zip(body, junk + [b""] * 25, strict=False)
    ]
    raw = ("\ufeff".encode() if bom else b"") + b"".join(pieces)
    chunks: list[bytes] = []
    current = "\ufeff".encode() if bom else b""
    for piece, split in zip(pieces, cut + [True] * len(pieces), strict=False):
        current += piece
        if split and current.endswith(b"\n"):
            chunks.append(current)
            current = b""
    chunks.append(current)
    parser = SSEParser(1 << 20)
    got: list[str] = []
    fast = 0
    for chunk in chunks:
        fast += parser._clean and chunk.endswith(b"\n") and b"\r" not in chunk  # pyright: ignore[reportPrivateUsage]
        got.extend(parser.feed(chunk))
    got.extend(parser.flush())
    assert got == reference(raw)
    if sum(1 for c in chunks if c.endswith(b"\n") and b"\r" not in c and len(c) >= 3) >= 2:
        assert fast >= 1  # the fast path ran


def test_the_fast_path_runs_on_a_stream_of_whole_events() -> None:
    parser = SSEParser(1 << 20)
    events = [f'event: x\ndata: {{"n": {i}}}\n\n'.encode() for i in range(5)]
    assert parser.feed(events[0]) == ['{"n": 0}']
    assert parser._clean  # pyright: ignore[reportPrivateUsage]
    assert [parser.feed(e) for e in events[1:]] == [[f'{{"n": {i}}}'] for i in range(1, 5)]
    assert parser.feed(b"data: \xff\n\n") == ["\ufffd"]


def test_fields_comments_and_dispatch() -> None:
    body = (
        b": comment\n"
        b'event: content_block_delta\nid: 3\nretry: 10\ndata: {"a":\ndata:1}\n\n'
        b"data\n\n"  # a field without a colon: empty data, not dispatched
        b"data:  two spaces\r\n\r\n"
        b"data: unterminated"  # no blank line at the end: not dispatched
    )
    assert parse([body]) == ['{"a":\n1}', " two spaces"]


def test_bom_only_at_the_start_and_split_utf8() -> None:
    raw = "\ufeffdata: é\n\n\ufeffdata: x\n\n".encode()
    # A BOM later on is not a BOM: the second field is named "\ufeffdata", not data.
    assert parse([raw[i : i + 1] for i in range(len(raw))]) == ["é"]
    assert reference(raw) == ["é"]


def test_a_blank_line_resets_the_boundary_count() -> None:
    parser = SSEParser(10)  # plus 128 KiB of slack
    for _ in range(100):
        parser.feed(b": " + b"x" * 4000 + b"\n\n")  # far more than the limit in total
    with pytest.raises(StreamLimitError, match="without an event boundary"):
        parser.feed(b"data: " + b"x" * 200_000)
