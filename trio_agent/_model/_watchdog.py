"""The watchdogs of a stream: the idle deadline of a read, and the stall detector.

The idle watchdog bounds each read of the body by ``idle_timeout``; time spent by the
consumer never counts. On a network response it is httpcore's per-read timeout
(``idle_timeout`` passed as the request's read timeout, a cancel scope httpcore opens
per read anyway). Any other transport (in-process, ASGI, a test double) gets
:func:`fail_after_parked`: a deadline that costs nothing until a read actually waits.

:class:`StallMeter` counts gaps without content events.
"""

from __future__ import annotations

import importlib
import math
import types
from collections.abc import Callable, Coroutine, Generator
from typing import Any, NoReturn, TypeVar

import attrs
import outcome
import trio

__all__ = ["StallMeter", "fail_after_parked"]

_T = TypeVar("_T")

_TRAPS = importlib.import_module("trio._core._traps")
#: What Trio's ``cancel_shielded_checkpoint()`` yields to the scheduler: a task that
#: yields it is rescheduled at once and cannot be cancelled there, so it cannot wait.
#: A private name of Trio's: if it is ever gone, every yield counts as a wait.
_SHIELDED_CHECKPOINT: object = getattr(_TRAPS, "CancelShieldedCheckpoint", object())
#: What ``wait_task_rescheduled(abort_func)`` yields: a wait (private too; if it is
#: ever gone, waits are still bounded, see :func:`fail_after_parked`).
_WAIT: Any = getattr(_TRAPS, "WaitTaskRescheduled", object())
#: A read that yields this many schedule points without waiting (a busy poll) gets
#: its deadline all the same.
MAX_FREE_YIELDS = 16


@types.coroutine
def fail_after_parked(coro: Coroutine[Any, Any, _T], timeout: float) -> Generator[Any, Any, _T]:
    """Await *coro*; raise :class:`trio.TooSlowError` if it waits *timeout* seconds.

    The bound of ``with trio.fail_after(timeout): await coro``, at a lower cost: a
    read whose data is ready (one Trio checkpoint, as an in-process body has) costs no
    cancel scope at all, where entering and leaving one was a third of the time of a
    one-event read.

    How: this drives *coro* itself (as ``await`` does) and sees each yield to Trio.
    The deadline, *timeout* seconds from *coro*'s first wait, is held by a cancel
    scope only while the task is parked, entered just before the park and left when
    the task resumes, before any of *coro*'s code runs (so it nests under whatever
    scopes *coro* opened). If the deadline ends the wait, *coro* sees a TooSlowError
    there instead of Cancelled (its own cancel scopes, a nursery's included, would
    swallow a Cancelled that no longer belongs to a cancelled scope); a nursery of
    *coro*'s cancels its children on it, as on any error. Then the TooSlowError is
    raised here, whatever *coro* made of it. A busy poll (more than
    :data:`MAX_FREE_YIELDS` checkpoints without a wait) is bounded too: past the
    deadline, TooSlowError is thrown in at its next checkpoint.

    Everything else is ``await coro``: values and exceptions pass through both ways;
    outer cancel scopes (and KeyboardInterrupt) reach *coro* as usual. As under
    ``fail_after``, a wait of *coro*'s after the deadline (in its clean-up) ends at once.
    """
    deadline = math.inf
    free = 0
    too_slow: trio.TooSlowError | None = None  # set once the deadline ended a wait
    send: Any = coro.send
    value: Any = None
    try:
        while True:
            try:
                message = send(value)
            except StopIteration as stop:
                result: _T = stop.value
                return result
            send = coro.send
            if message is _SHIELDED_CHECKPOINT:  # no wait: no deadline needed
                free += 1
                if free > MAX_FREE_YIELDS:
                    now = trio.current_time()
                    if deadline == math.inf:
                        deadline = now + timeout
                    elif now >= deadline:
                        too_slow = trio.TooSlowError()
                        send, value = coro.throw, too_slow
                        continue
                try:
                    value = yield message
                except GeneratorExit:
                    raise
                except BaseException as exc:  # thrown in by Trio: pass it on
                    send, value = coro.throw, exc
                continue
            if deadline == math.inf:
                deadline = trio.current_time() + timeout
            with trio.CancelScope(deadline=deadline) as scope:
                if type(message) is _WAIT:
                    message = _with_deadline_abort(message, scope)
                try:
                    value = yield message
                except GeneratorExit:
                    raise
                except BaseException as exc:
                    send, value = coro.throw, exc
            if scope.cancel_called:  # the deadline passed during this wait
                too_slow = too_slow or trio.TooSlowError()
                if isinstance(value, outcome.Error) and isinstance(value.error, trio.Cancelled):
                    value = outcome.Error(too_slow)  # and ended it
    except GeneratorExit:  # this coroutine is closed: so is coro
        coro.close()
        raise
    except BaseException as exc:
        if too_slow is None or not isinstance(exc, Exception):
            raise
        if exc is too_slow:
            raise
        raise trio.TooSlowError from exc  # coro wrapped it (a group, its own error)


def _with_deadline_abort(message: Any, scope: trio.CancelScope) -> Any:
    """*message* (a wait) whose abort function sees TooSlowError, not Cancelled, when
    *scope*'s deadline is what aborts it."""
    abort = message.abort_func

    def abort_func(raise_cancel: Callable[[], NoReturn]) -> trio.lowlevel.Abort:
        if scope.cancel_called and isinstance(outcome.capture(raise_cancel).error, trio.Cancelled):
            return abort(_raise_too_slow)
        return abort(raise_cancel)

    return attrs.evolve(message, abort_func=abort_func)


def _raise_too_slow() -> NoReturn:
    raise trio.TooSlowError


class StallMeter:
    """Counts gaps longer than *threshold* seconds between content events.

    Pure bookkeeping: call :meth:`activity` with the time of each non-ping event.
    """

    def __init__(self, threshold: float, start: float) -> None:
        self.threshold = threshold
        self.last = start
        self.stalls = 0
        self.stall_time = 0.0

    def activity(self, now: float) -> None:
        gap = now - self.last
        if gap > self.threshold:
            self.stalls += 1
            self.stall_time += gap
        self.last = now
