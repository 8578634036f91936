"""The scripted model's in-process transport, in virtual time."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import trio

from trio_agent import TextBlock, ThinkingBlock, ToolUseBlock, Usage
from trio_agent.testing import HTTPErrorAnswer, ScriptedAnswer, ScriptedModel, Timing

URL = "https://api.anthropic.test/v1/messages"


def _answer(**kwargs: Any) -> ScriptedAnswer:
    return ScriptedAnswer(
        blocks=[
            TextBlock("Let me look."),
            ThinkingBlock("hmm", "sig"),
            ToolUseBlock("toolu_1", "Read", {"path": "a"}),
        ],
        **kwargs,
    )


async def _read(client: httpx.AsyncClient) -> tuple[httpx.Response, list[tuple[float, bytes]]]:
    chunks: list[tuple[float, bytes]] = []
    async with client.stream("POST", URL, json={"stream": True}) as response:
        async for chunk in response.aiter_raw():
            chunks.append((trio.current_time(), chunk))
    return response, chunks


async def test_serves_the_rendered_stream_and_records_the_request(autojump_clock: Any) -> None:
    answer = _answer()
    model = ScriptedModel([answer])
    async with httpx.AsyncClient(transport=model.transport()) as client:
        response, chunks = await _read(client)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["request-id"] == "req_scripted_1"
    assert b"".join(c for _, c in chunks) == b"".join(
        f"event: {e['type']}\ndata: {json.dumps(e, separators=(',', ':'))}\n\n".encode()
        for e in answer.events()
    )
    assert len(chunks) == len(answer.events())  # one chunk per event by default
    assert model.remaining == ()
    assert model.open_streams == 0
    (request,) = model.requests
    assert (request.method, request.path, request.body) == (
        "POST",
        "/v1/messages",
        {"stream": True},
    )


async def test_timing_is_exact_in_virtual_time(autojump_clock: Any) -> None:
    answer = _answer(timing=Timing(first_event_delay=1.0, token_delay=0.1, block_delay=0.5))
    model = ScriptedModel([answer])
    async with httpx.AsyncClient(transport=model.transport()) as client:
        _, chunks = await _read(client)
    expected: list[float] = []
    now = 0.0
    deltas = 0
    blocks = 0
    for event in answer.events():
        kind = event["type"]
        if kind == "message_start":
            now = 1.0
        elif kind == "content_block_start":
            blocks += 1
        elif kind == "content_block_delta":
            deltas += 1
        if kind in ("content_block_start", "content_block_delta"):
            now = 1.0 + 0.5 * blocks + 0.1 * deltas
        expected.append(now)
    assert [t for t, _ in chunks] == pytest.approx(expected, abs=1e-9)
    assert chunks[0][0] == 1.0


async def test_http_error_answer_carries_status_headers_and_body(autojump_clock: Any) -> None:
    model = ScriptedModel(
        [
            HTTPErrorAnswer(status=529, headers={"retry-after": "1"}),
            HTTPErrorAnswer(
                status=502,
                headers={"content-type": "text/html"},
                body=b"<html>bad</html>",
                delay=2.0,
            ),
            HTTPErrorAnswer(status=429, body={"type": "error", "error": {"type": "x"}}),
        ]
    )
    async with httpx.AsyncClient(transport=model.transport()) as client:
        first = await client.post(URL, json={})
        second = await client.post(URL, json={})
        assert trio.current_time() == 2.0
        third = await client.post(URL, json={})
    assert first.status_code == 529
    assert first.headers["retry-after"] == "1"
    assert first.headers["request-id"] == "req_scripted_1"
    assert first.headers["content-type"] == "application/json"
    assert first.json() == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
        "request_id": "req_scripted_1",
    }
    assert (second.status_code, second.headers["content-type"], second.content) == (
        502,
        "text/html",
        b"<html>bad</html>",
    )
    assert third.json() == {"type": "error", "error": {"type": "x"}}
    assert model.open_streams == 0


async def test_exhausted_script_answers_a_clear_500(autojump_clock: Any) -> None:
    model = ScriptedModel([])
    async with httpx.AsyncClient(transport=model.transport()) as client:
        response = await client.post(URL, json={})
    assert response.status_code == 500
    assert response.headers["x-should-retry"] == "false"
    assert "script is exhausted" in response.json()["error"]["message"]


def test_defaults() -> None:
    answer = _answer()
    assert answer.resolved_stop_reason == "tool_use"
    assert ScriptedAnswer(blocks=[TextBlock("x")]).resolved_stop_reason == "end_turn"
    assert answer.resolved_id.startswith("msg_scripted_")
    assert answer.resolved_id == _answer().resolved_id
    usage = Usage(input_tokens=3, output_tokens=4)
    assert _answer(usage=usage, message_id="msg_1").message.usage == usage
    assert _answer(message_id="msg_1").message.id == "msg_1"


def test_api_key_is_redacted_in_request_repr() -> None:
    from trio_agent.testing import ScriptedRequest

    request = ScriptedRequest.build("POST", "/", [("X-Api-Key", "sk-secret")], b"")
    assert request.headers["x-api-key"] == "sk-secret"
    assert "sk-secret" not in repr(request)


def test_a_script_holds_only_answers() -> None:
    with pytest.raises(TypeError, match="HTTPErrorAnswer, DroppedConnection or RawAnswer"):
        ScriptedModel(["hello"])  # type: ignore[list-item]


async def test_raw_answer_bytes_on_schedule(autojump_clock: Any) -> None:
    from trio_agent.testing import RawAnswer

    raw = RawAnswer(chunks=[(0.0, b"data: {oops\n"), (2.0, b"\n")], headers={"x-extra": "1"})
    model = ScriptedModel([raw, RawAnswer(chunks=[(1.0, b"event: x\n")], disconnect=True)])
    async with httpx.AsyncClient(transport=model.transport()) as client:
        async with client.stream("POST", "http://scripted/v1/messages", json={}) as response:
            assert response.status_code == 200
            assert response.headers["content-type"] == "text/event-stream"
            assert response.headers["x-extra"] == "1"
            got = [(trio.current_time(), c) async for c in response.aiter_raw()]
        assert got == [(0.0, b"data: {oops\n"), (2.0, b"\n")]
        async with client.stream("POST", "http://scripted/v1/messages", json={}) as response:
            with pytest.raises(httpx.ReadError):
                async for _ in response.aiter_raw():
                    pass
    assert model.open_streams == 0
    with pytest.raises(ValueError, match=">= 0"):
        RawAnswer(chunks=[(-1.0, b"x")])


async def test_dropped_connection(autojump_clock: Any) -> None:
    from trio_agent.testing import DroppedConnection

    model = ScriptedModel([DroppedConnection(delay=3.0), _answer()])
    async with httpx.AsyncClient(transport=model.transport()) as client:
        with pytest.raises(httpx.RemoteProtocolError, match="without sending a response"):
            await client.post(URL, json={})
        assert trio.current_time() == 3.0
        response = await client.post(URL, json={})
    assert response.status_code == 200
    assert len(model.requests) == 2
    assert model.open_streams == 0


async def test_requests_record_their_arrival_in_virtual_time(autojump_clock: Any) -> None:
    model = ScriptedModel([HTTPErrorAnswer(status=529), _answer()])
    async with httpx.AsyncClient(transport=model.transport()) as client:
        await trio.sleep(1.25)
        await client.post(URL, json={})
        await trio.sleep(2.5)
        await client.post(URL, json={"stream": True})
    assert [r.time for r in model.requests] == [1.25, 3.75]


def test_a_request_recorded_outside_trio_has_no_time() -> None:
    from trio_agent.testing import ScriptedRequest

    model = ScriptedModel([HTTPErrorAnswer(status=500)])
    response = model.respond("POST", "/v1/messages", [], b"{}")
    assert response.status == 500
    assert model.requests[0].time is None
    assert ScriptedRequest.build("POST", "/", [], b"").time is None
    assert ScriptedRequest.build("POST", "/", [], b"", time=2.0).time == 2.0


@pytest.mark.parametrize(
    "error", [httpx.ConnectError, httpx.ConnectTimeout, httpx.ReadTimeout, httpx.ReadError]
)
async def test_dropped_connection_raises_the_scripted_transport_error(
    autojump_clock: Any, error: type[httpx.TransportError]
) -> None:
    from trio_agent.testing import DroppedConnection

    model = ScriptedModel([DroppedConnection(error=error, delay=2.0), _answer()])
    async with httpx.AsyncClient(transport=model.transport()) as client:
        with pytest.raises(error, match=f"scripted {error.__name__}") as info:
            await client.post(URL, json={})
        assert type(info.value) is error
        assert info.value.request.url == URL
        assert trio.current_time() == 2.0
        response = await client.post(URL, json={})
    assert response.status_code == 200
    assert [r.time for r in model.requests] == [0.0, 2.0]  # the failed attempt counts


@pytest.mark.parametrize(
    "bad", [ValueError, httpx.HTTPStatusError, "ConnectError", httpx.ConnectError("x"), None]
)
def test_dropped_connection_error_must_be_a_transport_error(bad: Any) -> None:
    from trio_agent.testing import DroppedConnection

    assert DroppedConnection().error is httpx.RemoteProtocolError
    with pytest.raises(TypeError, match=r"httpx\.TransportError subclass"):
        DroppedConnection(error=bad)


async def test_a_none_header_leaves_a_default_out(autojump_clock: Any) -> None:
    from trio_agent.testing import RawAnswer

    model = ScriptedModel(
        [
            HTTPErrorAnswer(status=400, headers={"Request-Id": None, "x-extra": "1"}),
            RawAnswer(chunks=[(0.0, b": hi\n\n")], headers={"content-type": None}),
            _answer(headers={"cache-control": None, "request-id": "req_mine"}),
        ]
    )
    async with httpx.AsyncClient(transport=model.transport()) as client:
        error = await client.post(URL, json={})
        raw = await client.post(URL, json={})
        ok = await client.post(URL, json={"stream": True})
    assert "request-id" not in error.headers
    assert error.headers["x-extra"] == "1"
    assert error.headers["content-type"] == "application/json"
    assert error.json()["request_id"] == "req_scripted_1"  # the body still names it
    assert "content-type" not in raw.headers
    assert raw.headers["request-id"] == "req_scripted_2"
    assert "cache-control" not in ok.headers
    assert ok.headers["request-id"] == "req_mine"
    assert ok.headers["content-type"].startswith("text/event-stream")


async def test_client_base_url_shows_in_host_and_path(autojump_clock: Any) -> None:
    from trio_agent import UserMessage

    model = ScriptedModel([_answer()])
    client = model.client(base_url="https://api.test/prefix", api_key="sk-x")
    assert client.base_url == "https://api.test/prefix"
    async with client.stream(model="m", max_tokens=5, messages=[UserMessage("hi")]) as items:
        async for _ in items:
            pass
    (request,) = model.requests
    assert (request.headers["host"], request.path) == ("api.test", "/prefix/v1/messages")
    assert request.headers["x-api-key"] == "sk-x"


def test_error_bodies_per_status() -> None:
    def error(status: int) -> Any:
        return json.loads(HTTPErrorAnswer(status=status).render_body("req_1"))["error"]

    assert error(401)["type"] == "authentication_error"
    assert error(413)["type"] == "request_too_large"
    assert error(418)["type"] == "invalid_request_error"
    assert error(503)["type"] == "api_error"
    with pytest.raises(ValueError, match="HTTP status code"):
        HTTPErrorAnswer(status=600)


def test_request_recording_details() -> None:
    from trio_agent.testing import ScriptedRequest

    request = ScriptedRequest.build("POST", "/", [("A", "1"), ("a", "2")], b"not json")
    assert request.headers == {"a": "1, 2"}
    assert request.body is None
    assert request.content == b"not json"
    model = ScriptedModel([_answer()])
    assert repr(model) == "<ScriptedModel served=0 remaining=1 open_streams=0>"
    assert _answer().tool_uses == (ToolUseBlock("toolu_1", "Read", {"path": "a"}),)


async def test_a_closed_body_cannot_be_read(autojump_clock: Any) -> None:
    model = ScriptedModel([_answer()])
    transport = model.transport()
    response = await transport.handle_async_request(httpx.Request("POST", URL, json={}))
    assert model.open_streams == 1
    stream = response.stream
    assert isinstance(stream, httpx.AsyncByteStream)
    await stream.aclose()
    await stream.aclose()  # closing twice is fine
    assert model.open_streams == 0
    with pytest.raises(httpx.StreamClosed):
        await stream.__aiter__().__anext__()


def test_testing_all_is_sorted_and_complete() -> None:
    import trio_agent.testing as testing

    assert testing.__all__ == sorted(testing.__all__)
    public = {
        name
        for name in dir(testing)
        if not name.startswith("_") and type(getattr(testing, name)).__name__ != "module"
    }
    assert public == set(testing.__all__)
