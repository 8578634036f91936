"""Every contestant's sample runs under a deadline: a hang becomes a reported failure
of that one sample, and the run goes on.

Two layers:

- the contestant itself is given ``timeout`` and cancels its own turn when it passes
  (``trio.fail_after`` on the trio side, ``asyncio.timeout`` on the asyncio side), so
  the failure is an ordinary exception, recorded by :func:`sample` in
  :attr:`Series.errors`;
- a hard watchdog (``faulthandler.dump_traceback_later``) a grace period later, for a
  hang that cancellation cannot reach (a blocked event loop, a stuck thread): it dumps
  every thread's stack to stderr and exits the process, so a hang is never silent and
  never blocks whoever runs the CLI.
"""

from __future__ import annotations

import faulthandler
import sys
import time
from collections.abc import Callable, Generator
from contextlib import contextmanager

from ._report import Series

#: Seconds one contestant's turn may take (quick mode: the scenarios are scaled down).
SAMPLE_TIMEOUT = 120.0
QUICK_SAMPLE_TIMEOUT = 30.0
#: Extra seconds the hard watchdog gives cooperative cancellation before it exits.
WATCHDOG_GRACE = 30.0
#: Seconds a whole benchmark may take before the hard watchdog ends the process.
BENCHMARK_TIMEOUT = 1800.0
QUICK_BENCHMARK_TIMEOUT = 180.0  # below the smoke test's 240 s: its stderr gets the stacks


#: Absolute ``time.monotonic()`` deadlines of the watchdogs now armed (nested).
_deadlines: list[float] = []


@contextmanager
def watchdog(seconds: float) -> Generator[None]:
    """Dump every thread's stack and exit the process if the block is still running
    after *seconds*; nests (the earliest deadline armed wins)."""
    _deadlines.append(time.monotonic() + seconds)
    _arm()
    try:
        yield
    finally:
        _deadlines.pop()
        _arm()


def _arm() -> None:
    faulthandler.cancel_dump_traceback_later()
    if _deadlines:
        left = max(0.001, min(_deadlines) - time.monotonic())
        # The process's own stderr (fd 2), even where sys.stderr is replaced.
        faulthandler.dump_traceback_later(left, exit=True, file=sys.__stderr__ or 2)


def sample(series: Series, fn: Callable[[float], float], timeout: float) -> float | None:
    """Run one sample ``fn(timeout)`` of *series*; its value, or ``None`` if it failed.

    *fn* must give up by itself after ``timeout`` seconds (raise ``TimeoutError`` or
    ``trio.TooSlowError``); a hard :func:`watchdog` covers it ``WATCHDOG_GRACE``
    seconds later. A failure (the deadline passed, or any exception) is appended to
    ``series.errors`` and printed to stderr; a value is appended to ``series.samples``.
    """
    label = f"{series.benchmark} / {series.contestant}"
    t0 = time.perf_counter()
    try:
        with watchdog(timeout + WATCHDOG_GRACE):
            value = fn(timeout)
    except Exception as exc:
        elapsed = time.perf_counter() - t0
        if _is_timeout(exc):
            why = f"no result within the {timeout:.0f} s sample timeout (hung?)"
        else:
            why = f"{type(exc).__name__}: {exc}"
        number = len(series.samples) + len(series.errors) + 1
        message = f"sample {number} after {elapsed:.1f} s: {why}"
        series.errors.append(message)
        print(f"  {label}: FAILED {message}", file=sys.stderr, flush=True)
        return None
    series.samples.append(value)
    return value


def _is_timeout(exc: BaseException) -> bool:
    import trio

    return isinstance(exc, TimeoutError | trio.TooSlowError)
