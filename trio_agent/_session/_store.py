"""Session ids: the names a session store files a conversation under.

A session persists one way: ``Session(transcript_path=...)`` writes its JSONL
transcript and ``Session.resume(path, ...)`` reads it back. Durable turns keep their
histories in the database instead (``trio_agent.durable.SqlSessionStore``), under
ids checked here.
"""

from __future__ import annotations

import re

from .._exceptions import TranscriptError

__all__ = ["check_session_id"]

# A session id may name a file or a row: no separators, no dot-dot, no control characters.
_SESSION_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:@-]{0,199}")


def check_session_id(session_id: object) -> str:
    """*session_id* if it is a usable id (1-200 of ``A-Za-z0-9_.:@-``), else a TranscriptError."""
    if not isinstance(session_id, str) or not _SESSION_ID.fullmatch(session_id):
        raise TranscriptError(f"not a valid session id: {session_id!r:.80}")
    return session_id
