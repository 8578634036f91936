"""Fault matrix rows 5, 6, 8, 9, 10: what the bytes of a 200 stream can do to the client.

Each case runs the real AnthropicClient over an in-process transport in virtual time,
under a leak check (no task, no open response body left behind).
"""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import (
    StreamLimitError,
    StreamLimits,
    StreamProtocolError,
    StreamTruncatedError,
    TextBlock,
    ToolUseBlock,
    Usage,
)
from trio_agent._model._sse import SSEParser
from trio_agent.lowlevel import MessageAccumulator, StreamEvent, StreamResult
from trio_agent.testing import (
    LeakCheck,
    RawAnswer,
    ScriptedAnswer,
    ScriptedModel,
    render_events,
    run_virtual,
    strategies,
)

# The faults below need bytes no well-formed answer has: ScriptedModel serves them as
# RawAnswer chunks.


def message_start() -> dict[str, Any]:
    """A message_start as the scripted model renders it (message "m" of model "x")."""
    return ScriptedAnswer(blocks=[], message_id="m", model="x", usage=Usage(1, 1)).events()[0]


def sse_events(items: Iterable[Any]) -> list[Mapping[str, Any]]:
    return [i.data for i in items if isinstance(i, StreamEvent)]


TRICKY = 'héllo \u2028 wörld \u2029 \u0085 ✓ 𝄞 \r\n " \\ end'


def answer() -> ScriptedAnswer:
    return ScriptedAnswer(
        blocks=[
            TextBlock(TRICKY),
            ToolUseBlock("toolu_1", "Read", {"path": TRICKY, "n": [1, 2.5, None]}),
        ]
    )


CLEAN_EVENTS = answer().events()


def clean_bytes() -> bytes:
    return render_events(CLEAN_EVENTS)


def with_endings(data: bytes, endings: list[str]) -> bytes:
    """Replace each LF of an LF-rendered stream with the next of *endings* (cycled)."""
    lines = data.split(b"\n")
    out = bytearray()
    previous = ""
    for i, line in enumerate(lines[:-1]):
        ending = endings[i % len(endings)]
        if previous == "\r" and not line and ending == "\n":
            ending = "\r"  # CR then LF would be one CRLF line break, by the spec
        out += line + ending.encode()
        previous = ending
    out += lines[-1]
    return bytes(out)


@pytest.fixture(scope="module")
def stream_bytes(collect: Any) -> Callable[..., Awaitable[list[Any]]]:
    """``items = await stream_bytes(chunks, **client_kw)``: ``collect`` from a scripted
    model serving exactly *chunks* (a RawAnswer), under a leak check."""

    async def stream_bytes(chunks: list[bytes], **client_kw: Any) -> list[Any]:
        model = ScriptedModel([RawAnswer(chunks=[(0.0, c) for c in chunks])])
        check = LeakCheck(models=[model], processes=False, fds=False)
        with check:
            items = await collect(model.client(**client_kw))
        return items

    return stream_bytes


def expect_clean(items: list[Any]) -> None:
    assert sse_events(items) == CLEAN_EVENTS
    assert isinstance(items[-1], StreamResult)
    assert items[-1].message == answer().message


# -- row 5: byte splits, endings, BOM, line separators in JSON strings ----------------


async def test_every_single_split_position(autojump_clock: Any, stream_bytes: Any) -> None:
    """Cut the stream in two at every byte (inside the BOM and UTF-8, between CR and LF)."""
    data = b"\xef\xbb\xbf" + with_endings(clean_bytes(), ["\r\n"])
    for cut in range(len(data) + 1):
        expect_clean(await stream_bytes([data[:cut], data[cut:]]))


@settings(max_examples=150, deadline=None)
@given(
    endings=st.lists(st.sampled_from(["\n", "\r", "\r\n"]), min_size=1, max_size=8),
    cuts=st.lists(st.integers(0, 4000), max_size=40),
    bom=st.booleans(),
)
def test_mixed_endings_and_any_splits_give_the_clean_events(
    endings: list[str], cuts: list[int], bom: bool, stream_bytes: Any
) -> None:
    data = (b"\xef\xbb\xbf" if bom else b"") + with_endings(clean_bytes(), endings)
    points = sorted({min(c, len(data)) for c in cuts})
    chunks = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    expect_clean(run_virtual(lambda: stream_bytes(chunks)))


