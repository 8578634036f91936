"""The permission question of ``run`` and ``chat``.

A tool call the rules ask about is asked on a terminal only, after the call has
been shown, with the turn's output held back while the question waits
(:class:`HeldOutput`). With no terminal to ask (stdin is a pipe, a file, or at its
end) the call is denied with ``not allowed: no terminal to ask; pass --allow
NAME``, and that hint is said on stderr once per tool: nobody is pretended to
have said no.

:class:`HeldOutput` also writes the turn's output in batches: what is written
between two flushes goes out in one write, and :meth:`HeldOutput.flush_soon` (what
the printer calls after each event) flushes at most every :data:`FLUSH_INTERVAL`
seconds, its :meth:`~HeldOutput.flusher` task writing the rest by then. Streaming
20,000 text deltas is then ~50 writes a second, not 20,000.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Awaitable, Callable, Generator, Mapping
from typing import IO, Any, Final, final

import attrs
import trio

from .._permissions import Allow, Deny
from ._render import preview

__all__ = ["FLUSH_INTERVAL", "Asker", "HeldOutput", "no_terminal_message"]

#: The longest a written piece of the turn's output waits to be flushed (seconds):
#: under a frame at 60 Hz.
FLUSH_INTERVAL: Final = 0.015


def no_terminal_message(name: str) -> str:
    """What a call is answered when nobody can be asked about it."""
    return f"not allowed: no terminal to ask; pass --allow {name}"


@final
@attrs.define(eq=False)
class HeldOutput:
    """A text stream whose writes can be held back (while a question waits), and
    are written in batches: each :meth:`flush` writes what came since the last one
    in one write.

    It also remembers the tool calls already shown, so a call listed before its
    question is not listed again when its message ends.

    Attributes:
        pause: entered while a question waits (the live view stops redrawing).
    """

    target: IO[str]
    shown: set[str] = attrs.field(factory=set[str])
    pause: Callable[[], contextlib.AbstractContextManager[object]] | None = None
    _pending: list[str] = attrs.field(factory=list[str])
    _held: list[str] | None = None
    _mid_line: bool = False
    _flushed_at: float = -math.inf
    _due: trio.Event = attrs.field(factory=trio.Event)

    def write(self, text: str) -> int:
        if not text:
            return 0
        (self._pending if self._held is None else self._held).append(text)
        self._mid_line = not text.endswith("\n")
        return len(text)

    def flush(self) -> None:
        """Write what is pending (unless held) and flush the target."""
        if self._held is None:
            if self._pending:
                text = "".join(self._pending)
                self._pending.clear()
                self.target.write(text)
            self.target.flush()

    def flush_soon(self) -> None:
        """:meth:`flush` now if the last flush is :data:`FLUSH_INTERVAL` old, else
        leave it to :meth:`flusher`, by then."""
        now = trio.current_time()
        if now - self._flushed_at >= FLUSH_INTERVAL:
            self._flushed_at = now
            self.flush()
        else:
            self._due.set()

    async def flusher(self) -> None:
        """Run while the turn prints: flushes what :meth:`flush_soon` left."""
        while True:
            await self._due.wait()
            self._due = trio.Event()
            await trio.sleep_until(self._flushed_at + FLUSH_INTERVAL)
            self._flushed_at = trio.current_time()
            self.flush()

    def isatty(self) -> bool:
        return self.target.isatty()

    def show_call(self, tool_use_id: str, name: str, input: Mapping[str, Any]) -> None:
        """List the call ``→ Name(input)`` on a line of its own, once."""
        if tool_use_id in self.shown:
            return
        self.shown.add(tool_use_id)
        self.write(("\n" if self._mid_line else "") + f"  → {name}({preview(dict(input), 60)})\n")
        self.flush()

    @contextlib.contextmanager
    def held(self) -> Generator[None]:
        """Hold every write back for the block (what was written before goes out
        first, and the live view, if any, pauses); write them all when it ends."""
        self.flush()
        with self.pause() if self.pause is not None else contextlib.nullcontext():
            self._held = []
            try:
                yield
            finally:
                held, self._held = self._held, None
                self._pending += held
                self.flush()


@final
@attrs.define(eq=False)
class Asker:
    """The ``ask_callback`` of the command's permission rules.

    Args:
        out: the turn's output (the call is shown there, and held while asking).
        err: where the no-terminal hint goes.
        read_answer: writes the question and returns the answer, None when there is
            no terminal to ask (or the input ended).
        show_calls: list the call on *out* before asking (not into ``--json`` output).
    """

    out: HeldOutput
    err: IO[str]
    read_answer: Callable[[str], Awaitable[str | None]]
    show_calls: bool = True
    _hinted: set[str] = attrs.field(factory=set[str])
    _lock: trio.Lock = attrs.field(factory=trio.Lock)

    async def __call__(self, tool: Any, input: Mapping[str, Any], ctx: Any) -> Allow | Deny:
        async with self._lock:  # one question at a time
            if self.show_calls:
                self.out.show_call(ctx.tool_use_id, tool.name, input)
            seen = self.show_calls and self.out.isatty()  # the call is just above
            shown = "" if seen else f"({preview(dict(input), 100)})"
            with self.out.held():
                answer = await self.read_answer(f"Allow {tool.name}{shown}? [y/N] ")
        if answer is None:
            if tool.name not in self._hinted:
                self._hinted.add(tool.name)
                self.err.write(f"trio-agent: {tool.name}: {no_terminal_message(tool.name)}\n")
                self.err.flush()
            return Deny(no_terminal_message(tool.name))
        if answer.strip().lower() in ("y", "yes"):
            return Allow()
        return Deny("The user said no.")
