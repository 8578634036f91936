"""AnthropicClient against literal SSE bytes served by an httpx.MockTransport.

Everything runs in Trio virtual time (the autojump_clock fixture).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import attrs
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
    StreamEvent,
    StreamIdleTimeoutError,
    StreamLimitError,
    StreamLimits,
    StreamProtocolError,
    StreamResult,
    StreamTruncatedError,
    TextBlock,
    ToolUseBlock,
    UserMessage,
)

SENTINEL_KEY = "sk-ant-SENTINEL-0123456789"
EXACT = RetryPolicy(jitter=(1.0, 1.0))


def sse(event: dict[str, Any]) -> bytes:
    return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()


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
    return {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}


@attrs.define
class Chunks(httpx.AsyncByteStream):
    """A response body: chunks, each after a delay (virtual time); records aclose().

    A plain async iterator (like a real transport's stream, it ends once closed).
    """

    chunks: list[tuple[float, bytes]]
    closed: bool = False
    fail_with: Exception | None = None
    position: int = 0

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self

    async def __anext__(self) -> bytes:
        if self.closed:
            raise httpx.StreamClosed()
        if self.position < len(self.chunks):
            delay, chunk = self.chunks[self.position]
            self.position += 1
            await trio.sleep(delay)
            return chunk
        if self.fail_with is not None:
            raise self.fail_with
        raise StopAsyncIteration

    async def aclose(self) -> None:
        self.closed = True


def body(events: list[dict[str, Any]], delay: float = 0.0) -> Chunks:
    return Chunks([(delay, sse(e)) for e in events])


@attrs.define
class Server:
    """Answers each request with the next response of a script; records requests."""

    script: list[Callable[[httpx.Request], httpx.Response] | httpx.Response | Exception]
    requests: list[httpx.Request] = attrs.field(factory=list)
    times: list[float] = attrs.field(factory=list)
    bodies: list[Chunks] = attrs.field(factory=list)

    async def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        self.times.append(trio.current_time())
        step = self.script.pop(0)
        if isinstance(step, Exception):
            raise step
        response = step if isinstance(step, httpx.Response) else step(request)
        if isinstance(response.stream, Chunks):
            self.bodies.append(response.stream)
        return response

    def client(self, **kwargs: Any) -> AnthropicClient:
        http = httpx.AsyncClient(transport=httpx.MockTransport(self.handle))
        kwargs.setdefault("retry", EXACT)
        kwargs.setdefault("api_key", SENTINEL_KEY)
        return AnthropicClient(base_url="https://api.test", http_client=http, **kwargs)


def ok(stream: Chunks, **headers: str) -> httpx.Response:
    return httpx.Response(
        200,
        headers={"content-type": "text/event-stream", "request-id": "req_ok", **headers},
        stream=stream,
    )


def error(status: int, payload: Any = None, **headers: str) -> httpx.Response:
    content = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return httpx.Response(
        status, headers={"request-id": f"req_{status}", **headers}, content=content
    )


def api_error(status: int, etype: str, message: str, **headers: str) -> httpx.Response:
    return error(status, {"type": "error", "error": {"type": etype, "message": message}}, **headers)


async def collect(client: AnthropicClient, **kwargs: Any) -> list[Any]:
    kwargs.setdefault("model", "claude-x")
    kwargs.setdefault("max_tokens", 100)
    kwargs.setdefault("messages", [UserMessage("hello")])
    items: list[Any] = []
    async with client.stream(**kwargs) as channel:
        async for item in channel:
            items.append(item)
    return items


# -- the happy path ------------------------------------------------------------------


async def test_stream_items_and_request(autojump_clock: trio.testing.MockClock) -> None:
    server = Server([ok(body(EVENTS, delay=0.25))])
    tool = trio_agent.Tool(
        "Read",
        "read",
        {"type": "object"},
        run=lambda i, c: None,  # pyright: ignore
    )
    items = await collect(server.client(), system="be brief", tools=[tool], temperature=0.5)

    (request,) = server.requests
    assert request.url == "https://api.test/v1/messages"
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
    assert result.statistics == trio_agent.StreamStatistics(events=len(EVENTS), pings=1)
    assert server.bodies[0].closed


async def test_messages_as_dicts_and_assistant_messages(autojump_clock: Any) -> None:
    server = Server([ok(body(EVENTS))])
    previous = AssistantMessage("m0", "claude-x", [TextBlock("before")])
    await collect(
        server.client(),
        messages=[{"role": "user", "content": "a"}, previous, UserMessage("b")],
        tools=[{"name": "x", "input_schema": {"type": "object"}}],
    )
    sent = json.loads(server.requests[0].content)
    assert sent["messages"] == [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": [{"type": "text", "text": "before"}]},
        {"role": "user", "content": "b"},
    ]
    assert sent["tools"] == [{"name": "x", "input_schema": {"type": "object"}}]


async def test_bad_message_type_is_a_type_error(autojump_clock: Any) -> None:
    server = Server([])
    with pytest.raises(TypeError, match="a message must be"):
        await collect(server.client(), messages=[42])
    with pytest.raises(TypeError, match="a tool must be"):
        await collect(server.client(), tools=[42])


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


async def test_bom_and_crlf(autojump_clock: Any) -> None:
    raw = b"\xef\xbb\xbf" + b"".join(sse(e) for e in EVENTS).replace(b"\n", b"\r\n")
    # split inside the BOM and inside a CRLF
    chunks = [raw[:1], raw[1:2], raw[2:40], *(raw[i : i + 7] for i in range(40, len(raw), 7))]
    server = Server([ok(Chunks([(0.0, c) for c in chunks]))])
    items = await collect(server.client())
    assert [i.data for i in items if isinstance(i, StreamEvent)] == EVENTS


async def test_empty_message_is_handed_out_at_message_stop(autojump_clock: Any) -> None:
    server = Server([ok(body([HEAD[0], *TAIL]))])
    items = await collect(server.client())
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
    autojump_clock: Any, status: int, etype: str, message: str, cls: type[APIStatusError]
) -> None:
    server = Server([api_error(status, etype, message)])
    with pytest.raises(cls) as info:
        await collect(server.client(retry=RetryPolicy.never()))
    exc = info.value
    assert type(exc) is cls
    assert exc.status_code == status
    assert exc.error_type == etype
    assert exc.request_id == f"req_{status}"
    assert message in str(exc)
    assert f"req_{status}" in str(exc)
    assert exc.body["error"]["message"] == message


async def test_non_json_error_body(autojump_clock: Any) -> None:
    server = Server([error(502, b"<html>Bad Gateway</html>")])
    with pytest.raises(InternalServerError, match="Bad Gateway") as info:
        await collect(server.client(retry=RetryPolicy.never()))
    assert info.value.body == "<html>Bad Gateway</html>"
    assert info.value.error_type is None


async def test_request_id_from_body_when_no_header(autojump_clock: Any) -> None:
    payload = {
        "type": "error",
        "error": {"type": "api_error", "message": "x"},
        "request_id": "req_b",
    }
    server = Server([httpx.Response(400, json=payload)])
    with pytest.raises(APIStatusError) as info:
        await collect(server.client())
    assert info.value.request_id == "req_b"


async def test_a_200_that_is_not_sse_is_a_protocol_error(autojump_clock: Any) -> None:
    server = Server([httpx.Response(200, json={"id": "msg"}, headers={"request-id": "req_j"})])
    with pytest.raises(StreamProtocolError, match=r"text/event-stream.*application/json.*req_j"):
        await collect(server.client())


# -- retries, exact in virtual time --------------------------------------------------


def delays(server: Server) -> list[float]:
    return [round(b - a, 6) for a, b in zip(server.times, server.times[1:], strict=False)]


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
    autojump_clock: Any, headers: dict[str, str], expected: float
) -> None:
    server = Server([api_error(429, "rate_limit_error", "slow", **headers), ok(body(EVENTS))])
    items = await collect(server.client())
    assert delays(server) == [expected]
    assert items[-1].statistics.retries == 1


async def test_retry_after_http_date(autojump_clock: Any) -> None:
    import email.utils

    now = 1_800_000_000.0
    date = email.utils.formatdate(now + 20, usegmt=True)
    server = Server(
        [api_error(429, "rate_limit_error", "slow", **{"retry-after": date}), ok(body(EVENTS))]
    )
    await collect(server.client(retry=RetryPolicy(jitter=(1.0, 1.0), clock=lambda: now)))
    assert delays(server) == [20.0]


async def test_backoff_schedule_then_give_up(autojump_clock: Any) -> None:
    server = Server([api_error(529, "overloaded_error", "Overloaded") for _ in range(5)])
    with pytest.raises(OverloadedError):
        await collect(server.client(retry=RetryPolicy(max_retries=4, jitter=(1.0, 1.0))))
    assert delays(server) == [0.5, 1.0, 2.0, 4.0]


async def test_claude_code_schedule(autojump_clock: Any) -> None:
    server = Server([api_error(500, "api_error", "boom") for _ in range(10)] + [ok(body(EVENTS))])
    items = await collect(server.client(retry=RetryPolicy.claude_code(jitter=(1.0, 1.0))))
    assert delays(server) == [0.5, 1, 2, 4, 8, 16, 32, 32, 32, 32]
    assert items[-1].statistics.retries == 10


async def test_seeded_jitter(autojump_clock: Any) -> None:
    import random

    server = Server([api_error(500, "api_error", "boom") for _ in range(2)] + [ok(body(EVENTS))])
    await collect(server.client(retry=RetryPolicy(random=random.Random(3))))
    expected_rng = random.Random(3)
    expected = [round(b * (0.75 + 0.25 * expected_rng.random()), 6) for b in (0.5, 1.0)]
    assert delays(server) == expected


async def test_x_should_retry(autojump_clock: Any) -> None:
    server = Server(
        [
            api_error(400, "invalid_request_error", "odd", **{"x-should-retry": "true"}),
            ok(body(EVENTS)),
        ]
    )
    await collect(server.client())
    assert len(server.requests) == 2

    server = Server([api_error(529, "overloaded_error", "no", **{"x-should-retry": "false"})])
    with pytest.raises(OverloadedError):
        await collect(server.client())
    assert len(server.requests) == 1


async def test_4xx_is_not_retried(autojump_clock: Any) -> None:
    server = Server([api_error(401, "authentication_error", "bad key")])
    with pytest.raises(AuthenticationError):
        await collect(server.client())
    assert len(server.requests) == 1


async def test_connection_error_is_retried(autojump_clock: Any) -> None:
    server = Server([httpx.ConnectError("refused"), httpx.ReadTimeout("slow"), ok(body(EVENTS))])
    items = await collect(server.client())
    assert delays(server) == [0.5, 1.0]
    assert isinstance(items[-1], StreamResult)

    server = Server([httpx.ConnectError("refused")] * 3)
    with pytest.raises(APIConnectionError, match="ConnectError"):
        await collect(server.client())
    server = Server([httpx.ConnectTimeout("slow")])
    with pytest.raises(APITimeoutError):
        await collect(server.client(retry=RetryPolicy.never()))


async def test_in_stream_error_before_content_is_retried_invisibly(autojump_clock: Any) -> None:
    server = Server([ok(body([*HEAD, overloaded_event()])), ok(body(EVENTS))])
    items = await collect(server.client())
    assert [i.data for i in items if isinstance(i, StreamEvent)] == EVENTS
    assert delays(server) == [0.5]
    assert items[-1].statistics.retries == 1


async def test_in_stream_error_after_content_is_raised(autojump_clock: Any) -> None:
    server = Server([ok(body([*HEAD, *TEXT_BLOCK, overloaded_event()])), ok(body(EVENTS))])
    seen: list[Any] = []

    async def consume() -> None:
        async with server.client().stream(model="m", max_tokens=5, messages=[]) as items:
            async for item in items:
                seen.append(item)

    with pytest.raises(OverloadedError, match="Overloaded") as info:
        await consume()
    assert info.value.request_id == "req_ok"
    assert info.value.status_code is None
    assert len(server.requests) == 1
    assert any(isinstance(i, AssistantMessage) for i in seen)
    assert server.bodies[0].closed


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
    autojump_clock: Any, etype: str, cls: type[Exception], retried: bool
) -> None:
    event = {"type": "error", "error": {"type": etype, "message": "m"}}
    server = Server([ok(body([HEAD[0], event])) for _ in range(3)])
    with pytest.raises(cls):
        await collect(server.client())
    assert len(server.requests) == (3 if retried else 1)


async def test_retries_are_logged_without_the_key(
    autojump_clock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="trio_agent")
    server = Server([api_error(529, "overloaded_error", "Overloaded"), ok(body(EVENTS))])
    await collect(server.client())
    assert "retry 1/2" in caplog.text
    assert SENTINEL_KEY not in caplog.text


# -- watchdogs, truncation, limits ---------------------------------------------------


async def test_idle_timeout(autojump_clock: Any) -> None:
    stream = Chunks([(0, sse(e)) for e in HEAD + TEXT_BLOCK] + [(100.0, sse(TAIL[0]))])
    server = Server([ok(stream)])
    start = trio.current_time()
    with pytest.raises(StreamIdleTimeoutError, match="idle_timeout"):
        await collect(server.client(idle_timeout=10.0))
    assert trio.current_time() - start == pytest.approx(10.0)
    assert stream.closed


async def test_idle_timer_is_reset_by_every_byte(autojump_clock: Any) -> None:
    # One event dribbled one byte every 6 s (idle timeout 10 s): no timeout.
    slow = sse(EVENTS[2])
    chunks = [(0.0, sse(e)) for e in HEAD] + [(6.0, slow[i : i + 1]) for i in range(len(slow))]
    chunks += [(0.0, sse(e)) for e in EVENTS[3:]]
    server = Server([ok(Chunks(chunks))])
    items = await collect(server.client(idle_timeout=10.0))
    assert isinstance(items[-1], StreamResult)


async def test_idle_timeout_before_content_is_retried(autojump_clock: Any) -> None:
    server = Server([ok(Chunks([(0, sse(HEAD[0])), (100.0, b"")])), ok(body(EVENTS))])
    items = await collect(server.client(idle_timeout=5.0))
    assert isinstance(items[-1], StreamResult)
    assert delays(server) == [5.5]


async def test_idle_timeout_waiting_for_headers(autojump_clock: Any) -> None:
    async def slow(request: httpx.Request) -> httpx.Response:
        await trio.sleep(1000)
        raise AssertionError("unreachable")

    client = AnthropicClient(
        api_key="k",
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(slow)),
        idle_timeout=3.0,
        retry=RetryPolicy.never(),
    )
    with pytest.raises(APITimeoutError, match=r"idle_timeout=3\.0"):
        await collect(client)


async def test_consumer_time_does_not_count_as_idle(autojump_clock: Any) -> None:
    server = Server([ok(body(EVENTS))])
    async with server.client(idle_timeout=1.0).stream(
        model="m", max_tokens=5, messages=[]
    ) as items:
        async for _item in items:
            await trio.sleep(50)  # a slow consumer


async def test_stalls_are_counted_and_timed_pings_excluded(autojump_clock: Any) -> None:
    chunks = [
        (0.0, sse(HEAD[0])),
        (10.0, sse(TEXT_BLOCK[0])),  # 10 s: not a stall (threshold 15)
        (10.0, sse({"type": "ping"})),
        (10.0, sse({"type": "ping"})),
        (10.0, sse(TEXT_BLOCK[1])),  # 30 s since the last content event: a stall
        (16.0, sse(TEXT_BLOCK[2])),  # a stall
        (1.0, sse(TEXT_BLOCK[3])),
        *((0.0, sse(e)) for e in TAIL),
    ]
    server = Server([ok(Chunks(chunks))])
    items = await collect(server.client(idle_timeout=25.0, stall_timeout=15.0))
    stats = items[-1].statistics
    assert (stats.stalls, stats.stall_time, stats.pings) == (2, 46.0, 2)


async def test_truncated_stream(autojump_clock: Any) -> None:
    server = Server([ok(body(EVENTS[:-1]))])
    with pytest.raises(StreamTruncatedError, match="before message_stop"):
        await collect(server.client())
    assert server.bodies[0].closed


async def test_empty_stream(autojump_clock: Any) -> None:
    # An empty body is retried invisibly, like a connection error before headers.
    server = Server([ok(Chunks([(0.0, b": just a comment\n\n")])) for _ in range(3)])
    with pytest.raises(StreamTruncatedError, match="without any event"):
        await collect(server.client())
    assert len(server.requests) == 3  # EXACT allows 2 retries


async def test_connection_lost_mid_stream(autojump_clock: Any) -> None:
    stream = body(HEAD + TEXT_BLOCK)
    stream.fail_with = httpx.RemoteProtocolError("peer closed connection")
    server = Server([ok(stream)])
    with pytest.raises(StreamTruncatedError, match="RemoteProtocolError"):
        await collect(server.client())


async def test_event_size_limit(autojump_clock: Any) -> None:
    server = Server([ok(body(EVENTS))])
    with pytest.raises(StreamLimitError, match="max_event_bytes"):
        await collect(server.client(limits=StreamLimits(max_event_bytes=100)))


async def test_bytes_without_event_boundary_are_bounded(autojump_clock: Any) -> None:
    endless = Chunks([(0.0, b"data: ")] + [(0.0, b"x" * 65536)] * 100)
    server = Server([ok(endless)])
    with pytest.raises(StreamLimitError, match="without an event boundary"):
        await collect(server.client(limits=StreamLimits(max_event_bytes=1000)))
    assert endless.closed


async def test_invalid_json_event(autojump_clock: Any) -> None:
    server = Server([ok(Chunks([(0.0, sse(HEAD[0])), (0.0, b"data: {oops\n\n")]))])
    with pytest.raises(StreamProtocolError, match="not JSON"):
        await collect(server.client())


# -- cancellation and secrets --------------------------------------------------------


async def test_response_closed_on_cancel(autojump_clock: Any) -> None:
    stream = Chunks([(0, sse(e)) for e in HEAD + TEXT_BLOCK] + [(1000.0, sse(TAIL[0]))])
    server = Server([ok(stream)])
    received: list[Any] = []
    with trio.move_on_after(5):
        async with server.client().stream(model="m", max_tokens=5, messages=[]) as items:
            async for item in items:
                received.append(item)
    assert len(received) == len(HEAD + TEXT_BLOCK) + 1
    assert stream.closed


async def test_consumer_leaving_early_closes_the_response(autojump_clock: Any) -> None:
    server = Server([ok(body(EVENTS))])
    async with server.client().stream(model="m", max_tokens=5, messages=[]) as items:
        async for _item in items:
            break
    assert server.bodies[0].closed


async def test_api_key_never_leaks(autojump_clock: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    client = Server([]).client()
    assert SENTINEL_KEY not in repr(client)
    assert "<redacted>" in repr(client)
    failures: list[BaseException] = []
    scripts: list[list[Any]] = [
        [api_error(401, "authentication_error", "invalid x-api-key")],
        [httpx.ConnectError("refused")],
        [httpx.Response(200, json={})],
        [ok(body(EVENTS[:3]))],
        [ok(body([HEAD[0], overloaded_event()]))],
    ]
    for script in scripts:
        server = Server(script)
        with pytest.raises(trio_agent.TrioAgentError) as info:
            await collect(server.client(retry=RetryPolicy.never()))
        failures.append(info.value)
    for exc in failures:
        text = f"{exc!s} {exc!r} {getattr(exc, 'headers', '')} {getattr(exc, 'body', '')}"
        assert SENTINEL_KEY not in text
    assert SENTINEL_KEY not in caplog.text


# -- batches: The client hands each network read's items over in one batch; the consumer still sees single items, in the same order, with the same errors, and stays cancellable.


def one_read(events: list[dict[str, Any]]) -> Chunks:
    return Chunks([(0.0, b"".join(sse(e) for e in events))])


def comparable(items: list[Any]) -> list[Any]:
    # ttft differs with the timing of reads; everything else must be identical.
    return [(i.message, i.statistics) if isinstance(i, StreamResult) else i for i in items]


async def test_one_read_gives_the_same_items_as_one_read_per_event(
    autojump_clock: trio.testing.MockClock,
) -> None:
    apart = await collect(Server([ok(body(EVENTS))]).client())
    together = await collect(Server([ok(one_read(EVENTS))]).client())
    assert comparable(together) == comparable(apart)
    assert [type(i) for i in together].count(AssistantMessage) == 2
    assert isinstance(together[-1], StreamResult)


async def test_items_before_an_error_in_the_same_read_are_handed_out_first(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = Server([ok(one_read([*HEAD, *TEXT_BLOCK, overloaded_event()])), ok(body(EVENTS))])
    seen: list[Any] = []

    async def consume() -> None:
        async with server.client().stream(model="m", max_tokens=5, messages=[]) as items:
            async for item in items:
                seen.append(item)

    with pytest.raises(OverloadedError):
        await consume()
    assert len(server.requests) == 1  # content was handed out: not retried
    assert [i.type for i in seen if isinstance(i, StreamEvent)] == [
        e["type"] for e in [*HEAD, *TEXT_BLOCK]
    ]
    assert isinstance(seen[-1], AssistantMessage)
    assert server.bodies[0].closed


async def test_an_error_before_content_in_one_read_is_retried_invisibly(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = Server([ok(one_read([*HEAD, overloaded_event()])), ok(one_read(EVENTS))])
    items = await collect(server.client())
    assert len(server.requests) == 2
    assert items[-1].statistics.retries == 1
    assert [i.type for i in items if isinstance(i, StreamEvent)] == [e["type"] for e in EVENTS]


async def test_a_cancelled_consumer_stops_at_the_next_item(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = Server([ok(one_read(EVENTS))])
    seen: list[Any] = []
    with trio.CancelScope() as scope:
        async with server.client().stream(model="m", max_tokens=5, messages=[]) as items:
            async for item in items:
                seen.append(item)
                scope.cancel()  # no await after this one: the next item must not come
    assert scope.cancelled_caught
    assert len(seen) == 1
    assert server.bodies[0].closed


async def test_receive_and_end_of_channel(autojump_clock: trio.testing.MockClock) -> None:
    server = Server(
        [ok(Chunks([(0.0, b"".join(sse(e) for e in EVENTS[:4])), *body(EVENTS[4:]).chunks]))]
    )
    got: list[Any] = []
    async with server.client().stream(model="m", max_tokens=5, messages=[]) as items:
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
