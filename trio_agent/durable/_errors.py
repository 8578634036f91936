"""The durable package's error."""

from __future__ import annotations

from .. import TrioAgentError

__all__ = ["DurableError"]


class DurableError(TrioAgentError):
    """The durable engine cannot do what was asked (bad URL or app, no database...)."""