@settings(max_examples=60, deadline=None)
@given(text=strategies.texts(min_size=1, max_size=40))
def test_line_separators_inside_json_strings_are_not_line_breaks(
    text: str, stream_bytes: Any
) -> None:
    a = ScriptedAnswer(blocks=[TextBlock(text), ToolUseBlock("t", "Read", {"p": text})])
    raw = render_events(a.events())
    assert "\u2028".encode() in raw or "\u2028" not in text  # sent raw, not escaped
    items = run_virtual(lambda: stream_bytes([raw[i : i + 7] for i in range(0, len(raw), 7)]))
    assert items[-1].message == a.message


# -- row 6: comments, unknown fields / events / deltas / blocks / stop reasons, pings -


async def test_comments_unknown_things_and_10k_pings(
    autojump_clock: Any, stream_bytes: Any
) -> None:
    events = [dict(e) for e in CLEAN_EVENTS]
    events[0] = {
        **events[0],
        "unknown_top": 1,
        "message": {**events[0]["message"], "future_field": {"x": 1}},
    }
    events[1] = {**events[1], "unknown_in_event": [1, 2]}
    events[-2] = {**events[-2], "delta": {**events[-2]["delta"], "stop_reason": "brand_new_reason"}}
    extra = [
        {"type": "brand_new_event", "index": 99},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "brand_new_delta"}},
    ]
    body = bytearray(b": a comment line\n\nretry: 100\nid: 7\n\n")
    body += render_events(events[:2])
    body += render_events(extra)
    body += b": keepalive\n" + b'event: ping\ndata: {"type": "ping"}\n\n' * 10_000
    body += render_events(events[2:])
    items = await stream_bytes([bytes(body)])
    result = items[-1]
    assert isinstance(result, StreamResult)
    assert result.message.stop_reason == "brand_new_reason"
    assert result.message.content == answer().message.content
    assert result.message.extra["future_field"] == {"x": 1}
    assert result.statistics.pings == 10_000
    assert result.statistics.ignored == 2


async def test_unknown_block_type_is_kept_opaque(autojump_clock: Any, stream_bytes: Any) -> None:
    events = [dict(e) for e in CLEAN_EVENTS]
    stop = events.index(next(e for e in events if e["type"] == "message_delta"))
    n = sum(e["type"] == "content_block_start" for e in events)
    events[stop:stop] = [
        {"type": "content_block_start", "index": n, "content_block": {"type": "hologram", "z": 3}},
        {"type": "content_block_delta", "index": n, "delta": {"type": "hologram_delta", "z": 4}},
        {"type": "content_block_stop", "index": n},
    ]
    items = await stream_bytes([render_events(events)])
    block = items[-1].message.content[-1]
    assert block.to_api() == {"type": "hologram", "z": 3}


# -- row 8: disconnect mid-event, no message_stop, idle, stall, drip -------------------


@settings(max_examples=80, deadline=None)
@given(cut=st.integers(0, 10_000))
def test_disconnect_at_any_byte_is_truncated_and_keeps_what_arrived(cut: int) -> None:
    data = clean_bytes()
    cut = min(cut, len(data) - 1)

    async def main() -> tuple[list[Any], BaseException | None]:
        model = ScriptedModel([RawAnswer(chunks=[(0.0, data[:cut])], disconnect=True)])
        items: list[Any] = []
        error: BaseException | None = None
        with LeakCheck(models=[model], processes=False, fds=False):
            try:
                async with model.client().stream(
                    model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}]
                ) as channel:
                    async for item in channel:
                        items.append(item)
            except StreamTruncatedError as exc:
                error = exc
        return items, error

    items, error = run_virtual(main)
    assert isinstance(error, StreamTruncatedError)
    got = sse_events(items)
    assert got == CLEAN_EVENTS[: len(got)]  # a prefix, nothing invented


