"""The stdio transport: a server process, spoken to over its stdin and stdout.

Ours rather than the SDK's ``stdio_client`` because a server that misbehaves must
cost one call, not the loop or the block:

- The process itself is watched (``Process.wait``: a pidfd on Linux), not only its
  stdout: a server that dies while a child it started still holds the pipe is seen
  dead at once; its calls end with an error result.
- The server runs in its own session (so its own process group), and that group is
  sent SIGKILL whenever the transport closes, however the server ended: nothing it
  started survives the block (short of a child that leaves the group on purpose).
- Lines are framed and parsed by :mod:`._wire`: bounded length, bad UTF-8 / JSON /
  JSON-RPC as error answers, capped content and notification floods; a big line is
  parsed in a worker thread so the loop never waits on it.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any

import anyio
import trio
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

from ._config import StdioServerConfig
from ._wire import LineFramer, Oversized, Reader

__all__ = ["open_stdio"]

logger = logging.getLogger("trio_agent.mcp")

#: Seconds the server has to exit once its stdin is closed, then again after SIGTERM.
STOP_GRACE = 2.0
#: Seconds the reader may go on reading once the server has exited.
EXIT_DRAIN = 0.5
#: Lines at least this long are parsed in a worker thread.
_THREAD_PARSE = 256 * 1024


def _kill_group(pgid: int, sig: int) -> None:
    # The group outlives its leader while any member lives; once every member is
    # gone the id is free again, which is what the lookup error says.
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


@asynccontextmanager
async def open_stdio(
    server: str,
    config: StdioServerConfig,
    *,
    stderr: int,
    on_exit: Callable[[int], None],
    reader: Reader | None = None,
) -> AsyncGenerator[tuple[Any, Any]]:
    """Start the server; yield the session's (read, write) streams; stop it on leaving.

    *on_exit* is called with the return code as soon as the server exits, before its
    stdout ends (a child may hold it).
    """
    process = await trio.lowlevel.open_process(
        [config.command, *config.args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        env=get_default_environment() | dict(config.env),
        cwd=config.cwd,
        start_new_session=True,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    stdin, stdout = process.stdin, process.stdout
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    reader = Reader(server) if reader is None else reader
    drained = trio.Event()
    stopping = False

    async def read() -> None:
        framer = LineFramer()
        try:
            async with read_writer:
                while chunk := await stdout.receive_some(65536):
                    for line in framer.feed(bytes(chunk)):
                        big = isinstance(line, Oversized) or len(line) >= _THREAD_PARSE
                        if big:
                            message = await trio.to_thread.run_sync(reader.read, line)
                        else:
                            message = reader.read(line)
                        if message is not None:
                            await read_writer.send(message)
        except (
            trio.BrokenResourceError,
            trio.ClosedResourceError,
            anyio.BrokenResourceError,
            anyio.ClosedResourceError,
        ):
            pass  # our own shutdown, or the session is gone
        finally:
            drained.set()

    async def write() -> None:
        try:
            async with write_reader:
                async for item in write_reader:
                    data = reader.encode(item.message)
                    if isinstance(data, bytes):
                        await stdin.send_all(data + b"\n")
                    elif data is not None:  # that request cannot be sent: its error answer
                        await read_writer.send(data)
        except (
            trio.BrokenResourceError,
            trio.ClosedResourceError,
            anyio.BrokenResourceError,
            anyio.ClosedResourceError,
            OSError,
        ):
            # The server no longer reads: let the session see the connection end.
            await read_writer.aclose()

    async def watch() -> None:
        code = await process.wait()
        # Whatever the server started dies with it; then its stdout ends (unless a
        # child left the group), or we stop waiting for that.
        _kill_group(process.pid, signal.SIGKILL)
        if not stopping:  # an exit we asked for is no news
            on_exit(code)
        with trio.move_on_after(EXIT_DRAIN):
            await drained.wait()
        await read_writer.aclose()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(read)
        nursery.start_soon(write)
        nursery.start_soon(watch)
        try:
            yield read_stream, write_stream
        finally:
            stopping = True
            with trio.CancelScope(shield=True):
                await _stop(process, stdin)
                _kill_group(process.pid, signal.SIGKILL)
                await stdout.aclose()
                for stream in (read_stream, write_stream, read_writer, write_reader):
                    await stream.aclose()
            nursery.cancel_scope.cancel()


async def _stop(process: trio.Process, stdin: trio.abc.SendStream) -> None:
    """Close stdin, wait, SIGTERM the group, wait, SIGKILL it: every wait bounded."""
    with suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        await stdin.aclose()
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with trio.move_on_after(STOP_GRACE):
            await process.wait()
            return
        _kill_group(process.pid, sig)
    with trio.move_on_after(STOP_GRACE):
        await process.wait()
    if process.returncode is None:
        logger.warning("MCP server process %d is still alive after SIGKILL", process.pid)
