"""The asyncio faces of :class:`trio_agent.Session` and :func:`trio_agent.query`.

Each wraps the Trio object and runs it in the loop's guest run (:mod:`._guest`);
the events and results are the Trio API's own values.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, final

from .._loop import QueryEvent, TurnControl
from .._loop import query as trio_query
from .._messages import ContentBlock, Message, Usage
from .._model import ModelClient
from .._options import TurnOptions
from .._permissions import PermissionDecision
from .._session import Session as TrioSession
from .._session import run as trio_run
from .._tools import Tool
from ._guest import call_in_trio, running_guest_run
from ._stream import DEFAULT_BUFFER
from ._turn import TurnStream

__all__ = ["Session", "query", "run"]


@final
class Session:
    """:class:`trio_agent.Session` for asyncio code: the same arguments, the same
    events and results; its turns run in the loop's Trio guest run.

    Example::

        session = trio_agent.aio.Session(client, tools, model=trio_agent.DEFAULT_MODEL)
        async with session.submit("Fix the failing test") as events:
            async for event in events:      # asyncio: a FastAPI handler, ...
                ...
        result = await session.run("And now the docs")

    Leaving ``submit``'s block early (a ``break``, an error, the task cancelled)
    aborts the turn and waits for it to end: the history is valid and the turn's
    processes are gone when the block is left. :attr:`session` is the Trio
    ``Session`` itself (for Trio code in the same run).

    Args:
        args, kwargs: those of :class:`trio_agent.Session`.
    """

    def __init__(self, client: ModelClient, tools: Sequence[Tool], **kwargs: Any) -> None:
        self._session = TrioSession(client, tools, **kwargs)

    @classmethod
    def resume(
        cls, path: str | os.PathLike[str], client: Any, tools: Sequence[Tool], **kwargs: Any
    ) -> Session:
        """:meth:`trio_agent.Session.resume`: continue the transcript at *path*."""
        return cls.wrap(TrioSession.resume(path, client, tools, **kwargs))

    @classmethod
    def wrap(cls, session: TrioSession) -> Session:
        """The asyncio face of an existing Trio *session*."""
        if not isinstance(session, TrioSession):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"wrap() takes a trio_agent.Session, not {type(session).__name__}")
        self = cls.__new__(cls)
        self._session = session
        return self

    def __repr__(self) -> str:
        return f"<aio.Session of {self._session!r:.200}>"

    @property
    def session(self) -> TrioSession:
        """The Trio session (use it only from Trio code)."""
        return self._session

    @property
    def messages(self) -> tuple[Message, ...]:
        """The history (see :attr:`trio_agent.Session.messages`)."""
        return self._session.messages

    @property
    def usage(self) -> Usage:
        """Token usage over every turn, with its cost."""
        return self._session.usage

    @property
    def cost(self) -> float | None:
        """The USD cost so far, or None when a price was unknown."""
        return self._session.cost

    @property
    def running(self) -> bool:
        """Whether a turn is running."""
        return self._session.running

    @property
    def pending_approvals(self) -> Any:
        """The tool calls that await approval, or None."""
        return self._session.pending_approvals

    @property
    def options(self) -> TurnOptions:
        """The options of each turn (settable between turns)."""
        return self._session.options

    @options.setter
    def options(self, value: TurnOptions) -> None:
        self._session.options = value

    @property
    def context(self) -> Any:
        """The tools' shared context."""
        return self._session.context

    def submit(
        self,
        prompt: str | Sequence[ContentBlock] | None = None,
        *,
        approvals: Mapping[str, PermissionDecision] | None = None,
        max_buffered: int = DEFAULT_BUFFER,
    ) -> TurnStream[QueryEvent]:
        """``async with session.submit(prompt) as events: async for event in events``:
        one turn, as :meth:`trio_agent.Session.submit`; the turn runs at most
        *max_buffered* events ahead of the consumer.

        Raises:
            trio.BusyResourceError, ApprovalError: at the ``async with``, as in Trio.
        """
        session = self._session
        return TurnStream(
            lambda: session.submit(prompt, approvals=approvals), session.abort, max_buffered
        )

    async def run(self, prompt: str | Sequence[ContentBlock] | None = None, **kwargs: Any) -> Any:
        """:meth:`trio_agent.Session.run`: one turn to its end; returns its
        ``RunResult`` or raises the turn's error (the same exception). Cancelled,
        it aborts the turn and waits for it to end before ``CancelledError``."""
        session = self._session
        started = False

        async def run() -> Any:
            nonlocal started
            started = True  # and the turn is the session's running one, no checkpoint between
            return await session.run(prompt, **kwargs)

        def abort() -> bool:
            if not (started and session.running):
                return False  # not started yet: cancelled in Trio instead
            session.abort()
            return True

        return await call_in_trio(run, abort)

    def interrupt(self) -> None:
        """:meth:`trio_agent.Session.interrupt` (scheduled in the Trio run)."""
        self._in_trio(self._session.interrupt)

    def abort(self) -> None:
        """:meth:`trio_agent.Session.abort` (scheduled in the Trio run): the turn's
        events end with its ``TurnEnd``."""
        self._in_trio(self._session.abort)

    def _in_trio(self, fn: Callable[[], None]) -> None:
        run = running_guest_run()
        if run is not None:  # else no turn runs: nothing to do
            run.call_soon(fn)

    def close(self) -> None:
        """Close the transcript file."""
        self._session.close()

    async def aclose(self) -> None:
        """:meth:`trio_agent.Session.aclose` (in Trio): the transcript, and the client
        if the session made it."""
        await call_in_trio(self._session.aclose)

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


async def run(client: ModelClient, prompt: str | Sequence[ContentBlock], **kwargs: Any) -> Any:
    """:func:`trio_agent.run` for asyncio: one turn to its end; returns its
    ``RunResult`` or raises the turn's error (the same exception). The keywords are
    ``run``'s except ``control``; cancelled, the turn is aborted and has ended before
    ``CancelledError`` is raised."""
    if "control" in kwargs:
        raise TypeError("aio.run() makes its own TurnControl: cancel the task to abort")
    control = TurnControl()

    def abort() -> bool:
        control.abort()  # honoured even before the turn starts
        return True

    return await call_in_trio(lambda: trio_run(client, prompt, control=control, **kwargs), abort)


def query(
    client: ModelClient,
    messages: Sequence[Message],
    *,
    max_buffered: int = DEFAULT_BUFFER,
    **kwargs: Any,
) -> TurnStream[QueryEvent]:
    """:func:`trio_agent.query` for asyncio: ``async with aio.query(client, messages,
    tools=..., model=...) as events: async for event in events``.

    The keywords are ``query``'s (``tools``, ``model``, ``system``, ``max_tokens``,
    ``options``...) except ``control``: leave the block (or cancel the task) to abort
    the turn.
    """
    if "control" in kwargs:
        raise TypeError("aio.query() makes its own TurnControl: leave the block to abort")
    control = TurnControl()
    return TurnStream(
        lambda: trio_query(client, messages, control=control, **kwargs),
        control.abort,
        max_buffered,
    )