async def test_drip_one_byte_per_second(autojump_clock: Any, collect: Any) -> None:
    data = clean_bytes()[:400] + b""
    rest = clean_bytes()[400:]
    model = ScriptedModel([RawAnswer(chunks=_drip(data, rest))])
    with LeakCheck(models=[model], processes=False, fds=False):
        start = trio.current_time()
        items = await collect(model.client(idle_timeout=5, stall_timeout=30))
    assert trio.current_time() - start == pytest.approx(len(data), abs=1)
    result = items[-1]
    assert result.message == answer().message
    assert result.statistics.stalls >= 1  # a whole event took > 30 s to arrive


def _drip(slow: bytes, fast: bytes) -> list[tuple[float, bytes]]:
    return [(1.0, slow[i : i + 1]) for i in range(len(slow))] + [(0.0, fast)]


async def test_idle_and_no_message_stop(autojump_clock: Any, collect: Any) -> None:
    from trio_agent import StreamIdleTimeoutError

    data = clean_bytes()
    model = ScriptedModel(
        [
            RawAnswer(chunks=[(0.0, data[:300]), (100.0, data[300:])]),
            RawAnswer(chunks=[(0.0, data[:300])]),
        ]
    )
    with LeakCheck(models=[model], processes=False, fds=False):
        with pytest.raises(StreamIdleTimeoutError):
            await collect(model.client(idle_timeout=10))
        with pytest.raises(StreamTruncatedError, match="before message_stop"):
            await collect(model.client())


# -- row 9: malformed and out-of-protocol events ----------------------------------


def _events_with(change: str) -> list[bytes]:
    events = [dict(e) for e in CLEAN_EVENTS]
    starts = [i for i, e in enumerate(events) if e["type"] == "content_block_start"]
    stops = [i for i, e in enumerate(events) if e["type"] == "content_block_stop"]
    if change == "duplicate index":
        events.insert(starts[1], dict(events[starts[0]]))
    elif change == "unknown index":
        events.insert(
            stops[0],
            {
                "type": "content_block_delta",
                "index": 7,
                "delta": {"type": "text_delta", "text": "x"},
            },
        )
    elif change == "out of order":
        events[starts[1]] = {**events[starts[1]], "index": 5}
    elif change == "delta after stop":
        events.insert(
            stops[0] + 1,
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "late"},
            },
        )
    elif change == "second message_start":
        events.insert(2, events[0])
    elif change == "never stops":
        del events[stops[1]]
    return [render_events(events)]


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ("duplicate index", "out of order"),
        ("unknown index", "unknown block index 7"),
        ("out of order", "out of order"),
        ("delta after stop", "already stopped"),
        ("second message_start", "second message_start"),
        ("never stops", "still open"),
    ],
)
async def test_protocol_violations_are_typed_and_close_the_stream(
    autojump_clock: Any, change: str, match: str, stream_bytes: Any
) -> None:
    with pytest.raises(StreamProtocolError, match=match):
        await stream_bytes(_events_with(change))


@pytest.mark.parametrize(
    "data",
    [b"{not json", b"[1, 2]", b'{"type": 5}', b'{"type": "ping", "x": NaN}', b"\xff\xfe"],
)
async def test_malformed_data_is_a_protocol_error(
    autojump_clock: Any, data: bytes, stream_bytes: Any
) -> None:
    with pytest.raises(StreamProtocolError):
        await stream_bytes([b"event: x\ndata: " + data + b"\n\n"])


@settings(max_examples=100, deadline=None)
@given(cut=st.integers(0, 200), junk=st.sampled_from(["", "}", "]]", "nul", ", "]))
def test_cut_or_invalid_partial_json_marks_the_block_invalid(cut: int, junk: str) -> None:
    full = json.dumps({"path": TRICKY, "n": [1, 2.5, None]}, ensure_ascii=False)
    raw = full[: min(cut, len(full))] + junk
    acc = MessageAccumulator()
    acc.feed(message_start())
    acc.feed(
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "t", "name": "Read", "input": {}},
        }
    )
    acc.feed(
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": raw},
        }
    )
    (block,) = acc.feed({"type": "content_block_stop", "index": 0})
    assert isinstance(block, ToolUseBlock)
    try:
        parsed = json.loads(raw, parse_constant=lambda c: 1 / 0) if raw.strip() else {}
    except (ValueError, ZeroDivisionError):
        parsed = None
    if isinstance(parsed, dict):
        assert block.is_valid
        assert block.input == parsed
    else:
        assert not block.is_valid
        assert block.invalid_input == raw


