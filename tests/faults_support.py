"""Shared helpers of the fault-matrix tests (tests/test_faults_*.py, test_security.py).

``FIGURES`` counts what the fault tests checked in this process; the report script
(docs/reliability_report.py) prints it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import attrs
import httpx
import trio
import trio.testing

from trio_agent import (
    AnthropicClient,
    AssistantMessage,
    Message,
    RetryPolicy,
    StreamEvent,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
)
from trio_agent.testing import LeakCheck, ScriptedModel

T = TypeVar("T")

SENTINEL_KEY = "sk-ant-api03-SENTINEL-9f8e7d6c5b4a-DO-NOT-LEAK"
EXACT = RetryPolicy(jitter=(1.0, 1.0))


@attrs.define
class Figures:
    """What the fault tests checked (printed by the report)."""

    histories_checked: int = 0
    tool_uses_checked: int = 0
    unpaired_tool_use_ids: int = 0


FIGURES = Figures()


def client_for(
    model: ScriptedModel, *, retry: RetryPolicy | None = None, **kw: Any
) -> AnthropicClient:
    return AnthropicClient(
        api_key=SENTINEL_KEY,
        base_url="http://scripted",
        http_client=httpx.AsyncClient(transport=model.transport()),
        retry=retry if retry is not None else RetryPolicy.never(),
        **kw,
    )


def run_virtual(main: Callable[[], Awaitable[T]], *, check: LeakCheck | None = None) -> T:
    """``trio.run`` in virtual time (for hypothesis examples), under a leak check."""
    check = check if check is not None else LeakCheck(processes=False)
    box: list[T] = []

    async def wrapper() -> None:
        box.append(await main())

    with check:
        trio.run(wrapper, clock=trio.testing.MockClock(autojump_threshold=0), instruments=[check])
    return box[0]


def unpaired(messages: Sequence[Message]) -> list[str]:
    """tool_use ids without exactly one tool_result in the next user message (and
    tool_results that answer nothing)."""
    bad: list[str] = []
    for i, message in enumerate(messages):
        if isinstance(message, AssistantMessage):
            ids = [b.id for b in message.content if isinstance(b, ToolUseBlock)]
            if not ids:
                continue
            nxt = messages[i + 1] if i + 1 < len(messages) else None
            answered: list[str] = []
            if isinstance(nxt, UserMessage) and not isinstance(nxt.content, str):
                answered = [b.tool_use_id for b in nxt.content if isinstance(b, ToolResultBlock)]
            for tid in ids:
                if answered.count(tid) != 1:
                    bad.append(tid)
            bad.extend(a for a in answered if a not in ids)
    return bad


def check_pairing(messages: Sequence[Message]) -> None:
    """Every tool_use has exactly one tool_result; counted in ``FIGURES``."""
    bad = unpaired(messages)
    FIGURES.histories_checked += 1
    FIGURES.tool_uses_checked += sum(
        len(m.tool_uses) for m in messages if isinstance(m, AssistantMessage)
    )
    FIGURES.unpaired_tool_use_ids += len(bad)
    assert not bad, f"unpaired tool_use ids {bad} in {messages!r}"


def sse_events(items: Iterable[Any]) -> list[Mapping[str, Any]]:
    return [i.data for i in items if isinstance(i, StreamEvent)]


@attrs.define(eq=False)
class RawBody(httpx.AsyncByteStream):
    """A response body of given chunks, each after its delay; tracks closing."""

    chunks: Sequence[tuple[float, bytes]]
    error_at_end: Exception | None = None
    closed: bool = False
    _next: int = 0

    def __aiter__(self) -> RawBody:
        return self

    async def __anext__(self) -> bytes:
        if self.closed:
            raise httpx.StreamClosed()
        while self._next < len(self.chunks):
            delay, data = self.chunks[self._next]
            self._next += 1
            await trio.sleep(delay)
            if data:
                return data
        await trio.lowlevel.checkpoint()
        if self.error_at_end is not None:
            error, self.error_at_end = self.error_at_end, None
            raise error
        raise StopAsyncIteration

    async def aclose(self) -> None:
        self.closed = True
        await trio.lowlevel.checkpoint()


@attrs.define(eq=False)
class RawServer(httpx.AsyncBaseTransport):
    """Answers each request with the next raw response; counts open bodies."""

    responses: list[tuple[int, dict[str, str], RawBody]]
    bodies: list[RawBody] = attrs.field(factory=list[RawBody])
    requests: int = 0

    @property
    def open_streams(self) -> int:
        return sum(not b.closed for b in self.bodies)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await request.aread()
        self.requests += 1
        status, headers, body = self.responses.pop(0)
        self.bodies.append(body)
        await trio.lowlevel.checkpoint()
        return httpx.Response(status, headers=headers, stream=body, request=request)

    def client(self, **kw: Any) -> AnthropicClient:
        kw.setdefault("retry", RetryPolicy.never())
        return AnthropicClient(
            api_key=SENTINEL_KEY,
            base_url="http://raw",
            http_client=httpx.AsyncClient(transport=self),
            **kw,
        )


SSE = {"content-type": "text/event-stream", "request-id": "req_raw"}


def sse_response(
    chunks: Sequence[bytes], *, delay: float = 0.0, **kw: Any
) -> tuple[int, dict[str, str], RawBody]:
    return 200, dict(SSE), RawBody([(delay, c) for c in chunks], **kw)


async def collect(client: AnthropicClient, *, max_tokens: int = 64) -> list[Any]:
    items: list[Any] = []
    async with client.stream(
        model="claude-x", max_tokens=max_tokens, messages=[UserMessage("hi")]
    ) as channel:
        async for item in channel:
            items.append(item)
    return items
