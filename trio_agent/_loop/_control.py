"""TurnControl: abort or interrupt a running :func:`trio_agent.query` from outside.

A Session (or a CLI's Ctrl+C handler) makes one ``TurnControl`` per turn, passes it
as ``query(..., control=control)`` and may call, from any Trio task of the same run:

- :meth:`TurnControl.abort` (Ctrl+C): cancel the turn now. Whatever the loop was
  awaiting (the stream, the tools, a stop hook, the compactor) is cancelled with
  the reason ``user_interrupted``; tools get synthetic results, the turn ends
  with ``aborted_streaming`` (the model's answer was not complete) or
  ``aborted_tools``.
- :meth:`TurnControl.interrupt` (the user typed a new message): stop what can be
  stopped and end the turn gracefully. The model's stream is cancelled,
  ``executor.interrupt()`` cancels the tools whose ``interrupt_behavior`` is
  ``"cancel"`` while ``"block"`` tools run to the end and keep their real results;
  then the turn ends (``aborted_streaming`` / ``aborted_tools``, ``abort_reason
  "interrupt"``) so the new message can be sent.

Both are synchronous, idempotent and may be called before the turn starts or after
it ended (then they do nothing but record the request).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, final

import attrs
import trio

from .._executor import AbortReason

__all__ = ["TurnControl"]


class _Interruptible(Protocol):
    def interrupt(self) -> None: ...


@final
@attrs.define(eq=False)
class TurnControl:
    """Abort or interrupt the turn of the ``query`` it is passed to."""

    _abort_reason: AbortReason | None = attrs.field(default=None, init=False)
    _interrupted: bool = attrs.field(default=False, init=False)
    _scopes: set[trio.CancelScope] = attrs.field(factory=set[trio.CancelScope], init=False)
    _stream_scope: trio.CancelScope | None = attrs.field(default=None, init=False)
    _executor: _Interruptible | None = attrs.field(default=None, init=False)

    @property
    def aborted(self) -> bool:
        """Whether :meth:`abort` was called."""
        return self._abort_reason is not None

    @property
    def abort_reason(self) -> AbortReason | None:
        """The reason given to :meth:`abort`, or None."""
        return self._abort_reason

    @property
    def interrupted(self) -> bool:
        """Whether :meth:`interrupt` was called."""
        return self._interrupted

    def abort(self, reason: AbortReason = AbortReason.USER_INTERRUPTED) -> None:
        """Cancel the running turn (Ctrl+C). Sync and idempotent."""
        if self._abort_reason is None:
            self._abort_reason = reason
        for scope in self._scopes:
            scope.cancel(reason=self._abort_reason)

    def interrupt(self) -> None:
        """Stop the stream and the cancellable tools, then end the turn. Sync."""
        self._interrupted = True
        if self._stream_scope is not None:
            self._stream_scope.cancel(reason=AbortReason.INTERRUPT)
        if self._executor is not None:
            self._executor.interrupt()

    # What query() uses: each one applies a request made earlier, so a call that
    # lands between two model calls is not lost. Each is a small class, not a
    # @contextmanager: a model call enters three, and a generator, its frame and its
    # manager per entry are garbage the collector has to go through.

    def cancelling(self, scope: trio.CancelScope) -> _Cancelling:
        """While inside, :meth:`abort` cancels *scope* (at once if already aborted)."""
        return _Cancelling(self, scope)

    def interrupting(self) -> _Interrupting:
        """While inside, :meth:`interrupt` interrupts the executor given to the
        function this yields (at once if already interrupted); the executor is
        attached after it opens, and stays attached until it has closed."""
        return _Interrupting(self)

    def interrupting_stream(self, scope: trio.CancelScope) -> _InterruptingStream:
        """While inside, :meth:`interrupt` cancels the model's stream *scope*."""
        return _InterruptingStream(self, scope)

    def _attach(self, executor: _Interruptible) -> None:
        self._executor = executor
        if self._interrupted:
            executor.interrupt()


@final
class _Cancelling:
    """``with control.cancelling(scope):`` (see :meth:`TurnControl.cancelling`)."""

    __slots__ = ("_control", "_scope")

    def __init__(self, control: TurnControl, scope: trio.CancelScope) -> None:
        self._control = control
        self._scope = scope

    def __enter__(self) -> None:
        control = self._control
        control._scopes.add(self._scope)  # pyright: ignore[reportPrivateUsage]
        if control.abort_reason is not None:
            self._scope.cancel(reason=control.abort_reason)

    def __exit__(self, *exc_info: object) -> None:
        self._control._scopes.discard(self._scope)  # pyright: ignore[reportPrivateUsage]


@final
class _Interrupting:
    """``with control.interrupting() as attach:`` (see :meth:`TurnControl.interrupting`)."""

    __slots__ = ("_control",)

    def __init__(self, control: TurnControl) -> None:
        self._control = control

    def __enter__(self) -> Callable[[_Interruptible], None]:
        return self._control._attach  # pyright: ignore[reportPrivateUsage]

    def __exit__(self, *exc_info: object) -> None:
        self._control._executor = None  # pyright: ignore[reportPrivateUsage]


@final
class _InterruptingStream:
    """``with control.interrupting_stream(scope):`` (see
    :meth:`TurnControl.interrupting_stream`)."""

    __slots__ = ("_control", "_scope")

    def __init__(self, control: TurnControl, scope: trio.CancelScope) -> None:
        self._control = control
        self._scope = scope

    def __enter__(self) -> None:
        control = self._control
        control._stream_scope = self._scope  # pyright: ignore[reportPrivateUsage]
        if control.interrupted:
            self._scope.cancel(reason=AbortReason.INTERRUPT)

    def __exit__(self, *exc_info: object) -> None:
        self._control._stream_scope = None  # pyright: ignore[reportPrivateUsage]
