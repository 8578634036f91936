"""AnthropicClient against literal SSE events served by the library's ScriptedModel.

The events are written out here (an oracle independent of ``ScriptedAnswer``'s
rendering) and served as :class:`~trio_agent.testing.RawAnswer` bytes, so every byte,
delay and header is the test's own. Everything runs in Trio virtual time (the
autojump_clock fixture); the gaps between ``model.requests[i].time`` are the client's
retry delays, exact.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Iterable
from typing import Any

import httpx
import pytest
import trio

import trio_agent
from trio_agent import (
    AnthropicClient,
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AssistantMessage,
    AuthenticationError,
    ConflictError,
    InternalServerError,
    InvalidRequestError,
    NotFoundError,
    OverloadedError,
    PermissionDeniedError,
    PromptTooLongError,
    RateLimitError,
    RequestTooLargeError,
    RetryPolicy,
    StreamIdleTimeoutError,
    StreamLimitError,
    StreamLimits,
    StreamProtocolError,
    StreamTruncatedError,
    TextBlock,
    ToolUseBlock,
    UserMessage,
)
from trio_agent.lowlevel import StreamEvent, StreamResult
from trio_agent.testing import (
    DroppedConnection,
    HTTPErrorAnswer,
    RawAnswer,
    ScriptedModel,
    encode_event,
    error_event,
    render_events,
)

SENTINEL_KEY = "sk-ant-SENTINEL-0123456789"
EXACT = RetryPolicy(jitter=(1.0, 1.0))


MESSAGE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-x",
    "content": [],
    "stop_reason": None,
    "stop_sequence": None,
    "usage": {"input_tokens": 5, "output_tokens": 1},
}
HEAD = [
    {"type": "message_start", "message": MESSAGE},
    {"type": "ping"},
]
TEXT_BLOCK = [
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "!"}},
    {"type": "content_block_stop", "index": 0},
]
TOOL_BLOCK = [
    {
        "type": "content_block_start",
        "index": 1,
        "content_block": {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}},
    },
    {
        "type": "content_block_delta",
        "index": 1,
        "delta": {"type": "input_json_delta", "partial_json": '{"path": "a"}'},
    },
    {"type": "content_block_stop", "index": 1},
]
TAIL = [
    {
        "type": "message_delta",
        "delta": {"stop_reason": "tool_use", "stop_sequence": None},
        "usage": {"output_tokens": 9},
    },
    {"type": "message_stop"},
]
EVENTS = HEAD + TEXT_BLOCK + TOOL_BLOCK + TAIL


def overloaded_event() -> dict[str, Any]:
    return error_event("overloaded_error", "Overloaded")


def body(events: list[dict[str, Any]], delay: float = 0.0) -> list[tuple[float, bytes]]:
    """One chunk per event, each *delay* seconds after the previous one."""
    return [(delay, encode_event(e)) for e in events]


def ok(chunks: Iterable[tuple[float, bytes]], **headers: str) -> RawAnswer:
    """A 200 ``text/event-stream`` answer sending *chunks* as they are."""
    return RawAnswer(chunks=tuple(chunks), headers={"request-id": "req_ok", **headers})


def error(status: int, payload: Any = None, **headers: str) -> HTTPErrorAnswer:
    content = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return HTTPErrorAnswer(
        status=status, headers={"request-id": f"req_{status}", **headers}, body=content
    )


def api_error(status: int, etype: str, message: str, **headers: str) -> HTTPErrorAnswer:
    return error(status, {"type": "error", "error": {"type": etype, "message": message}}, **headers)


def client(model: ScriptedModel, **kwargs: Any) -> AnthropicClient:
    """The client under test: exact retries (no jitter), the sentinel key."""
    kwargs.setdefault("retry", EXACT)
    kwargs.setdefault("api_key", SENTINEL_KEY)
    return model.client(base_url="https://api.test", **kwargs)


def all_closed(model: ScriptedModel) -> bool:
    """Some response was served, and every body handed out was closed."""
    return len(model.requests) > 0 and model.open_streams == 0


# -- the happy path ------------------------------------------------------------------


async def test_stream_items_and_request(
    autojump_clock: trio.testing.MockClock, collect: Any
) -> None:
    model = ScriptedModel([ok(body(EVENTS, delay=0.25))])
    tool = trio_agent.Tool(
        "Read",
        "read",
        {"type": "object"},
        run=lambda i, c: None,  # pyright: ignore
    )
    items = await collect(
        client(model),
        max_tokens=100,
        messages=[UserMessage("hello")],
        system="be brief",
        tools=[tool],
        extra_body={"temperature": 0.5},
    )

    (request,) = model.requests
    assert (request.headers["host"], request.path) == ("api.test", "/v1/messages")
    assert request.method == "POST"
    assert request.headers["x-api-key"] == SENTINEL_KEY
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["accept"] == "text/event-stream"
    sent = json.loads(request.content)
    assert sent == {
        "model": "claude-x",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "hello"}],
        "system": "be brief",
        "tools": [tool.to_api()],
        "temperature": 0.5,
        "stream": True,
    }

    events = [i for i in items if isinstance(i, StreamEvent)]
    assert [e.data for e in events] == EVENTS
    assert [e.type for e in events] == [e["type"] for e in EVENTS]
    assert "".join(e.text_delta or "" for e in events) == "Hi!"
    blocks = [i for i in items if isinstance(i, AssistantMessage)]
    assert [b.content for b in blocks] == [
        (TextBlock("Hi!"),),
        (ToolUseBlock("toolu_1", "Read", {"path": "a"}),),
    ]
    # Each block message follows its content_block_stop event, as claude.ts does.
    stop_positions = [
        n
        for n, i in enumerate(items)
        if isinstance(i, StreamEvent) and i.type == "content_block_stop"
    ]
    assert [items.index(b) for b in blocks] == [p + 1 for p in stop_positions]
    result = items[-1]
    assert isinstance(result, StreamResult)
    assert result.message.stop_reason == "tool_use"
    assert result.message.usage.output_tokens == 9
    assert [b.to_api() for b in result.message.content] == [
        {"type": "text", "text": "Hi!"},
        {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "a"}},
    ]
    assert result.request_id == "req_ok"
    # message_start at 0.25, ping at 0.5, content_block_start at 0.75
    assert result.ttft == pytest.approx(0.75)
    assert result.statistics == trio_agent.lowlevel.StreamStatistics(events=len(EVENTS), pings=1)
    assert all_closed(model)


async def test_messages_as_dicts_and_assistant_messages(autojump_clock: Any, collect: Any) -> None:
    model = ScriptedModel([ok(body(EVENTS))])
    previous = AssistantMessage("m0", "claude-x", [TextBlock("before")])
    await collect(
        client(model),
        messages=[{"role": "user", "content": "a"}, previous, UserMessage("b")],
        tools=[{"name": "x", "input_schema": {"type": "object"}}],
    )
    sent = model.requests[0].body
    assert sent["messages"] == [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": [{"type": "text", "text": "before"}]},
        {"role": "user", "content": "b"},
    ]
    assert sent["tools"] == [{"name": "x", "input_schema": {"type": "object"}}]


async def test_bad_message_type_is_a_type_error(autojump_clock: Any, collect: Any) -> None:
    model = ScriptedModel([])
    with pytest.raises(TypeError, match="a message must be"):
        await collect(client(model), messages=[42])
    with pytest.raises(TypeError, match="a tool must be"):
        await collect(client(model), tools=[42])
    assert model.requests == []  # refused before anything was sent


async def test_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SENTINEL_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://localhost:9999/")
    client = AnthropicClient()
    assert client.base_url == "http://localhost:9999"
    assert client.has_api_key
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    monkeypatch.delenv("ANTHROPIC_BASE_URL")
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    client = AnthropicClient()
    assert client.base_url == "https://api.anthropic.com"
    assert not client.has_api_key
    assert repr(client) == "AnthropicClient(base_url='https://api.anthropic.com', api_key=None)"
    with pytest.raises(ValueError, match="positive"):
        AnthropicClient(idle_timeout=0)


async def test_bom_and_crlf(autojump_clock: Any, collect: Any) -> None:
    raw = render_events(EVENTS, line_ending="\r\n", bom=True)
    assert raw.startswith(b"\xef\xbb\xbfevent: message_start\r\n")
    # split inside the BOM and inside a CRLF
    chunks = [raw[:1], raw[1:2], raw[2:40], *(raw[i : i + 7] for i in range(40, len(raw), 7))]
    assert any(c.endswith(b"\r") for c in chunks)  # some CRLF is cut in two
    model = ScriptedModel([ok((0.0, c) for c in chunks)])
    items = await collect(client(model))
    assert [i.data for i in items if isinstance(i, StreamEvent)] == EVENTS


async def test_empty_message_is_handed_out_at_message_stop(
    autojump_clock: Any, collect: Any
) -> None:
    model = ScriptedModel([ok(body([HEAD[0], *TAIL]))])
    items = await collect(client(model))
    assert [type(i) for i in items] == [StreamEvent, StreamEvent, StreamEvent, StreamResult]
    assert items[-1].ttft is None
    assert items[-1].message.content == ()


# -- HTTP errors ---------------------------------------------------------------------

STATUS_CASES = [
    (400, "invalid_request_error", "max_tokens: too big", InvalidRequestError),
    (
        400,
        "invalid_request_error",
        "prompt is too long: 210000 tokens > 200000",
        PromptTooLongError,
    ),
    (401, "authentication_error", "invalid x-api-key", AuthenticationError),
    (403, "permission_error", "no access", PermissionDeniedError),
    (404, "not_found_error", "model: claude-nope", NotFoundError),
    (409, "conflict_error", "conflict", ConflictError),
    (413, "request_too_large", "too large", RequestTooLargeError),
    (422, "unprocessable", "unprocessable", APIStatusError),
    (429, "rate_limit_error", "slow down", RateLimitError),
    (500, "api_error", "internal", InternalServerError),
    (503, "api_error", "unavailable", InternalServerError),
    (529, "overloaded_error", "Overloaded", OverloadedError),
]


@pytest.mark.parametrize(("status", "etype", "message", "cls"), STATUS_CASES)
async def test_http_errors_are_typed(
    autojump_clock: Any,
    status: int,
    etype: str,
    message: str,
    cls: type[APIStatusError],
    collect: Any,
) -> None:
    model = ScriptedModel([api_error(status, etype, message)])
    with pytest.raises(cls) as info:
        await collect(client(model, retry=RetryPolicy.never()))
    exc = info.value
    assert type(exc) is cls
    assert exc.status_code == status
    assert exc.error_type == etype
    assert exc.request_id == f"req_{status}"
    assert message in str(exc)
    assert f"req_{status}" in str(exc)
    assert exc.body["error"]["message"] == message
    assert all_closed(model)


async def test_non_json_error_body(autojump_clock: Any, collect: Any) -> None:
    model = ScriptedModel(
        [error(502, b"<html>Bad Gateway</html>", **{"content-type": "text/html"})]
    )
    with pytest.raises(InternalServerError, match="Bad Gateway") as info:
        await collect(client(model, retry=RetryPolicy.never()))
    assert info.value.body == "<html>Bad Gateway</html>"
    assert info.value.error_type is None


async def test_request_id_from_body_when_no_header(autojump_clock: Any, collect: Any) -> None:
    payload = {
        "type": "error",
        "error": {"type": "api_error", "message": "x"},
        "request_id": "req_b",
    }
    model = ScriptedModel([HTTPErrorAnswer(status=400, body=payload, headers={"request-id": None})])
    with pytest.raises(APIStatusError) as info:
        await collect(client(model))
    assert info.value.request_id == "req_b"
    assert info.value.headers.get("request-id") is None  # really no header
    assert len(model.requests) == 1


async def test_a_200_that_is_not_sse_is_a_protocol_error(autojump_clock: Any, collect: Any) -> None:
    model = ScriptedModel(
        [HTTPErrorAnswer(status=200, body={"id": "msg"}, headers={"request-id": "req_j"})]
    )
    with pytest.raises(StreamProtocolError, match=r"text/event-stream.*application/json.*req_j"):
        await collect(client(model))
    assert all_closed(model)


# -- retries, exact in virtual time --------------------------------------------------


def delays(model: ScriptedModel) -> list[float]:
    """The gaps between the requests' arrivals, in virtual seconds."""
    times = [r.time for r in model.requests if r.time is not None]
    assert len(times) == len(model.requests)
    return [round(b - a, 6) for a, b in itertools.pairwise(times)]


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "3"}, 3.0),
        ({"retry-after-ms": "1500"}, 1.5),
        ({"retry-after-ms": "100", "retry-after": "7"}, 0.1),
        ({"retry-after": "garbage"}, 0.5),
        ({"retry-after": "61"}, 0.5),
        ({}, 0.5),
    ],
)
async def test_429_retry_after(
    autojump_clock: Any, headers: dict[str, str], expected: float, collect: Any
) -> None:
    model = ScriptedModel([api_error(429, "rate_limit_error", "slow", **headers), ok(body(EVENTS))])
    items = await collect(client(model))
    assert delays(model) == [expected]
    assert items[-1].statistics.retries == 1


