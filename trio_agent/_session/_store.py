"""SessionStore: where a conversation's history lives between turns.

A store maps a session id to its history. :class:`JsonlSessionStore` keeps one
JSONL transcript per session in a directory (the format of :mod:`._transcript`);
``trio_agent.durable.SqlSessionStore`` keeps them in the durable engine's database.

Example::

    store = JsonlSessionStore("sessions/")
    history = store.load("alice")
    ...  # run a turn from history
    store.append("alice", new_messages)
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Protocol, final, runtime_checkable

import attrs

from .._exceptions import TranscriptError
from .._messages import Message
from ._transcript import TranscriptWriter, read_transcript

__all__ = ["JsonlSessionStore", "SessionStore"]

# A session id names a file: no separators, no dot-dot, no control characters.
_SESSION_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:@-]{0,199}$")


def check_session_id(session_id: object) -> str:
    """*session_id* if it is a usable id (1-200 of ``A-Za-z0-9_.:@-``), else a TranscriptError."""
    if not isinstance(session_id, str) or not _SESSION_ID.match(session_id):
        raise TranscriptError(f"not a valid session id: {session_id!r:.80}")
    return session_id


@runtime_checkable
class SessionStore(Protocol):
    """Where each session's history lives between turns.

    ``load`` returns the history valid for the Messages API (every tool_use
    answered); ``append`` adds the messages of one turn, all or none.
    """

    def load(self, session_id: str) -> tuple[Message, ...]:
        """The history of *session_id*; empty for a session never seen."""
        ...

    def append(self, session_id: str, messages: Sequence[Message]) -> None:
        """Add *messages* (one turn's) at the end of *session_id*'s history."""
        ...


@final
@attrs.frozen
class JsonlSessionStore:
    """One JSONL transcript per session, ``<directory>/<session_id>.jsonl``.

    A turn's messages are appended line by line and fsynced; a crash mid-append
    leaves a torn last line that :meth:`load` drops (see :func:`read_transcript`).
    """

    directory: str = attrs.field(converter=os.fspath)
    model: str = attrs.field(default="unknown", kw_only=True)

    def path(self, session_id: str) -> str:
        return os.path.join(self.directory, check_session_id(session_id) + ".jsonl")

    def load(self, session_id: str) -> tuple[Message, ...]:
        path = self.path(session_id)
        if not os.path.exists(path):
            return ()
        return read_transcript(path).messages

    def append(self, session_id: str, messages: Sequence[Message]) -> None:
        path = self.path(session_id)
        truncate_to = read_transcript(path).valid_length if os.path.exists(path) else None
        os.makedirs(self.directory, exist_ok=True)
        writer = TranscriptWriter.open(path, model=self.model, truncate_to=truncate_to)
        try:
            for message in messages:
                writer.append(message)
            writer.sync()
        finally:
            writer.close()
