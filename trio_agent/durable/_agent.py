"""An agent the durable worker can run: a name and a factory of sessions."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import final

import attrs

from .. import Session
from ._errors import DurableError

__all__ = ["Agent", "load_agent"]


@final
@attrs.frozen
class Agent:
    """A named agent: *factory* builds the :class:`~trio_agent.Session` of a session id.

    The factory sets the client, the tools and the options (model, system prompt,
    permissions, limits); the worker gives the session its history from the
    database and runs each turn durably. A transcript path is ignored: the
    history lives in the database.

    Example::

        def build(session_id: str) -> trio_agent.Session:
            return trio_agent.Session(trio_agent.AnthropicClient(), [read_tool],
                                      model=trio_agent.DEFAULT_MODEL)

        agent = trio_agent.durable.Agent("helper", build)
    """

    name: str
    factory: Callable[[str], Session]


def load_agent(spec: str) -> Agent:
    """The :class:`Agent` at ``module:attribute`` (``pkg.app:agent``).

    Raises:
        DurableError: the module cannot be imported, or has no such Agent.
    """
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise DurableError(f"--app wants module:attribute, got {spec!r:.200}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise DurableError(f"cannot import {module_name!r}: {exc}") from exc
    value: object = module
    for part in attribute.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise DurableError(f"{module_name!r} has no attribute {attribute!r}") from None
    if not isinstance(value, Agent):
        raise DurableError(f"{spec} is a {type(value).__name__}, not a trio_agent.durable.Agent")
    return value