async def test_retry_after_http_date(autojump_clock: Any, collect: Any) -> None:
    import email.utils

    now = 1_800_000_000.0
    date = email.utils.formatdate(now + 20, usegmt=True)
    model = ScriptedModel(
        [api_error(429, "rate_limit_error", "slow", **{"retry-after": date}), ok(body(EVENTS))]
    )
    await collect(client(model, retry=RetryPolicy(jitter=(1.0, 1.0), clock=lambda: now)))
    assert delays(model) == [20.0]


async def test_backoff_schedule_then_give_up(autojump_clock: Any, collect: Any) -> None:
    model = ScriptedModel([api_error(529, "overloaded_error", "Overloaded") for _ in range(5)])
    with pytest.raises(OverloadedError):
        await collect(client(model, retry=RetryPolicy(max_retries=4, jitter=(1.0, 1.0))))
    assert delays(model) == [0.5, 1.0, 2.0, 4.0]
    assert model.remaining == ()


async def test_claude_code_schedule(autojump_clock: Any, collect: Any) -> None:
    model = ScriptedModel(
        [api_error(500, "api_error", "boom") for _ in range(10)] + [ok(body(EVENTS))]
    )
    items = await collect(client(model, retry=RetryPolicy.claude_code(jitter=(1.0, 1.0))))
    assert delays(model) == [0.5, 1, 2, 4, 8, 16, 32, 32, 32, 32]
    assert items[-1].statistics.retries == 10


