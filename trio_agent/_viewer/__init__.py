"""The local session viewer behind ``trio-agent view`` (read-only, 127.0.0.1 only).

:class:`Library` finds the sessions (transcript files, event logs, a durable
database: :mod:`._sources`), :mod:`._html` renders them (every string escaped, each
model call's timeline as SVG), and :func:`serve_viewer` serves them with hypercorn on
Trio (:mod:`._app`: GET only, the Host header checked). Needs the ``view`` extra
(hypercorn).
"""

from ._app import Library as Library
from ._app import ViewerApp as ViewerApp
from ._app import serve_viewer as serve_viewer
from ._sources import DatabaseSource as DatabaseSource
from ._sources import SessionView as SessionView
from ._sources import read_session as read_session

__all__ = ["DatabaseSource", "Library", "SessionView", "ViewerApp", "read_session", "serve_viewer"]
