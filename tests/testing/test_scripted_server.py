"""The scripted model on a real loopback socket."""

from __future__ import annotations

import h11
import httpx
import pytest
import trio

from trio_agent import TextBlock, ToolUseBlock
from trio_agent.testing import (
    Faults,
    HTTPErrorAnswer,
    ScriptedAnswer,
    ScriptedModel,
    Timing,
    render_sse,
    serve_scripted_model,
)

ANSWER = ScriptedAnswer(
    blocks=[TextBlock("Grüße — ok\u2028"), ToolUseBlock("toolu_1", "Read", {"path": "ä"})],
    timing=Timing(token_delay=0.001),
)


async def test_serves_a_real_request_and_shuts_down_cleanly() -> None:
    model = ScriptedModel([ANSWER, HTTPErrorAnswer(status=529, headers={"retry-after": "1"})])
    async with serve_scripted_model(model) as base_url:
        assert base_url.startswith("http://127.0.0.1:")
        async with httpx.AsyncClient(base_url=base_url) as client:
            async with client.stream(
                "POST", "/v1/messages", json={"stream": True}, headers={"x-api-key": "k"}
            ) as response:
                assert response.status_code == 200
                assert response.headers["request-id"] == "req_scripted_1"
                assert response.headers["content-type"].startswith("text/event-stream")
                body = b"".join([chunk async for chunk in response.aiter_raw()])
            error = await client.post("/v1/messages", json={})
    assert body == render_sse(ANSWER)
    assert error.status_code == 529
    assert error.headers["retry-after"] == "1"
    assert error.json()["error"]["type"] == "overloaded_error"
    assert [r.path for r in model.requests] == ["/v1/messages", "/v1/messages"]
    assert model.requests[0].headers["x-api-key"] == "k"
    assert model.requests[0].body == {"stream": True}


async def test_disconnect_closes_the_socket_mid_body() -> None:
    answer = ScriptedAnswer(blocks=[TextBlock("x" * 200)], faults=Faults(disconnect_after_byte=150))
    model = ScriptedModel([answer])
    received = bytearray()

    async def read(response: httpx.Response) -> None:
        async for chunk in response.aiter_raw():
            received.extend(chunk)

    async with (
        serve_scripted_model(model) as base_url,
        httpx.AsyncClient(base_url=base_url) as client,
        client.stream("POST", "/v1/messages", json={}) as response,
    ):
        with pytest.raises(httpx.RemoteProtocolError):
            await read(response)
    assert bytes(received) == render_sse(answer)
    assert len(received) == 150


async def _open_raw_request(base_url: str) -> trio.SocketStream:
    """Send a request over a bare socket (h11 frames it) and wait for the first bytes."""
    port = int(base_url.rsplit(":", 1)[1])
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    client = h11.Connection(h11.CLIENT)
    data = client.send(
        h11.Request(
            method="POST",
            target="/v1/messages",
            headers=[("host", "127.0.0.1"), ("content-length", "2")],
        )
    )
    data += client.send(h11.Data(data=b"{}")) + client.send(h11.EndOfMessage())
    await stream.send_all(data)
    assert await stream.receive_some(65536)
    return stream


async def test_a_client_that_leaves_early_does_not_break_the_server() -> None:
    slow = ScriptedAnswer(blocks=[TextBlock("y" * 100)], timing=Timing(token_delay=0.01))
    model = ScriptedModel([slow, ANSWER])
    async with serve_scripted_model(model) as base_url:
        stream = await _open_raw_request(base_url)
        await stream.aclose()
        async with httpx.AsyncClient(base_url=base_url) as client:
            response = await client.post("/v1/messages", json={})
            assert response.content == render_sse(ANSWER)


async def test_shutdown_with_a_connection_still_streaming() -> None:
    stalled = ScriptedAnswer(
        blocks=[TextBlock("z")], faults=Faults(stall_before_event=2, stall_seconds=3600)
    )
    model = ScriptedModel([stalled])
    with trio.move_on_after(5) as scope:
        async with serve_scripted_model(model) as base_url:
            stream = await _open_raw_request(base_url)
        # The server closed its end: the client sees the end of the stream.
        with trio.fail_after(5):
            while await stream.receive_some(65536):
                pass
        await stream.aclose()
    assert not scope.cancelled_caught


async def test_dropped_connection_and_delayed_error_on_a_real_socket() -> None:
    from trio_agent.testing import DroppedConnection

    model = ScriptedModel(
        [DroppedConnection(), HTTPErrorAnswer(status=500, delay=0.01, body=b"oops"), ANSWER]
    )
    async with (
        serve_scripted_model(model) as base_url,
        httpx.AsyncClient(base_url=base_url) as client,
    ):
        with pytest.raises(httpx.RemoteProtocolError):
            await client.post("/v1/messages", json={})
        error = await client.post("/v1/messages", json={})
        ok = await client.post("/v1/messages", json={})
    assert (error.status_code, error.content) == (500, b"oops")
    assert ok.content == render_sse(ANSWER)
    assert len(model.requests) == 3


async def test_a_scripted_transport_error_drops_a_real_socket() -> None:
    from trio_agent.testing import DroppedConnection

    # On a socket there is no exception to raise: the connection just closes.
    model = ScriptedModel([DroppedConnection(error=httpx.ConnectError), ANSWER])
    async with (
        serve_scripted_model(model) as base_url,
        httpx.AsyncClient(base_url=base_url) as client,
    ):
        with pytest.raises(httpx.RemoteProtocolError):
            await client.post("/v1/messages", json={})
        ok = await client.post("/v1/messages", json={})
    assert ok.content == render_sse(ANSWER)
    times = [r.time for r in model.requests]
    assert len(times) == 2
    assert times[0] is not None
    assert times[1] is not None
    assert times[0] <= times[1]  # arrival times on the Trio clock, in order


async def test_stall_pings_on_a_real_socket() -> None:
    answer = ScriptedAnswer(
        blocks=[TextBlock("a")],
        faults=Faults(stall_before_event=2, stall_seconds=0.05, pings_only_for=0.01),
    )
    model = ScriptedModel([answer])
    async with (
        serve_scripted_model(model) as base_url,
        httpx.AsyncClient(base_url=base_url) as client,
    ):
        response = await client.post("/v1/messages", json={})
    assert response.content == render_sse(answer)
    assert response.content.count(b"event: ping") == 5


async def test_connection_close_requests() -> None:
    model = ScriptedModel([ANSWER, ANSWER])
    async with (
        serve_scripted_model(model) as base_url,
        httpx.AsyncClient(base_url=base_url, headers={"connection": "close"}) as client,
    ):
        first = await client.post("/v1/messages", json={})
        second = await client.post("/v1/messages", json={})
    assert first.content == second.content == render_sse(ANSWER)


async def test_raw_answer_bytes_over_the_socket() -> None:
    from trio_agent.testing import RawAnswer

    model = ScriptedModel([RawAnswer(chunks=[(0.0, b"data: {oops\n"), (0.05, b"\n")])])
    async with (
        serve_scripted_model(model) as base_url,
        httpx.AsyncClient(base_url=base_url) as client,
        client.stream("POST", "/v1/messages", json={}) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream"
        body = b"".join([chunk async for chunk in response.aiter_raw()])
    assert body == b"data: {oops\n\n"