async def test_seeded_jitter(autojump_clock: Any, collect: Any) -> None:
    import random

    model = ScriptedModel(
        [api_error(500, "api_error", "boom") for _ in range(2)] + [ok(body(EVENTS))]
    )
    await collect(client(model, retry=RetryPolicy(random=random.Random(3))))
    expected_rng = random.Random(3)
    expected = [round(b * (0.75 + 0.25 * expected_rng.random()), 6) for b in (0.5, 1.0)]
    assert delays(model) == expected


async def test_x_should_retry(autojump_clock: Any, collect: Any) -> None:
    model = ScriptedModel(
        [
            api_error(400, "invalid_request_error", "odd", **{"x-should-retry": "true"}),
            ok(body(EVENTS)),
        ]
    )
    await collect(client(model))
    assert len(model.requests) == 2

    model = ScriptedModel([api_error(529, "overloaded_error", "no", **{"x-should-retry": "false"})])
    with pytest.raises(OverloadedError):
        await collect(client(model))
    assert len(model.requests) == 1


async def test_4xx_is_not_retried(autojump_clock: Any, collect: Any) -> None:
    model = ScriptedModel([api_error(401, "authentication_error", "bad key")])
    with pytest.raises(AuthenticationError):
        await collect(client(model))
    assert len(model.requests) == 1


