"""A real loopback HTTP server for a :class:`ScriptedModel` (h11 over ``trio.serve_tcp``).

h11 does all the HTTP parsing and framing; this module only moves bytes, sleeps as the
answer's plan says, and closes the socket for a scripted disconnect.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from functools import partial

import h11
import trio

from ._scripted import ScriptedModel

__all__ = ["serve_scripted_model"]

_RECEIVE_SIZE = 65536


async def _read_request(
    conn: h11.Connection, stream: trio.SocketStream
) -> tuple[h11.Request, bytes] | None:
    """The next request and its body, or ``None`` once the client closed."""
    request: h11.Request | None = None
    body = bytearray()
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            conn.receive_data(await stream.receive_some(_RECEIVE_SIZE))
        elif isinstance(event, h11.Request):
            request = event
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            assert request is not None  # h11 guarantees Request before EndOfMessage
            return request, bytes(body)
        else:  # ConnectionClosed, or PAUSED after a client sent garbage
            return None


async def _send(conn: h11.Connection, stream: trio.SocketStream, event: h11.Event) -> None:
    data = conn.send(event)
    if data:
        await stream.send_all(data)


async def _serve_connection(model: ScriptedModel, stream: trio.SocketStream) -> None:
    if isinstance(model, ScriptedModel):  # pyright: ignore[reportUnnecessaryIsInstance]
        model.connections += 1  # (a duck-typed model, e.g. the benchmarks' router, has none)
    conn = h11.Connection(h11.SERVER)
    async with stream:
        try:
            while True:
                received = await _read_request(conn, stream)
                if received is None:
                    return
                request, content = received
                response = model.respond(
                    request.method.decode("ascii"),
                    request.target.decode("ascii").split("?", 1)[0],
                    [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers],
                    content,
                )
                start = trio.current_time()
                await trio.sleep_until(start + response.delay)
                if response.dropped:
                    return  # leaving `async with stream` closes the socket
                headers = list(response.headers)
                if not response.plan.disconnect and all(
                    at == 0 for at, _ in response.plan.schedule()
                ):
                    headers.append(("content-length", str(len(response.plan.data))))
                await _send(
                    conn, stream, h11.Response(status_code=response.status, headers=headers)
                )
                start = trio.current_time()
                for at, data in response.plan.schedule():
                    await trio.sleep_until(start + at)
                    if data:
                        await _send(conn, stream, h11.Data(data=data))
                if response.plan.disconnect:
                    return  # leaving `async with stream` closes the socket mid-body
                await _send(conn, stream, h11.EndOfMessage())
                if conn.our_state is h11.MUST_CLOSE:
                    return
                conn.start_next_cycle()
        except (trio.BrokenResourceError, trio.ClosedResourceError, h11.ProtocolError):
            # The client went away or spoke broken HTTP: drop this connection only.
            return


@asynccontextmanager
async def serve_scripted_model(
    model: ScriptedModel, *, host: str = "127.0.0.1", port: int = 0
) -> AsyncGenerator[str]:
    """Serve *model* over real HTTP/1.1 on a loopback socket; yields the base URL.

    The same timing and faults apply as in process, in real time; a scripted
    disconnect closes the socket in the middle of the chunked body. Leaving the block
    closes the listener and every connection.

    Example::

        async with serve_scripted_model(model) as base_url:
            client = AnthropicClient(api_key="test", base_url=base_url)
    """
    async with trio.open_nursery() as nursery:
        listeners: list[trio.SocketListener] = await nursery.start(
            partial(trio.serve_tcp, partial(_serve_connection, model), port, host=host)
        )
        bound_host, bound_port = listeners[0].socket.getsockname()[:2]
        try:
            yield f"http://{bound_host}:{bound_port}"
        finally:
            nursery.cancel_scope.cancel()
