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

from collections.abc import Callable, Generator
from contextlib import contextmanager
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
    # lands between two model calls is not lost.

    @contextmanager
    def cancelling(self, scope: trio.CancelScope) -> Generator[None]:
        """While inside, :meth:`abort` cancels *scope* (at once if already aborted)."""
        self._scopes.add(scope)
        if self._abort_reason is not None:
            scope.cancel(reason=self._abort_reason)
        try:
            yield
        finally:
            self._scopes.discard(scope)

    @contextmanager
    def interrupting(self) -> Generator[Callable[[_Interruptible], None]]:
        """While inside, :meth:`interrupt` interrupts the executor given to the
        function this yields (at once if already interrupted); the executor is
        attached after it opens, and stays attached until it has closed."""

        def attach(executor: _Interruptible) -> None:
            self._executor = executor
            if self._interrupted:
                executor.interrupt()

        try:
            yield attach
        finally:
            self._executor = None

    @contextmanager
    def interrupting_stream(self, scope: trio.CancelScope) -> Generator[None]:
        """While inside, :meth:`interrupt` cancels the model's stream *scope*."""
        self._stream_scope = scope
        if self._interrupted:
            scope.cancel(reason=AbortReason.INTERRUPT)
        try:
            yield
        finally:
            self._stream_scope = None