async def test_connection_error_is_retried(autojump_clock: Any, collect: Any) -> None:
    model = ScriptedModel(
        [
            DroppedConnection(error=httpx.ConnectError),
            DroppedConnection(error=httpx.ReadTimeout),
            ok(body(EVENTS)),
        ]
    )
    items = await collect(client(model))
    assert delays(model) == [0.5, 1.0]
    assert isinstance(items[-1], StreamResult)

    model = ScriptedModel([DroppedConnection(error=httpx.ConnectError)] * 3)
    with pytest.raises(APIConnectionError, match="ConnectError"):
        await collect(client(model))
    assert len(model.requests) == 3
    model = ScriptedModel([DroppedConnection(error=httpx.ConnectTimeout)])
    with pytest.raises(APITimeoutError):
        await collect(client(model, retry=RetryPolicy.never()))
    assert len(model.requests) == 1


async def test_in_stream_error_before_content_is_retried_invisibly(
    autojump_clock: Any, collect: Any
) -> None:
    model = ScriptedModel([ok(body([*HEAD, overloaded_event()])), ok(body(EVENTS))])
    items = await collect(client(model))
    assert [i.data for i in items if isinstance(i, StreamEvent)] == EVENTS
    assert delays(model) == [0.5]
    assert items[-1].statistics.retries == 1


