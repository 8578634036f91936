"""Output with or without ``rich`` (the ``cli`` extra).

A core-only install (``pip install trio-agent``) has no ``rich``: the commands
then print plain text. :func:`console_for` gives a rich ``Console`` when rich is
installed, else a :class:`PlainConsole` that prints the same strings with their
style tags (``[bold]...[/]``) removed; :func:`escape` protects text that is not
markup.
"""

from __future__ import annotations

import errno
import re
import shutil
from typing import IO, TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["CLI_EXTRA", "PlainConsole", "console_for", "escape", "has_rich", "rich_console"]

#: What to install for the rich output.
CLI_EXTRA: Final = "pip install 'trio-agent[cli]'"

_STYLE_WORDS = "bold|dim|italic|cyan|green|red|yellow|magenta"
_TAG = re.compile(rf"\[/?(?:(?:{_STYLE_WORDS})\s*)*\]")


def has_rich() -> bool:
    """Whether ``rich`` can be imported."""
    try:  # at call time, as every rich import here: rich is an optional extra
        import rich.console  # noqa: F401  # pyright: ignore[reportUnusedImport]
    except ImportError:
        return False
    return True


def escape(text: str) -> str:
    """*text* safe to embed in markup (a no-op without rich)."""
    try:  # at call time: rich is an optional extra
        from rich.markup import escape as rich_escape
    except ImportError:
        return text
    return rich_escape(text)


class PlainConsole:
    """The part of rich's ``Console`` the commands use, in plain text."""

    def __init__(self, file: IO[str]) -> None:
        self.file = file
        #: As rich's: the terminal's columns, else ``$COLUMNS``, else 80.
        self.width = shutil.get_terminal_size().columns

    def print(self, text: object = "", *, style: str | None = None, **_: Any) -> None:
        self.file.write(_TAG.sub("", str(text)) + "\n")
        self.file.flush()


def rich_console(file: IO[str]) -> Console | None:
    """A rich ``Console`` on *file*, or None without rich.

    A closed pipe (``trio-agent demo | head``) raises ``BrokenPipeError`` out of
    its ``print``, as a plain ``write`` does: rich's own answer is ``SystemExit(1)``,
    which, raised inside a nursery, would read as an internal error.
    """
    try:  # at call time: rich is an optional extra
        from rich.console import Console
    except ImportError:
        return None

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            raise BrokenPipeError(errno.EPIPE, "the output was closed")

    return _Console(file=file, highlight=False)


def console_for(file: IO[str]) -> Any:
    """A rich ``Console`` on *file*, or a :class:`PlainConsole` without rich."""
    console = rich_console(file)
    return console if console is not None else PlainConsole(file)
