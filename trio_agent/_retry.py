"""RetryPolicy: when to try a request again, and how long to wait first.

The default is the official Anthropic SDK's behaviour: 2 retries; retry 408, 409,
429, every status >= 500 (529 included) and connection errors; an
``x-should-retry: true|false`` header wins over the status; ``retry-after-ms`` then
``retry-after`` (seconds, or an HTTP date) is honoured when 0 < t <= 60 s; otherwise
``min(0.5 * 2**n, 8) * uniform(0.75, 1)`` for the n-th retry (counted from 0).
:meth:`RetryPolicy.claude_code` is Claude Code's: 10 retries, a 32 s cap.

Pure and synchronous: the client sleeps with ``trio.sleep`` for :meth:`RetryPolicy.delay`.
"""

from __future__ import annotations

import email.utils
import random as _random
import time
from collections.abc import Callable, Mapping

import attrs

__all__ = ["RetryPolicy"]

_RETRY_STATUSES = frozenset({408, 409, 429})
#: retry-after values outside (0, MAX_RETRY_AFTER] are ignored, as in the official SDK.
MAX_RETRY_AFTER = 60.0


def _lower(headers: Mapping[str, str] | None) -> dict[str, str]:
    # httpx.Headers is already case-insensitive; a plain dict may not be.
    return {k.lower(): v for k, v in (headers or {}).items()}


@attrs.frozen
class RetryPolicy:
    """How many times to retry a failed request, and the delay before each retry.

    Args:
        max_retries: retries after the first attempt (0 disables retrying).
        initial_delay: the delay before the first retry, before jitter.
        max_delay: the cap of the exponential delay.
        jitter: the delay is multiplied by ``uniform(*jitter)``; ``(1, 1)`` is exact.
        random: the random source of the jitter (pass ``random.Random(seed)`` for
            reproducible delays).
        clock: wall-clock seconds, to turn an HTTP-date ``retry-after`` into a delay.

    Example::

        policy = RetryPolicy(max_retries=5, jitter=(1.0, 1.0))
        policy.delay(0)  # 0.5
        policy.delay(1, {"retry-after": "3"})  # 3.0
    """

    max_retries: int = attrs.field(default=2, validator=attrs.validators.ge(0))
    initial_delay: float = attrs.field(default=0.5, validator=attrs.validators.ge(0))
    max_delay: float = attrs.field(default=8.0, validator=attrs.validators.ge(0))
    jitter: tuple[float, float] = (0.75, 1.0)
    random: _random.Random = attrs.field(factory=_random.Random, eq=False, repr=False)
    clock: Callable[[], float] = attrs.field(default=time.time, eq=False, repr=False)

    @classmethod
    def claude_code(cls, **changes: object) -> RetryPolicy:
        """Claude Code's policy: 10 retries, delays capped at 32 s."""
        return attrs.evolve(cls(max_retries=10, max_delay=32.0), **changes)

    @classmethod
    def never(cls) -> RetryPolicy:
        """No retries at all."""
        return cls(max_retries=0)

    def should_retry(self, status: int | None, headers: Mapping[str, str] | None = None) -> bool:
        """Whether an answer with HTTP *status* deserves another attempt.

        ``status=None`` means no answer (a connection error or timeout): retried.
        """
        verdict = _lower(headers).get("x-should-retry")
        if verdict == "true":
            return True
        if verdict == "false":
            return False
        if status is None:
            return True
        return status in _RETRY_STATUSES or status >= 500

    def retry_after(self, headers: Mapping[str, str] | None) -> float | None:
        """The server's requested delay in seconds, if valid (0 < t <= 60), else None."""
        lowered = _lower(headers)
        seconds: float | None = None
        if "retry-after-ms" in lowered:
            try:
                seconds = float(lowered["retry-after-ms"]) / 1000
            except ValueError:
                seconds = None
        if seconds is None and "retry-after" in lowered:
            value = lowered["retry-after"]
            try:
                seconds = float(value)
            except ValueError:
                parsed = email.utils.parsedate_tz(value)
                if parsed is not None:
                    seconds = email.utils.mktime_tz(parsed) - self.clock()
        # NaN and inf fail this test too.
        if seconds is not None and 0 < seconds <= MAX_RETRY_AFTER:
            return seconds
        return None

    def delay(self, attempt: int, headers: Mapping[str, str] | None = None) -> float:
        """Seconds to wait before retry number *attempt* (0 for the first retry)."""
        server = self.retry_after(headers)
        if server is not None:
            return server
        base = min(self.initial_delay * 2.0 ** min(attempt, 1000), self.max_delay)
        low, high = self.jitter
        return max(0.0, base * (low + (high - low) * self.random.random()))