async def test_in_stream_error_after_content_is_raised(autojump_clock: Any) -> None:
    model = ScriptedModel([ok(body([*HEAD, *TEXT_BLOCK, overloaded_event()])), ok(body(EVENTS))])
    seen: list[Any] = []

    async def consume() -> None:
        async with client(model).stream(model="m", max_tokens=5, messages=[]) as items:
            async for item in items:
                seen.append(item)

    with pytest.raises(OverloadedError, match="Overloaded") as info:
        await consume()
    assert info.value.request_id == "req_ok"
    assert info.value.status_code is None
    assert len(model.requests) == 1
    assert any(isinstance(i, AssistantMessage) for i in seen)
    assert all_closed(model)


@pytest.mark.parametrize(
    ("etype", "cls", "retried"),
    [
        ("overloaded_error", OverloadedError, True),
        ("rate_limit_error", RateLimitError, True),
        ("api_error", InternalServerError, True),
        ("invalid_request_error", InvalidRequestError, False),
        ("authentication_error", AuthenticationError, False),
        ("mystery_error", APIStatusError, False),
    ],
)
async def test_in_stream_error_types(
    autojump_clock: Any, etype: str, cls: type[Exception], retried: bool, collect: Any
) -> None:
    event = {"type": "error", "error": {"type": etype, "message": "m"}}
    model = ScriptedModel([ok(body([HEAD[0], event])) for _ in range(3)])
    with pytest.raises(cls):
        await collect(client(model))
    assert len(model.requests) == (3 if retried else 1)


async def test_retries_are_logged_without_the_key(
    autojump_clock: Any, caplog: pytest.LogCaptureFixture, collect: Any
) -> None:
    caplog.set_level(logging.DEBUG, logger="trio_agent")
    model = ScriptedModel([api_error(529, "overloaded_error", "Overloaded"), ok(body(EVENTS))])
    await collect(client(model))
    assert "retry 1/2" in caplog.text
    assert SENTINEL_KEY not in caplog.text
    assert model.requests[0].headers["x-api-key"] == SENTINEL_KEY  # the key was in play