# -- row 10: size attacks ------------------------------------------------------------


def _acc_with_tool() -> MessageAccumulator:
    acc = MessageAccumulator(StreamLimits(max_tool_input_bytes=1 << 20))
    acc.feed(message_start())
    acc.feed(
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "t", "name": "Read", "input": {}},
        }
    )
    return acc


def _feed_json(acc: MessageAccumulator, raw: str) -> Any:
    for i in range(0, len(raw), 4096):
        acc.feed(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": raw[i : i + 4096]},
            }
        )
    return acc.feed({"type": "content_block_stop", "index": 0})


def test_deep_nesting_is_a_limit_error_not_a_recursion_error() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(StreamLimitError, match="nested too deeply"):
        MessageAccumulator().decode('{"type": "ping", "x": ' + deep + "}")
    with pytest.raises(StreamLimitError, match="nested too deeply"):
        _feed_json(_acc_with_tool(), '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}")


def test_huge_numbers_nan_and_duplicate_keys() -> None:
    with pytest.raises(StreamProtocolError, match="not JSON"):
        MessageAccumulator().decode('{"type": "ping", "n": ' + "9" * 5000 + "}")
    (block,) = _feed_json(_acc_with_tool(), '{"n": ' + "9" * 5000 + "}")
    assert not block.is_valid  # beyond Python's int-string limit: invalid, not a crash
    (block,) = _feed_json(_acc_with_tool(), '{"n": ' + "9" * 4000 + "}")
    assert block.input["n"] == int("9" * 4000)
    for constant in ("NaN", "Infinity", "-Infinity"):
        (block,) = _feed_json(_acc_with_tool(), '{"n": ' + constant + "}")
        assert not block.is_valid  # NaN is not JSON: never handed to a tool
    (block,) = _feed_json(_acc_with_tool(), '{"k": 1, "k": 2}')
    assert block.input == {"k": 2}  # as the API's own JSON parsers do: the last wins


def test_huge_partial_json_is_a_limit_error_before_it_is_kept() -> None:
    acc = _acc_with_tool()
    with pytest.raises(StreamLimitError, match="max_tool_input_bytes"):
        _feed_json(acc, '{"a": "' + "x" * (2 << 20) + '"}')


async def test_8_mib_line_is_a_limit_error_in_bounded_memory(
    autojump_clock: Any, stream_bytes: Any
) -> None:
    limit = 1 << 20
    chunk = b"x" * 65536
    tracemalloc.start()
    try:
        parser = SSEParser(limit)
        parser.feed(b"data: ")
        with pytest.raises(StreamLimitError, match="without an event boundary"):  # noqa: PT012
            for _ in range((8 << 20) // len(chunk)):
                parser.feed(chunk)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * limit  # it stopped long before 8 MiB were kept

    # Through the client (default limit 8 MiB): a typed error, the response closed.
    big = b"data: " + b"x" * (9 << 20)
    with pytest.raises(StreamLimitError):
        await stream_bytes([big[i : i + (1 << 20)] for i in range(0, len(big), 1 << 20)])


async def test_event_over_the_limit_is_typed(autojump_clock: Any, stream_bytes: Any) -> None:
    with pytest.raises(StreamLimitError, match="max_event_bytes"):
        await stream_bytes(
            [b'data: {"type": "ping", "pad": "' + b"y" * 5000 + b'"}\n\n'],
            limits=StreamLimits(max_event_bytes=1000),
        )


def test_events_with_empty_data_are_not_dispatched() -> None:
    """The SSE spec: a blank line after only id / retry / event fields, or an empty
    ``data:``, dispatches nothing (httpx-sse would hand out ``data == ""``)."""
    parser = SSEParser(1000)
    got = parser.feed(b"id: 1\n\nretry: 5\n\nevent: x\n\ndata:\n\ndata: {}\n\n")
    assert got == ["{}"]
