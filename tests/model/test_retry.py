from __future__ import annotations

import email.utils
import random

import pytest

from trio_agent import RetryPolicy

EXACT = RetryPolicy(jitter=(1.0, 1.0))


def test_defaults_are_the_official_sdk() -> None:
    policy = RetryPolicy()
    assert (policy.max_retries, policy.initial_delay, policy.max_delay) == (2, 0.5, 8.0)
    assert policy.jitter == (0.75, 1.0)


def test_claude_code() -> None:
    policy = RetryPolicy.claude_code()
    assert (policy.max_retries, policy.max_delay) == (10, 32.0)
    assert [RetryPolicy.claude_code(jitter=(1.0, 1.0)).delay(n) for n in range(8)] == [
        0.5,
        1,
        2,
        4,
        8,
        16,
        32,
        32,
    ]
    assert RetryPolicy.never().max_retries == 0


def test_exponential_backoff_capped() -> None:
    assert [EXACT.delay(n) for n in range(6)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]
    assert EXACT.delay(10_000) == 8.0


def test_jitter_is_within_bounds_and_seedable() -> None:
    a = RetryPolicy(random=random.Random(7))
    b = RetryPolicy(random=random.Random(7))
    delays = [a.delay(n) for n in range(5)]
    assert delays == [b.delay(n) for n in range(5)]
    for n, d in enumerate(delays):
        base = min(0.5 * 2**n, 8)
        assert 0.75 * base <= d <= base


@pytest.mark.parametrize(
    ("status", "expected"),
    [(400, False), (401, False), (403, False), (404, False), (408, True), (409, True),
     (413, False), (422, False), (429, True), (500, True), (502, True), (503, True),
     (529, True), (None, True)],
)  # fmt: skip
def test_should_retry_by_status(status: int | None, expected: bool) -> None:
    assert RetryPolicy().should_retry(status, {}) is expected


def test_x_should_retry_wins() -> None:
    policy = RetryPolicy()
    assert policy.should_retry(400, {"x-should-retry": "true"})
    assert not policy.should_retry(529, {"X-Should-Retry": "false"})
    assert not policy.should_retry(None, {"x-should-retry": "false"})
    assert policy.should_retry(500, {"x-should-retry": "maybe"})


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "3"}, 3.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after-ms": "junk", "retry-after": "9"}, 9.0),
        ({"retry-after": "60"}, 60.0),
        ({"retry-after": "61"}, 0.5),  # out of range: back-off
        ({"retry-after": "0"}, 0.5),
        ({"retry-after": "-2"}, 0.5),
        ({"retry-after": "nan"}, 0.5),
        ({"retry-after": "garbage"}, 0.5),
        ({"Retry-After": "4"}, 4.0),
    ],
)
def test_retry_after(headers: dict[str, str], expected: float) -> None:
    assert EXACT.delay(0, headers) == expected


def test_retry_after_http_date() -> None:
    now = 1_700_000_000.0
    policy = RetryPolicy(jitter=(1.0, 1.0), clock=lambda: now)
    soon = email.utils.formatdate(now + 12, usegmt=True)
    late = email.utils.formatdate(now + 120, usegmt=True)
    past = email.utils.formatdate(now - 5, usegmt=True)
    assert policy.delay(0, {"retry-after": soon}) == 12.0
    assert policy.delay(1, {"retry-after": late}) == 1.0
    assert policy.delay(2, {"retry-after": past}) == 2.0


def test_validation() -> None:
    with pytest.raises(ValueError):
        RetryPolicy(max_retries=-1)
