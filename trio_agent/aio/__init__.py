"""trio_agent from asyncio applications (FastAPI, Starlette, aiohttp...), in Trio's
guest mode.

The running asyncio loop gets one Trio run (:func:`trio.lowlevel.start_guest_run`),
started on first use and stopped when ``asyncio.run`` shuts the loop down, or
explicitly with ``async with open_guest_run():`` (an app's lifespan). The turns run
in it under Trio's structured concurrency; asyncio code drives them with the same
API, events and results as Trio code:

- :class:`Session`: ``trio_agent.Session``'s arguments; ``async with
  session.submit(prompt) as events: async for event in events``, ``await
  session.run(prompt)``, ``interrupt()``, ``abort()``, ``Session.resume(...)``.
- :func:`query` and :func:`run`: ``trio_agent.query`` and ``trio_agent.run`` from
  asyncio.
- :func:`run_in_trio` (await any Trio function) and :func:`open_in_trio` (hold a
  Trio async context manager open: MCP servers, a worker...).

Events cross from Trio through a bounded buffer (:class:`EventStream`): a slow
consumer slows the turn, memory stays bounded. Cancellation crosses both ways:
cancelling the asyncio task (the HTTP client went away) aborts the turn and waits
for it to end (every tool_use answered, processes reaped) before
``CancelledError`` is raised; an error of the turn is raised in asyncio as the same
exception.

Example (``examples/fastapi_app.py`` is a whole app)::

    session = trio_agent.aio.Session(client, tools, model=trio_agent.DEFAULT_MODEL)

    async def stream(prompt):
        async with session.submit(prompt) as events:
            async for event in events:
                yield event
"""

from .. import _util
from ._context import open_in_trio as open_in_trio
from ._guest import GuestRun as GuestRun
from ._guest import GuestRunClosedError as GuestRunClosedError
from ._guest import GuestRunStatistics as GuestRunStatistics
from ._guest import current_guest_run as current_guest_run
from ._guest import open_guest_run as open_guest_run
from ._guest import run_in_trio as run_in_trio
from ._session import Session as Session
from ._session import query as query
from ._session import run as run
from ._stream import DEFAULT_BUFFER as DEFAULT_BUFFER
from ._stream import EventStream as EventStream
from ._stream import EventStreamStatistics as EventStreamStatistics
from ._turn import TurnStream as TurnStream

__all__ = [
    "DEFAULT_BUFFER",
    "EventStream",
    "EventStreamStatistics",
    "GuestRun",
    "GuestRunClosedError",
    "GuestRunStatistics",
    "Session",
    "TurnStream",
    "current_guest_run",
    "open_guest_run",
    "open_in_trio",
    "query",
    "run",
    "run_in_trio",
]

_util.fixup_module_metadata(__name__, globals())
