"""The viewer's web server: a small ASGI app, served by hypercorn on Trio.

Read-only and local: it answers GET and HEAD only, listens on 127.0.0.1 only, and
refuses a request whose ``Host`` header is not this server's own address (a page
of another site that a DNS rebinding points at 127.0.0.1 sends its own host name:
it gets a 403, never a session). Every answer forbids scripts but the viewer's own
(Content-Security-Policy), framing, and sniffing.

Routes: ``/`` (the session list), ``/s/<id>`` (a session), ``/api/list`` and
``/api/session/<id>`` (``{"version": ...}``: what the pages poll to update live),
``/static/viewer.css`` and ``/static/viewer.js`` (shipped in the wheel).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, MutableMapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Final, final

import trio

from ._html import list_page, session_page
from ._sources import DatabaseSource, FileSource, Item, SessionView, file_sessions

__all__ = ["Library", "ViewerApp", "serve_viewer"]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

_STATIC: Final = {
    "viewer.css": "text/css; charset=utf-8",
    "viewer.js": "text/javascript; charset=utf-8",
}
_SECURITY_HEADERS: Final = (
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:;"
        b" connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
)


@final
class Library:
    """Every session the viewer shows: files (and directories) and a database.

    Reading is blocking (files, SQL): the app calls it from a worker thread.
    """

    def __init__(self, paths: Iterable[str | Path], database: DatabaseSource | None = None):
        self.files = FileSource(tuple(Path(p) for p in paths))
        self.database = database
        self._where: dict[str, Path] = {}

    def sessions(self) -> list[SessionView]:
        views = file_sessions(self.files)
        # an error row has a page too (saying why); one whose file is gone: a 404
        self._where = {v.id: Path(v.where) for v in views}
        if self.database is not None:
            views.extend(self.database.sessions())
        return views

    def session(self, session_id: str) -> SessionView | None:
        path = self._where.get(session_id)
        if path is None:
            self.sessions()
            path = self._where.get(session_id)
        if path is not None:
            try:
                return self.files.read(path)
            except OSError:
                return None
        if self.database is not None:
            return next((v for v in self.database.sessions() if v.id == session_id), None)
        return None


def _list_version(views: Sequence[SessionView]) -> str:
    return str(hash(tuple(sorted((v.id, v.version) for v in views))) & 0xFFFFFFFF)


@final
class ViewerApp:
    """The ASGI app over a :class:`Library`.

    Attributes:
        allowed_hosts: the ``Host`` header values served (set once the port is known).
    """

    def __init__(self, library: Library) -> None:
        self.library = library
        self.allowed_hosts: frozenset[str] = frozenset()

    def allow_port(self, port: int) -> None:
        """Serve the names of this machine's loopback address at *port*, no other."""
        self.allowed_hosts = frozenset({f"127.0.0.1:{port}", f"localhost:{port}"})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        headers = {k.lower(): v for k, v in scope.get("headers", [])}
        host = headers.get(b"host", b"").decode("latin-1")
        if host not in self.allowed_hosts:
            await _respond(
                send, 403, b"refused: this viewer answers only requests for its own address\n"
            )
            return
        method = scope.get("method", "GET")
        if method not in ("GET", "HEAD"):
            await _respond(
                send, 405, b"the viewer is read-only\n", extra=((b"allow", b"GET, HEAD"),)
            )
            return
        status, body, content_type = await self._route(str(scope.get("path", "/")))
        await _respond(send, status, b"" if method == "HEAD" else body, content_type=content_type)

    async def _route(self, path: str) -> tuple[int, bytes, str]:
        html_type = "text/html; charset=utf-8"
        json_type = "application/json"
        if path == "/":
            views = await trio.to_thread.run_sync(self.library.sessions)
            return 200, _utf8(list_page(views, _list_version(views))), html_type
        if path == "/api/list":
            views = await trio.to_thread.run_sync(self.library.sessions)
            return 200, json.dumps({"version": _list_version(views)}).encode(), json_type
        if path.startswith("/s/") or path.startswith("/api/session/"):
            session_id = path.rsplit("/", 1)[-1]
            view = await trio.to_thread.run_sync(self.library.session, session_id)
            if view is None:
                return 404, b"no such session\n", "text/plain; charset=utf-8"
            if path.startswith("/api/"):
                return 200, json.dumps({"version": view.version}).encode(), json_type
            try:
                page = session_page(view)
            except Exception as exc:  # a file that defeats the page: this page only
                page = session_page(_broken(view, exc))
            return 200, _utf8(page), html_type
        if path.startswith("/static/"):
            name = path.removeprefix("/static/")
            if name in _STATIC:
                data = (resources.files("trio_agent._viewer") / "static" / name).read_bytes()
                return 200, data, _STATIC[name]
        return 404, b"not found\n", "text/plain; charset=utf-8"


def _broken(view: SessionView, exc: Exception) -> SessionView:
    """*view* as an error page: what went wrong showing it."""
    why = f"cannot show this session: {type(exc).__name__}: {exc!s:.300}"
    return SessionView(
        id=view.id,
        where=view.where,
        kind="error",
        title=view.title,
        end=why,
        updated=view.updated,
        items=[Item("note", text=why, level="error")],
        version=view.version,
    )


def _utf8(page: str) -> bytes:
    """*page* as UTF-8; a lone surrogate from a file (JSON can hold one) becomes ``?``."""
    return page.encode("utf-8", "replace")


async def _respond(
    send: Send,
    status: int,
    body: bytes,
    *,
    content_type: str = "text/plain; charset=utf-8",
    extra: tuple[tuple[bytes, bytes], ...] = (),
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", content_type.encode()),
                (b"content-length", str(len(body)).encode()),
                *_SECURITY_HEADERS,
                *extra,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def serve_viewer(
    library: Library,
    *,
    port: int = 0,
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve *library* on 127.0.0.1:*port* (0: any free port) until cancelled;
    ``task_status.started`` gets the URL.

    Raises:
        OSError: the port is taken.
    """
    from hypercorn.config import Config

    if port:
        _check_free(port)
    app = ViewerApp(library)
    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.accesslog = None
    config.errorlog = None
    config.graceful_timeout = 0.5

    async with trio.open_nursery() as nursery:
        binds: list[str] = await nursery.start(_serve, app, config)
        bound = binds[0]
        app.allow_port(int(bound.rsplit(":", 1)[1]))
        task_status.started(bound)


def _check_free(port: int) -> None:
    """Raise the OSError binding 127.0.0.1:*port* would (hypercorn leaks the socket of
    a failed bind: the check is made here first, the same way it binds)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(("127.0.0.1", port))


async def _serve(app: ViewerApp, config: Any, task_status: trio.TaskStatus[list[str]]) -> None:
    import hypercorn.trio

    server: Any = getattr(hypercorn.trio, "serve")  # noqa: B009 (its type is partly unknown)
    await server(app, config, task_status=task_status)