# -- watchdogs, truncation, limits ---------------------------------------------------


async def test_idle_timeout(autojump_clock: Any, collect: Any) -> None:
    model = ScriptedModel([ok([*body(HEAD + TEXT_BLOCK), (100.0, encode_event(TAIL[0]))])])
    start = trio.current_time()
    with pytest.raises(StreamIdleTimeoutError, match="idle_timeout"):
        await collect(client(model, idle_timeout=10.0))
    assert trio.current_time() - start == pytest.approx(10.0)
    assert len(model.requests) == 1  # content was handed out: not retried
    assert all_closed(model)


async def test_idle_timer_is_reset_by_every_byte(autojump_clock: Any, collect: Any) -> None:
    # One event dribbled one byte every 6 s (idle timeout 10 s): no timeout.
    slow = encode_event(EVENTS[2])
    chunks = [*body(HEAD), *((6.0, slow[i : i + 1]) for i in range(len(slow))), *body(EVENTS[3:])]
    model = ScriptedModel([ok(chunks)])
    start = trio.current_time()
    items = await collect(client(model, idle_timeout=10.0))
    assert isinstance(items[-1], StreamResult)
    assert trio.current_time() - start == pytest.approx(6.0 * len(slow))  # it did dribble
    assert len(model.requests) == 1


async def test_idle_timeout_before_content_is_retried(autojump_clock: Any, collect: Any) -> None:
    model = ScriptedModel([ok([*body([HEAD[0]]), (100.0, b"")]), ok(body(EVENTS))])
    items = await collect(client(model, idle_timeout=5.0))
    assert isinstance(items[-1], StreamResult)
    assert delays(model) == [5.5]


async def test_idle_timeout_waiting_for_headers(autojump_clock: Any, collect: Any) -> None:
    model = ScriptedModel([RawAnswer(chunks=body(EVENTS), delay=1000)])
    start = trio.current_time()
    with pytest.raises(APITimeoutError, match=r"idle_timeout=3\.0"):
        await collect(client(model, api_key="k", idle_timeout=3.0, retry=RetryPolicy.never()))
    assert trio.current_time() - start == pytest.approx(3.0)
    assert len(model.requests) == 1


async def test_consumer_time_does_not_count_as_idle(autojump_clock: Any) -> None:
    model = ScriptedModel([ok(body(EVENTS))])
    seen: list[Any] = []
    async with client(model, idle_timeout=1.0).stream(
        model="m", max_tokens=5, messages=[]
    ) as items:
        async for item in items:
            seen.append(item)
            await trio.sleep(50)  # a slow consumer
    assert isinstance(seen[-1], StreamResult)
    assert len([i for i in seen if isinstance(i, StreamEvent)]) == len(EVENTS)


async def test_stalls_are_counted_and_timed_pings_excluded(
    autojump_clock: Any, collect: Any
) -> None:
    chunks = [
        (0.0, encode_event(HEAD[0])),
        (10.0, encode_event(TEXT_BLOCK[0])),  # 10 s: not a stall (threshold 15)
        (10.0, encode_event({"type": "ping"})),
        (10.0, encode_event({"type": "ping"})),
        (10.0, encode_event(TEXT_BLOCK[1])),  # 30 s since the last content event: a stall
        (16.0, encode_event(TEXT_BLOCK[2])),  # a stall
        (1.0, encode_event(TEXT_BLOCK[3])),
        *body(TAIL),
    ]
    model = ScriptedModel([ok(chunks)])
    items = await collect(client(model, idle_timeout=25.0, stall_timeout=15.0))
    stats = items[-1].statistics
    assert (stats.stalls, stats.stall_time, stats.pings) == (2, 46.0, 2)


