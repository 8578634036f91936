"""The CLI's answers to what MCP servers ask of the user: OAuth sign-in and elicitation.

Sign-in: the authorization page is opened in the browser (and its URL printed, for a
machine without one); the redirect is received on 127.0.0.1. Elicitation: the
server's message and each field of its form are asked on the terminal (a field left
empty takes its default); without a terminal the request is cancelled.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import webbrowser
from collections.abc import Callable, Mapping
from typing import Any, TextIO, cast

import trio

from ..mcp import (
    Authorize,
    Elicit,
    ElicitationAnswer,
    ElicitationRequest,
    loopback_authorize,
)

__all__ = ["terminal_authorize", "terminal_elicit"]


def _open_browser(url: str) -> None:
    """Open *url* in a graphical browser, if there is one (without a display,
    ``webbrowser`` would start a text browser on this terminal); the printed URL
    is the way otherwise."""
    if sys.platform == "darwin" or os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        with contextlib.suppress(webbrowser.Error):
            webbrowser.open(url)


def terminal_authorize(err: TextIO | None = None) -> Authorize:
    """Open the sign-in page (and print its URL); receive the redirect on 127.0.0.1."""

    def open_url(url: str) -> None:
        out = err or sys.stderr
        print(f"MCP sign-in needed: open this page to authorize trio-agent:\n  {url}", file=out)
        out.flush()
        _open_browser(url)

    return loopback_authorize(open_url)


def _parse(text: str, prop: Mapping[str, Any]) -> Any:
    kind = prop.get("type")
    if kind == "boolean":
        if text.lower() in ("y", "yes", "true", "1"):
            return True
        if text.lower() in ("n", "no", "false", "0"):
            return False
        raise ValueError("answer yes or no")
    if kind == "integer":
        return int(text)
    if kind == "number":
        return float(text)
    if kind == "array":
        return [part.strip() for part in text.split(",") if part.strip()]
    return text


def terminal_elicit(
    read: Callable[[str], str] = input,
    err: TextIO | None = None,
    *,
    interactive: bool | None = None,
) -> Elicit:
    """An ``elicit=`` asking on the terminal (*read* is called in a worker thread)."""

    async def elicit(request: ElicitationRequest) -> ElicitationAnswer:
        out = err or sys.stderr
        tty = sys.stdin.isatty() if interactive is None else interactive
        if not tty:
            await trio.lowlevel.checkpoint()
            print(
                f"MCP server {request.server!r} asked for input; no terminal: cancelled", file=out
            )
            return ElicitationAnswer("cancel")

        async def ask(prompt: str) -> str:
            return (await trio.to_thread.run_sync(read, prompt)).strip()

        print(f"MCP server {request.server!r} asks: {request.message}", file=out)
        if request.mode == "url":
            print(f"  page: {request.url}", file=out)
            choice = await ask("open it? [y]es / [n]o (decline) / [c]ancel: ")
        else:
            choice = await ask("answer? [y]es / [n]o (decline) / [c]ancel: ")
        if choice.lower().startswith("n"):
            return ElicitationAnswer("decline")
        if choice.lower().startswith("c"):
            return ElicitationAnswer("cancel")
        if request.mode == "url":
            if request.url:
                _open_browser(request.url)
            return ElicitationAnswer("accept")
        content: dict[str, Any] = {}
        properties: Any = (request.schema or {}).get("properties") or {}
        required: Any = (request.schema or {}).get("required") or []
        for name, raw in cast("Mapping[str, Any]", properties).items():
            prop: Mapping[str, Any] = (
                cast("Mapping[str, Any]", raw) if isinstance(raw, Mapping) else {}
            )
            label = str(prop.get("title") or name)
            hints = [str(prop["description"])] if prop.get("description") else []
            if "enum" in prop:
                hints.append("one of " + ", ".join(map(str, prop["enum"])))
            if "default" in prop:
                hints.append(f"default {json.dumps(prop['default'])}")
            hint = f" ({'; '.join(hints)})" if hints else ""
            while True:
                text = await ask(f"  {label}{hint}: ")
                if not text:
                    if name in required and "default" not in prop:
                        print("  (required)", file=out)
                        continue
                    break  # the default, if any, is filled in by the library
                try:
                    content[name] = _parse(text, prop)
                except ValueError as exc:
                    print(f"  {exc}", file=out)
                    continue
                break
        return ElicitationAnswer("accept", content)

    return elicit
