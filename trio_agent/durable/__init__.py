"""Durable, distributed turns over DBOS (``pip install 'trio-agent[durable]'``).

A worker (``trio-agent worker --app module:agent``) runs the turns that clients
submit (:meth:`DurableClient.submit`); both share one database: a SQLite file (the
embedded default) or Postgres (many workers on many machines, one queue). A turn
is the unit of durability: a worker killed mid-turn leaves it pending, and the
worker restarted with the same executor id (or, once the dead worker's heartbeat is
older than its lease, a live worker) re-runs it from its start, answering
each model call and each tool call whose result was recorded from the record
(:mod:`._journal`). The history lives in the database (:class:`SqlSessionStore`).
"""

from .. import _util
from . import _extra as _extra  # first: without dbos, say which extra to install
from ._agent import Agent as Agent
from ._agent import load_agent as load_agent
from ._client import DurableClient as DurableClient
from ._client import TurnHandle as TurnHandle
from ._client import TurnSummary as TurnSummary
from ._errors import DurableError as DurableError
from ._journal import current_turn_id as current_turn_id
from ._journal import idempotency_key as idempotency_key
from ._store import SqlSessionStore as SqlSessionStore
from ._worker import default_database_url as default_database_url
from ._worker import open_worker as open_worker
from ._worker import run_worker as run_worker

__all__ = [
    "Agent",
    "DurableClient",
    "DurableError",
    "SqlSessionStore",
    "TurnHandle",
    "TurnSummary",
    "current_turn_id",
    "default_database_url",
    "idempotency_key",
    "load_agent",
    "open_worker",
    "run_worker",
]

_util.fixup_module_metadata(__name__, globals())