async def test_truncated_stream(autojump_clock: Any, collect: Any) -> None:
    model = ScriptedModel([ok(body(EVENTS[:-1]))])
    with pytest.raises(StreamTruncatedError, match="before message_stop"):
        await collect(client(model))
    assert all_closed(model)


async def test_empty_stream(autojump_clock: Any, collect: Any) -> None:
    # An empty body is retried invisibly, like a connection error before headers.
    model = ScriptedModel([ok([(0.0, b": just a comment\n\n")]) for _ in range(3)])
    with pytest.raises(StreamTruncatedError, match="without any event"):
        await collect(client(model))
    assert len(model.requests) == 3  # EXACT allows 2 retries


async def test_connection_lost_mid_stream(autojump_clock: Any, collect: Any) -> None:
    # The in-process transport drops the body with httpx.ReadError.
    model = ScriptedModel([RawAnswer(chunks=body(HEAD + TEXT_BLOCK), disconnect=True)])
    with pytest.raises(StreamTruncatedError, match="ReadError"):
        await collect(client(model))
    assert len(model.requests) == 1
    assert all_closed(model)


async def test_event_size_limit(autojump_clock: Any, collect: Any) -> None:
    model = ScriptedModel([ok(body(EVENTS))])
    with pytest.raises(StreamLimitError, match="max_event_bytes"):
        await collect(client(model, limits=StreamLimits(max_event_bytes=100)))
    assert all_closed(model)


async def test_bytes_without_event_boundary_are_bounded(autojump_clock: Any, collect: Any) -> None:
    model = ScriptedModel([ok([(0.0, b"data: ")] + [(0.0, b"x" * 65536)] * 100)])
    with pytest.raises(StreamLimitError, match="without an event boundary"):
        await collect(client(model, limits=StreamLimits(max_event_bytes=1000)))
    assert all_closed(model)


async def test_invalid_json_event(autojump_clock: Any, collect: Any) -> None:
    model = ScriptedModel([ok([(0.0, encode_event(HEAD[0])), (0.0, b"data: {oops\n\n")])])
    with pytest.raises(StreamProtocolError, match="not JSON"):
        await collect(client(model))
    assert all_closed(model)


# -- cancellation and secrets --------------------------------------------------------


async def test_response_closed_on_cancel(autojump_clock: Any) -> None:
    model = ScriptedModel([ok([*body(HEAD + TEXT_BLOCK), (1000.0, encode_event(TAIL[0]))])])
    received: list[Any] = []
    with trio.move_on_after(5) as scope:
        async with client(model).stream(model="m", max_tokens=5, messages=[]) as items:
            async for item in items:
                received.append(item)
    assert scope.cancelled_caught
    assert len(received) == len(HEAD + TEXT_BLOCK) + 1
    assert all_closed(model)


async def test_consumer_leaving_early_closes_the_response(autojump_clock: Any) -> None:
    model = ScriptedModel([ok(body(EVENTS))])
    seen: list[Any] = []
    async with client(model).stream(model="m", max_tokens=5, messages=[]) as items:
        async for item in items:
            seen.append(item)
            break
    assert len(seen) == 1
    assert all_closed(model)


async def test_api_key_never_leaks(
    autojump_clock: Any, caplog: pytest.LogCaptureFixture, collect: Any
) -> None:
    caplog.set_level(logging.DEBUG)
    some = client(ScriptedModel([]))
    assert SENTINEL_KEY not in repr(some)
    assert "<redacted>" in repr(some)
    failures: list[BaseException] = []
    scripts: list[list[Any]] = [
        [api_error(401, "authentication_error", "invalid x-api-key")],
        [DroppedConnection(error=httpx.ConnectError)],
        [HTTPErrorAnswer(status=200, body={})],
        [ok(body(EVENTS[:3]))],
        [ok(body([HEAD[0], overloaded_event()]))],
    ]
    for script in scripts:
        model = ScriptedModel(script)
        with pytest.raises(trio_agent.TrioAgentError) as info:
            await collect(client(model, retry=RetryPolicy.never()))
        failures.append(info.value)
        assert model.requests[0].headers["x-api-key"] == SENTINEL_KEY  # the key was sent
    assert len(failures) == len(scripts)
    for exc in failures:
        text = f"{exc!s} {exc!r} {getattr(exc, 'headers', '')} {getattr(exc, 'body', '')}"
        assert SENTINEL_KEY not in text
    assert SENTINEL_KEY not in caplog.text


