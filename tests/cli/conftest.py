"""Running the real ``trio-agent`` command in a subprocess (real pipes, real signals)."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from subprocess import PIPE

import attrs
import pytest
import trio

#: The command, run from this tree (PYTHONPATH is inherited).
CLI = (sys.executable, "-m", "trio_agent._cli")


@attrs.define(eq=False)
class Command:
    """A running ``trio-agent``: its output so far, read by background tasks."""

    process: trio.Process
    out: bytearray = attrs.field(factory=bytearray)
    err: bytearray = attrs.field(factory=bytearray)
    _changed: trio.Event = attrs.field(factory=trio.Event)
    _closed: int = 0

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def pump(self, stream: trio.abc.ReceiveStream, into: bytearray) -> None:
        async for chunk in stream:
            into += chunk
            self._notify()
        self._closed += 1
        self._notify()

    async def until(self, text: str, *, where: str = "out") -> None:
        """Wait until *text* has appeared on stdout (or ``where="err"``)."""
        buffer = self.out if where == "out" else self.err
        while text.encode() not in buffer:
            if self._closed == 2:
                raise AssertionError(f"{text!r} never came; stderr: {self.err.decode()}")
            await self._changed.wait()

    def ctrl_c(self) -> None:
        """Ctrl+C: SIGINT to the command."""
        self.process.send_signal(signal.SIGINT)

    async def send(self, text: str) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send_all(text.encode())

    async def close_stdin(self) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.aclose()

    async def wait(self) -> int:
        return await self.process.wait()

    @property
    def stdout(self) -> str:
        return self.out.decode()

    @property
    def stderr(self) -> str:
        return self.err.decode()


def cli_env(**extra: str) -> dict[str, str]:
    """The environment of the command: no real key, no debug, 80 columns."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "TRIO_AGENT"))}
    env |= {"COLUMNS": "80", "PYTHONUNBUFFERED": "1", "ANTHROPIC_API_KEY": "sk-test"}
    return env | extra


@asynccontextmanager
async def open_cli(
    args: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None
) -> AsyncIterator[Command]:
    """Start ``trio-agent *args*``; leaving the block waits for it to exit (killing it
    if the block raised)."""
    process = await trio.lowlevel.open_process(
        [*CLI, *args],
        stdin=PIPE,
        stdout=PIPE,
        stderr=PIPE,
        env=dict(env if env is not None else cli_env()),
        cwd=cwd,
    )
    command = Command(process)
    async with trio.open_nursery() as nursery:
        assert process.stdout is not None
        assert process.stderr is not None
        nursery.start_soon(command.pump, process.stdout, command.out)
        nursery.start_soon(command.pump, process.stderr, command.err)
        try:
            yield command
        except BaseException:
            process.kill()
            raise
        finally:
            await process.wait()


def assert_clean_stderr(err: str) -> None:
    """No traceback, no exception group: what a person may read."""
    assert "Traceback" not in err
    assert "ExceptionGroup" not in err
    assert "KeyboardInterrupt" not in err


@attrs.define(eq=False)
class Terminal:
    """A ``trio-agent`` on a pseudo-terminal: stdin, stdout and stderr all a tty."""

    process: trio.Process
    master: trio.lowlevel.FdStream
    screen: bytearray = attrs.field(factory=bytearray)

    async def until(self, text: str, *, after: int = 0) -> int:
        """Read until *text* shows (past offset *after*); its offset in :attr:`screen`."""
        while (at := self.screen.find(text.encode(), after)) < 0:
            try:
                chunk = await self.master.receive_some()
            except OSError:  # EIO: the command exited, the terminal is gone
                chunk = b""
            if not chunk:
                raise AssertionError(f"{text!r} never came; the screen: {self.text}")
            self.screen += chunk
        return at

    async def type(self, keys: str) -> None:
        await self.master.send_all(keys.encode())

    @property
    def text(self) -> str:
        return self.screen.decode(errors="replace")


@asynccontextmanager
async def open_terminal(
    args: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None
) -> AsyncIterator[Terminal]:
    """Start ``trio-agent *args*`` on a new pty; leaving the block kills what is left."""
    import pty
    import termios

    master, slave = pty.openpty()
    attrs_ = termios.tcgetattr(slave)
    attrs_[1] &= ~termios.ONLCR  # "\n" stays "\n" on the screen
    termios.tcsetattr(slave, termios.TCSANOW, attrs_)
    try:
        process = await trio.lowlevel.open_process(
            [*CLI, *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=dict(env if env is not None else cli_env()),
            cwd=cwd,
            start_new_session=True,
        )
    finally:
        os.close(slave)
    terminal = Terminal(process, trio.lowlevel.FdStream(master))
    try:
        yield terminal
    finally:
        if process.returncode is None:
            process.kill()
        with trio.move_on_after(10, shield=True):
            await process.wait()
        await terminal.master.aclose()


class Cli:
    """The ``cli`` fixture: ``cli.open(args)``, ``cli.terminal(args)`` (a pty), ``cli.env(...)``, ``cli.clean(stderr)``."""

    open = staticmethod(open_cli)
    terminal = staticmethod(open_terminal)
    env = staticmethod(cli_env)
    clean = staticmethod(assert_clean_stderr)


@pytest.fixture(scope="session")
def cli() -> Cli:
    """Run the real ``trio-agent`` in a subprocess (see :class:`Cli`)."""
    return Cli()
