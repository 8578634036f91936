"""The turn's timeline, as the CLI's live view, ``--json`` and the demo use it.

It lives in :mod:`trio_agent._session._timeline` (the session's transcript records
each model call's timeline with the same :class:`TurnRecorder`); this module names it
for the CLI.
"""

from __future__ import annotations

from .._session import (
    ModelCall,
    ToolRow,
    ToolState,
    TurnRecorder,
    instrument,
    printable,
)

__all__ = ["ModelCall", "ToolRow", "ToolState", "TurnRecorder", "instrument", "printable"]
