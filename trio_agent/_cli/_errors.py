"""What the command says when something goes wrong: one or two lines on stderr.

:func:`report_exception` turns whatever ended a command (an error, an exception
group out of a nursery, Ctrl+C) into an exit status and a short message, never a
traceback (``TRIO_AGENT_DEBUG=1`` shows it). :func:`describe_error` words an
error for a person: what was tried, how many attempts, the request id.
:class:`RetryReporter` prints each retry of the client as it happens.

Exit statuses: 0 done, 1 failed, 2 usage error, 130 interrupted (Ctrl+C), 141
broken pipe (``trio-agent ... | head``).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from typing import IO, Final

from .._exceptions import (
    APIConnectionError,
    APIError,
    APIStatusError,
    AuthenticationError,
    TrioAgentError,
)

__all__ = [
    "EXIT_BROKEN_PIPE",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_USAGE",
    "CommandError",
    "RetryReporter",
    "describe_error",
    "leaves",
    "prefixed",
    "print_error",
    "report_exception",
]

EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2
EXIT_INTERRUPTED: Final = 130
EXIT_BROKEN_PIPE: Final = 141

_CLIENT_LOGGER: Final = "trio_agent.client"


def leaves(exc: BaseException) -> Iterator[BaseException]:
    """The exceptions inside *exc*, exception groups flattened."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:  # pyright: ignore[reportUnknownVariableType]
            yield from leaves(inner)
    else:
        yield exc


def describe_error(
    exc: BaseException, *, endpoint: tuple[str, str] | None = None, attempts: int = 1
) -> str:
    """*exc* in one or two lines (no trailing newline), for a person.

    Args:
        exc: the error.
        endpoint: the URL the client posted to and the variable that sets its base
            URL (``_provider.endpoint_of``), named when it could not be reached.
        attempts: how many requests were made (1 + the retries seen).
    """
    tried = f" ({attempts} attempts)" if attempts > 1 else ""
    if isinstance(exc, APIConnectionError):
        where, variable = endpoint if endpoint is not None else ("the API", "the base URL")
        return f"cannot reach {where}{tried}: {exc}\ncheck the network, {variable} or --base-url"
    if isinstance(exc, AuthenticationError) and exc.status_code is None:
        return f"{type(exc).__name__}: {exc}"  # refused before anything was sent
    if isinstance(exc, APIStatusError):
        status = f"HTTP {exc.status_code} " if exc.status_code is not None else ""
        # The error's own text often starts with the status too: say it once.
        text = str(exc)
        if status and text.startswith(status.rstrip()):
            text = text[len(status) :].lstrip(": ") or text
        return f"the API answered {status}{type(exc).__name__}{tried}: {text}"
    if isinstance(exc, APIError | TrioAgentError):
        return f"{type(exc).__name__}: {exc}"
    if isinstance(exc, OSError) and exc.strerror:
        name = f" {exc.filename}" if exc.filename else ""
        return f"{exc.strerror}:{name}".rstrip(":")
    return (
        f"internal error: {type(exc).__name__}: {exc}\n"
        "(set TRIO_AGENT_DEBUG=1 to see the traceback, and please report it)"
    )


def report_exception(exc: BaseException, err: IO[str]) -> int:
    """Say what ended the command on *err*; returns the exit status.

    Ctrl+C anywhere in *exc* (also inside an exception group) is an interruption
    (130); a broken pipe is 141 and says nothing; anything else is described in
    one or two lines (:func:`describe_error`), the first error only when a group
    holds several. ``TRIO_AGENT_DEBUG=1`` re-raises instead.
    """
    found = list(leaves(exc))
    if any(isinstance(e, KeyboardInterrupt) for e in found):
        _write(err, "trio-agent: interrupted\n")
        return EXIT_INTERRUPTED
    if found and all(isinstance(e, BrokenPipeError) for e in found):
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    if os.environ.get("TRIO_AGENT_DEBUG"):
        raise exc
    if isinstance(exc, CommandError):
        _write(err, prefixed(str(exc)))
        return EXIT_USAGE
    first = next((e for e in found if not isinstance(e, BrokenPipeError)), exc)
    more = len(found) - 1
    text = describe_error(first)
    if more > 0:
        text += f" (and {more} more error{'s' if more > 1 else ''})"
    _write(err, prefixed(text))
    return EXIT_FAILED


def _silence_stdout() -> None:
    """Point file descriptor 1 at ``/dev/null``: the reader is gone, and the
    interpreter's last flush of ``sys.stdout`` must not print a traceback."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)
    except (OSError, ValueError):  # no real stdout (a test's capture): nothing to do
        pass


def prefixed(text: str) -> str:
    """*text* as lines on stderr: the first starts with ``trio-agent: error:``."""
    first, _, rest = text.partition("\n")
    return f"trio-agent: error: {first}\n" + (f"  {rest}\n" if rest else "")


def print_error(message: str) -> int:
    """Say *message* on stderr (``trio-agent: error: ...``); returns the usage status, 2."""
    print(f"trio-agent: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def _write(err: IO[str], text: str) -> None:
    try:
        err.write(text)
        err.flush()
    except (OSError, ValueError):  # stderr closed: nothing more to say
        pass


class RetryReporter(logging.Handler):
    """Prints each retry of the client on *err* as it happens, and counts them.

    Use as a context manager: it listens to the ``trio_agent.client`` logger
    while the block runs.
    """

    def __init__(self, err: IO[str]) -> None:
        super().__init__(logging.INFO)
        self.err = err
        self.retries = 0
        self._logger = logging.getLogger(_CLIENT_LOGGER)
        self._old_level = self._logger.level

    @property
    def attempts(self) -> int:
        """Requests made since the last :meth:`reset`: the retries plus one."""
        return self.retries + 1

    def reset(self) -> None:
        """Start counting again (a new request)."""
        self.retries = 0

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if not message.startswith("retry "):
            return
        self.retries += 1
        _write(self.err, f"trio-agent: {message}\n")

    def __enter__(self) -> RetryReporter:
        self._old_level = self._logger.level
        if not self._logger.isEnabledFor(logging.INFO):
            self._logger.setLevel(logging.INFO)
        self._logger.addHandler(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._logger.removeHandler(self)
        self._logger.setLevel(self._old_level)


class CommandError(Exception):
    """The command cannot run as asked: said in one or two lines, exit status 2."""