# -- batches: The client hands each network read's items over in one batch; the consumer still sees single items, in the same order, with the same errors, and stays cancellable.


def one_read(events: list[dict[str, Any]]) -> RawAnswer:
    return ok([(0.0, render_events(events))])


def comparable(items: list[Any]) -> list[Any]:
    # ttft differs with the timing of reads; everything else must be identical.
    return [(i.message, i.statistics) if isinstance(i, StreamResult) else i for i in items]


async def test_one_read_gives_the_same_items_as_one_read_per_event(
    autojump_clock: trio.testing.MockClock, collect: Any
) -> None:
    apart = await collect(client(ScriptedModel([ok(body(EVENTS))])))
    together = await collect(client(ScriptedModel([one_read(EVENTS)])))
    assert comparable(together) == comparable(apart)
    assert [type(i) for i in together].count(AssistantMessage) == 2
    assert isinstance(together[-1], StreamResult)


async def test_items_before_an_error_in_the_same_read_are_handed_out_first(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([one_read([*HEAD, *TEXT_BLOCK, overloaded_event()]), ok(body(EVENTS))])
    seen: list[Any] = []

    async def consume() -> None:
        async with client(model).stream(model="m", max_tokens=5, messages=[]) as items:
            async for item in items:
                seen.append(item)

    with pytest.raises(OverloadedError):
        await consume()
    assert len(model.requests) == 1  # content was handed out: not retried
    assert [i.type for i in seen if isinstance(i, StreamEvent)] == [
        e["type"] for e in [*HEAD, *TEXT_BLOCK]
    ]
    assert isinstance(seen[-1], AssistantMessage)
    assert all_closed(model)


async def test_an_error_before_content_in_one_read_is_retried_invisibly(
    autojump_clock: trio.testing.MockClock, collect: Any
) -> None:
    model = ScriptedModel([one_read([*HEAD, overloaded_event()]), one_read(EVENTS)])
    items = await collect(client(model))
    assert len(model.requests) == 2
    assert items[-1].statistics.retries == 1
    assert [i.type for i in items if isinstance(i, StreamEvent)] == [e["type"] for e in EVENTS]


async def test_a_cancelled_consumer_stops_at_the_next_item(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([one_read(EVENTS)])
    seen: list[Any] = []
    with trio.CancelScope() as scope:
        async with client(model).stream(model="m", max_tokens=5, messages=[]) as items:
            async for item in items:
                seen.append(item)
                scope.cancel()  # no await after this one: the next item must not come
    assert scope.cancelled_caught
    assert len(seen) == 1
    assert all_closed(model)


async def test_receive_and_end_of_channel(autojump_clock: trio.testing.MockClock) -> None:
    model = ScriptedModel([ok([(0.0, render_events(EVENTS[:4])), *body(EVENTS[4:])])])
    got: list[Any] = []
    async with client(model).stream(model="m", max_tokens=5, messages=[]) as items:
        while True:
            try:
                got.append(await items.receive())
            except trio.EndOfChannel:
                break
        with pytest.raises(trio.EndOfChannel):
            await items.receive()
        await items.aclose()
    assert isinstance(got[-1], StreamResult)
    assert got[-1].message.tool_uses[0].input == {"path": "a"}
    assert len([i for i in got if isinstance(i, StreamEvent)]) == len(EVENTS)
