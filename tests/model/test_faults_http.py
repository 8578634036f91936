"""Fault matrix rows 1-4: HTTP errors, retry schedules, non-SSE 200s, dropped connections.

Schedules are exact: the times of the requests in virtual time.
(Row 1 is also covered per header form in tests/test_client.py::test_429_retry_after,
test_retry_after_http_date, test_backoff_schedule_then_give_up, test_x_should_retry.)
"""

from __future__ import annotations

import email.utils
import itertools
from typing import Any

import httpx
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import (
    AnthropicClient,
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    ConflictError,
    InternalServerError,
    InvalidRequestError,
    NotFoundError,
    OverloadedError,
    PermissionDeniedError,
    RateLimitError,
    RequestTooLargeError,
    RetryPolicy,
    StreamProtocolError,
    TextBlock,
    Tool,
    ToolUseBlock,
    TurnEnd,
    TurnEndReason,
    UserMessage,
    query,
)
from trio_agent.testing import (
    DroppedConnection,
    HTTPErrorAnswer,
    LeakCheck,
    ScriptedAnswer,
    ScriptedModel,
    check_history,
    run_virtual,
)

NOW = 1_800_000_000.0
TYPED = {
    408: APIStatusError,
    409: ConflictError,
    429: RateLimitError,
    500: InternalServerError,
    503: InternalServerError,
    529: OverloadedError,
}


class Timed(httpx.AsyncBaseTransport):
    """The scripted model's transport, noting the virtual time of each request."""

    def __init__(self, model: ScriptedModel) -> None:
        self.inner = model.transport()
        self.times: list[float] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.times.append(trio.current_time())
        return await self.inner.handle_async_request(request)


def timed_client(
    model: ScriptedModel, retry: RetryPolicy, **kw: Any
) -> tuple[AnthropicClient, Timed]:
    transport = Timed(model)
    client = AnthropicClient(
        api_key="k",
        base_url="http://scripted",
        http_client=httpx.AsyncClient(transport=transport),
        retry=retry,
        **kw,
    )
    return client, transport


HEADER_FORMS = st.one_of(
    st.just(("none", {})),
    st.floats(0.001, 60).map(lambda s: ("seconds", {"retry-after": repr(s)})),
    st.integers(1, 60_000).map(lambda ms: ("ms", {"retry-after-ms": str(ms)})),
    st.integers(1, 60).map(
        lambda s: ("date", {"retry-after": email.utils.formatdate(NOW + s, usegmt=True)})
    ),
    st.sampled_from(["soon", "", "-1", "0", "61", "3600", "nan", "inf"]).map(
        lambda g: ("ignored", {"retry-after": g})
    ),
)


def expected_delay(form: str, headers: dict[str, str], n: int) -> float:
    if form == "seconds":
        return float(headers["retry-after"])
    if form == "ms":
        return int(headers["retry-after-ms"]) / 1000
    if form == "date":
        return email.utils.mktime_tz(email.utils.parsedate_tz(headers["retry-after"])) - NOW  # type: ignore[arg-type]
    return min(0.5 * 2**n, 8.0)


