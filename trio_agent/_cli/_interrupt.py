"""Ctrl+C in the agent commands: the first aborts what runs, the second exits.

:func:`open_ctrl_c` listens for SIGINT while a command runs and yields a
:class:`CtrlC`. While a turn runs (``with ctrl_c.aborts(session.abort):``) the
first Ctrl+C aborts it: the loop answers every tool call, the turn ends with an
``aborted_*`` reason and the command reports it. A second Ctrl+C (or a first one
with nothing to abort) cancels the whole command at once; ``ctrl_c.exited`` then
says so and the command exits with status 130, without a traceback.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import AsyncGenerator, Callable, Generator
from typing import IO, final

import attrs
import trio

__all__ = ["CtrlC", "open_ctrl_c"]


@final
@attrs.define(eq=False)
class CtrlC:
    """Where the next Ctrl+C goes (see the module docstring)."""

    err: IO[str]
    _scope: trio.CancelScope
    #: What the next Ctrl+C aborts, and what to say; None: it exits.
    _target: tuple[Callable[[], None], str] | None = None
    #: Ctrl+C was pressed during this command (something was aborted, or it exited).
    pressed: bool = False
    #: A second Ctrl+C (or one with nothing to abort) cancelled the command.
    exited: bool = False

    @contextlib.contextmanager
    def aborts(
        self, abort: Callable[[], None], message: str = "aborting the turn; Ctrl+C again to exit"
    ) -> Generator[None]:
        """Within the block, the first Ctrl+C calls *abort* (and says *message*)."""
        self._target = (abort, message)
        try:
            yield
        finally:
            self._target = None

    def press(self) -> None:
        """One Ctrl+C: abort the current target, or exit."""
        self.pressed = True
        target, self._target = self._target, None
        if target is None:
            self.exited = True
            self._scope.cancel()
            return
        abort, message = target
        try:
            self.err.write(f"\n[{message}]\n")
            self.err.flush()
        except (OSError, ValueError):
            pass
        abort()


@contextlib.asynccontextmanager
async def open_ctrl_c(err: IO[str]) -> AsyncGenerator[CtrlC]:
    """Route SIGINT to a :class:`CtrlC` while the block runs.

    An exit (a second Ctrl+C) cancels the block; check ``ctrl_c.exited`` after it.
    """
    with trio.open_signal_receiver(signal.SIGINT) as sigints, trio.CancelScope() as scope:
        ctrl_c = CtrlC(err, scope)
        async with trio.open_nursery() as nursery:

            async def watch() -> None:
                async for _ in sigints:
                    ctrl_c.press()

            nursery.start_soon(watch)
            try:
                yield ctrl_c
            finally:
                nursery.cancel_scope.cancel()