@settings(max_examples=200, deadline=None)
@given(
    status=st.sampled_from(sorted(TYPED)),
    header=HEADER_FORMS,
    should_retry=st.sampled_from([None, "true", "false"]),
    failures=st.integers(1, 4),
    max_retries=st.integers(0, 3),
)
def test_exact_retry_schedule_then_success_or_the_typed_error(
    status: int,
    header: tuple[str, dict[str, str]],
    should_retry: str | None,
    failures: int,
    max_retries: int,
    collect: Any,
) -> None:
    form, headers = header
    headers = dict(headers)
    if should_retry is not None:
        headers["x-should-retry"] = should_retry
    answers: list[Any] = [HTTPErrorAnswer(status=status, headers=headers) for _ in range(failures)]
    answers.append(ScriptedAnswer(blocks=[TextBlock("ok")]))
    model = ScriptedModel(answers)
    policy = RetryPolicy(max_retries=max_retries, jitter=(1.0, 1.0), clock=lambda: NOW)

    async def main() -> tuple[list[float], Any]:
        client, transport = timed_client(model, policy)
        try:
            items = await collect(client)
        except APIStatusError as exc:
            return transport.times, exc
        return transport.times, items[-1]

    times, outcome = run_virtual(main, check=LeakCheck(models=[model], processes=False))
    retries = 0 if should_retry == "false" else min(failures, max_retries)
    assert len(times) == retries + 1
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert gaps == pytest.approx([expected_delay(form, headers, n) for n in range(retries)])
    if retries < failures:
        assert type(outcome) is TYPED[status]
        assert outcome.status_code == status
        assert outcome.request_id == f"req_scripted_{len(times)}"
    else:
        assert outcome.message.text == "ok"
        assert outcome.statistics.retries == retries


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (400, InvalidRequestError),
        (401, AuthenticationError),
        (403, PermissionDeniedError),
        (404, NotFoundError),
        (413, RequestTooLargeError),
    ],
)
@pytest.mark.parametrize("json_body", [True, False])
async def test_4xx_is_not_retried_and_carries_the_request_id(
    autojump_clock: Any, status: int, error: type[APIStatusError], json_body: bool, collect: Any
) -> None:
    body = None if json_body else b"<html><body>413 Request Entity Too Large</body></html>"
    headers = {} if json_body else {"content-type": "text/html"}
    model = ScriptedModel([HTTPErrorAnswer(status=status, body=body, headers=headers)])
    client, transport = timed_client(model, RetryPolicy(max_retries=5))
    with LeakCheck(models=[model], processes=False, fds=False), pytest.raises(error) as info:
        await collect(client)
    assert len(transport.times) == 1
    assert info.value.status_code == status
    assert info.value.request_id == "req_scripted_1"
    if not json_body:
        assert "413 Request Entity Too Large" in str(info.value)


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("application/json", b'{"id": "msg_1", "type": "message", "content": []}'),
        ("text/html; charset=utf-8", b"<!doctype html><h1>Welcome to the proxy</h1>"),
    ],
)
async def test_a_200_that_is_not_sse_is_a_protocol_error(
    autojump_clock: Any, content_type: str, body: bytes, collect: Any
) -> None:
    model = ScriptedModel(
        [HTTPErrorAnswer(status=200, headers={"content-type": content_type}, body=body)]
    )
    client, transport = timed_client(model, RetryPolicy(max_retries=3))
    with (
        LeakCheck(models=[model], processes=False, fds=False),
        pytest.raises(StreamProtocolError, match="text/event-stream") as info,
    ):
        await collect(client)
    assert "req_scripted_1" in str(info.value)
    assert len(transport.times) == 1  # not retried: a retry would not fix a proxy


def _tool(log: list[str]) -> Tool:
    async def run(input: Any, ctx: Any) -> str:
        log.append(ctx.tool_use_id)
        return "done"

    return Tool("Act", "Does a thing.", {"type": "object"}, run)


@settings(max_examples=40, deadline=None)
@given(
    faults=st.lists(st.sampled_from(["reset", "timeout"]), min_size=1, max_size=4),
    max_retries=st.integers(0, 4),
)
def test_reset_or_timeout_before_headers_is_retried_and_starts_no_tool(
    faults: list[str], max_retries: int
) -> None:
    answers: list[Any] = [
        DroppedConnection() if f == "reset" else HTTPErrorAnswer(status=500, delay=1000)
        for f in faults
    ]
    answers += [
        ScriptedAnswer(blocks=[ToolUseBlock("t1", "Act", {})]),
        ScriptedAnswer(blocks=[TextBlock("done")]),
    ]
    model = ScriptedModel(answers)
    log: list[str] = []

    async def main() -> TurnEnd:
        client, _ = timed_client(
            model, RetryPolicy(max_retries=max_retries, jitter=(1, 1)), idle_timeout=30
        )
        async with query(
            client, [UserMessage("go")], tools=[_tool(log)], model="m", max_tokens=10
        ) as events:
            async for event in events:
                if isinstance(event, TurnEnd):
                    return event
        raise AssertionError("no TurnEnd")

    end = run_virtual(main, check=LeakCheck(models=[model], processes=False))
    check_history(end.messages)
    if len(faults) > max_retries:
        assert end.reason is TurnEndReason.ERROR
        assert isinstance(end.error, APIConnectionError | APITimeoutError)
        assert log == []  # no tool started
    else:
        assert end.reason is TurnEndReason.COMPLETED
        assert log == ["t1"]  # started exactly once
