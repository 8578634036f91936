"""The ``trio-agent`` command measured from outside, as a user runs it (issue 32).

Each sample starts the real command in a new process (the ``trio-agent`` script of
this interpreter) against a loopback scripted server in this process; the process's
CPU and peak RSS are its own (``os.wait4``), its output goes to a pipe this process
reads.

- ``cli_version``: the wall time of ``trio-agent --version`` (target 0.3 s);
- ``cli_exit``: for ``trio-agent run``, from the server's last byte of the final
  answer (``message_stop``) to the process's exit (target 0.2 s);
- ``cli_cpu``: the process CPU of ``run`` streaming 20,000 text deltas, each SSE
  event sent in its own chunk, plain and ``--json``: the whole process, and the
  part the deltas cost (the whole minus a one-delta answer's run);
- ``cli_printer``: ``run``'s printer alone, in process (20,000 text deltas through a
  memory channel, its output to a pipe), minus the channel alone;
- ``peers-cli``: the same answers through the real Claude Code CLI (``claude -p``,
  installed by ``npm install --prefix`` into a cache directory) and through
  ``trio-agent run``, interleaved: CPU per 20,000 deltas, wall time and peak RSS
  (skipped, saying why, when npm cannot install it).

The server's last send is timed where it happens (:class:`_TimedStream` wraps the
connection's stream): nothing polls.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import trio

from ._config import Config
from ._report import Series

__all__ = [
    "bench_cli_cpu",
    "bench_cli_printer",
    "bench_exit",
    "bench_peers_cli",
    "bench_version",
    "claude_code",
    "command",
    "measure",
    "text_answer",
]

#: Text deltas in the CPU benchmarks' answer.
DELTAS = 20_000
#: A pause per event: each SSE event is its own chunk on the socket.
EVENT_GAP = 1e-5
#: The Claude Code CLI the peers-cli benchmark installs (the version of issue 32).
CLAUDE_CODE = "@anthropic-ai/claude-code@2.1.197"


def command() -> list[str]:
    """The ``trio-agent`` command of this interpreter (``-m`` from a source tree)."""
    script = Path(sys.executable).with_name("trio-agent")
    return [str(script)] if script.exists() else [sys.executable, "-m", "trio_agent._cli"]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "TRIO_AGENT"))}
    return env | {"ANTHROPIC_API_KEY": "sk-ant-bench", "COLUMNS": "80"} | extra


def text_answer(deltas: int, *, gap: float = 0.0) -> Any:
    """A scripted answer of *deltas* text deltas of four characters, *gap* seconds
    apart."""
    from trio_agent import TextBlock
    from trio_agent.testing import ScriptedAnswer, Timing

    return ScriptedAnswer(
        blocks=[TextBlock("word" * deltas)], timing=Timing(text_chunk_size=4, token_delay=gap)
    )


class _TimedStream(trio.abc.HalfCloseableStream):
    """A server connection's stream that notes when it last sent bytes."""

    def __init__(self, inner: trio.SocketStream, sent: list[float]) -> None:
        self.inner = inner
        self.sent = sent

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.inner.send_all(data)
        self.sent.append(time.perf_counter())

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self.inner.receive_some(max_bytes)

    async def send_eof(self) -> None:
        await self.inner.send_eof()

    async def aclose(self) -> None:
        await self.inner.aclose()


@attrs.define
class _MessagesOnly:
    """Answers ``POST .../v1/messages`` from *answers*, in order; anything else (Claude
    Code's ``HEAD /`` and side requests) with an empty 200."""

    answers: list[Any]

    def respond(
        self, method: str, path: str, headers: Iterable[tuple[str, str]], content: bytes
    ) -> Any:
        from trio_agent.testing import HTTPErrorAnswer, ScriptedModel

        if method == "POST" and path.endswith("/v1/messages") and self.answers:
            answer = self.answers.pop(0)
        else:
            answer = HTTPErrorAnswer(status=200, body={})
        return ScriptedModel([answer]).respond(method, path, list(headers), content)


@asynccontextmanager
async def _serving(answers: list[Any], sent: list[float]) -> AsyncIterator[str]:
    from trio_agent.testing._server import (
        _serve_connection,  # pyright: ignore[reportPrivateUsage]
    )

    router = _MessagesOnly(answers)

    async def handler(stream: trio.SocketStream) -> None:
        await _serve_connection(router, _TimedStream(stream, sent))  # type: ignore[arg-type]

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, handler, 0, host="127.0.0.1"))
        host, port = listeners[0].socket.getsockname()[:2]
        yield f"http://{host}:{port}"
        nursery.cancel_scope.cancel()


@attrs.frozen
class Sample:
    """One run of a command: wall time, process CPU (s), peak RSS (MB), the exit's
    delay after the server's last send (s), and the bytes it printed."""

    wall: float
    cpu: float
    rss_mb: float
    exit: float
    printed: int


def _run_process(argv: Sequence[str], env: dict[str, str], cwd: str) -> tuple[float, Any, int, int]:
    """Run *argv* to its end, reading its stdout; ``(end time, rusage, status, bytes)``."""
    process = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, env=env, cwd=cwd
    )
    assert process.stdout is not None
    printed = 0
    with process.stdout:
        while chunk := process.stdout.read1(65536):
            printed += len(chunk)
    _, status, usage = os.wait4(process.pid, 0)
    ended = time.perf_counter()
    process.returncode = os.waitstatus_to_exitcode(status)
    return ended, usage, process.returncode, printed


async def _measure(answer: Any, argv_of: Any, env: dict[str, str]) -> Sample:
    sent: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as workspace:
        async with _serving([answer], sent) as url:
            argv, env = argv_of(url, workspace), env | {"ANTHROPIC_BASE_URL": url}
            start = time.perf_counter()
            ended, usage, status, printed = await trio.to_thread.run_sync(
                _run_process, argv, env, workspace
            )
    if status != 0:
        raise RuntimeError(f"{argv[0]} exited {status}")
    return Sample(
        wall=ended - start,
        cpu=usage.ru_utime + usage.ru_stime,
        rss_mb=usage.ru_maxrss / 1024,
        exit=ended - sent[-1],
        printed=printed,
    )


def _trio_agent(args: Sequence[str]) -> Any:
    def argv(url: str, workspace: str) -> list[str]:
        return [*command(), "run", "--base-url", url, "--workspace", workspace, *args, "say it"]

    return argv


def measure(deltas: int, args: Sequence[str] = (), *, gap: float = 0.0) -> Sample:
    """One ``trio-agent run [args] PROMPT`` against an answer of *deltas* deltas."""
    return trio.run(_measure, text_answer(deltas, gap=gap), _trio_agent(args), _env())


def bench_version(config: Config) -> list[Series]:
    row = Series("cli_version", "trio_agent", "`trio-agent --version` wall time", "s")
    for _ in range(max(config.repeat, 5)):
        start = time.perf_counter()
        subprocess.run([*command(), "--version"], check=True, capture_output=True, env=_env())
        row.samples.append(time.perf_counter() - start)
    return [row]


def bench_exit(config: Config) -> list[Series]:
    row = Series("cli_exit", "trio_agent", "`run`: process exit after the final message_stop", "s")
    row.note = "from the server's last send of a 20-delta answer to the process's exit (wait4)"
    for _ in range(max(config.repeat, 5)):
        row.samples.append(measure(20).exit)
    return [row]


def bench_cli_cpu(config: Config) -> list[Series]:
    deltas = 2_000 if config.quick else DELTAS
    rows: list[Series] = []
    for label, args in (("plain", ()), ("--json", ("--json",))):
        whole = Series("cli_cpu", "trio_agent", f"`run` {label}: process CPU", "s")
        part = Series("cli_cpu", "trio_agent", f"`run` {label}: CPU per {deltas:,} deltas", "s")
        part.note = "the process's CPU minus that of a one-delta answer's run"
        for _ in range(config.repeat):
            base = measure(1, args).cpu
            run = measure(deltas, args, gap=EVENT_GAP)
            whole.samples.append(run.cpu)
            part.samples.append(run.cpu - base)
        rows += [whole, part]
    return rows


# -- the printer alone, in process ---------------------------------------------------------


async def _printer_cpu(deltas: int, as_json: bool | None) -> float:
    """Process CPU of *deltas* text deltas through a memory channel into ``run``'s
    printer (``print_events``), its output on a pipe to a ``cat`` process; with
    *as_json* None, the channel alone (no printer)."""
    import io

    from trio_agent import TextDelta
    from trio_agent._cli._agent import print_events
    from trio_agent._cli._ask import HeldOutput
    from trio_agent._cli._timeline import TurnRecorder

    # The blocking pipe is the point: the CLI writes its stdout so, too.
    cat = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)  # noqa: ASYNC220
    assert cat.stdin is not None
    target = io.TextIOWrapper(cat.stdin, encoding="utf-8")
    send, receive = trio.open_memory_channel[Any](0)

    async def produce() -> None:
        async with send:
            for _ in range(deltas):
                await send.send(TextDelta("word", 0))

    start = time.process_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(produce)
        if as_json is None:
            async for _ in receive:
                pass
        else:
            recorder = TurnRecorder(trio.current_time)
            await print_events(receive, recorder, HeldOutput(target), as_json=as_json)
    cpu = time.process_time() - start
    target.close()
    cat.wait()
    return cpu


def bench_cli_printer(config: Config) -> list[Series]:
    deltas = 2_000 if config.quick else DELTAS
    rows: list[Series] = []
    for label, as_json in (("the channel alone", None), ("plain", False), ("--json", True)):
        metric = f"{deltas:,} text deltas into run's printer, {label}: CPU"
        row = Series("cli_printer", "trio_agent", metric, "s")
        if as_json is not None:
            row.note = "in process, the output to a pipe (a cat process)"
        for _ in range(max(config.repeat, 3)):
            row.samples.append(trio.run(_printer_cpu, deltas, as_json))
        rows.append(row)
    return rows


# -- the real Claude Code CLI -----------------------------------------------------------


def claude_code() -> tuple[Path | None, str]:
    """The ``claude`` executable (installed with npm into a cache directory on first
    use), or None and why not."""
    prefix = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "trio-agent-bench"
    prefix /= "claude-code"
    claude = prefix / "node_modules" / ".bin" / "claude"
    if not claude.exists():
        npm = shutil.which("npm")
        if npm is None:
            return None, "npm is not installed: cannot install the Claude Code CLI"
        done = subprocess.run(
            [npm, "install", "--prefix", str(prefix), CLAUDE_CODE],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if done.returncode != 0 or not claude.exists():
            why = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no claude"]
            return None, f"npm install {CLAUDE_CODE} failed: {why[0]}"
    with tempfile.TemporaryDirectory(prefix="bench-claude-home-") as home:
        version = subprocess.run(
            [str(claude), "--version"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env=_claude_env(home),  # no auto-update of the binary in the background
        )
    if version.returncode != 0:
        return None, f"claude --version failed: {version.stderr.strip()[-200:]}"
    return claude, version.stdout.strip()


def _claude(claude: Path, home: str, args: Sequence[str]) -> Any:
    def argv(url: str, workspace: str) -> list[str]:
        return [str(claude), "-p", "say it", "--model", "claude-sonnet-4-5", *args]

    return argv


def _claude_env(home: str) -> dict[str, str]:
    return _env(
        HOME=home,
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_TELEMETRY="1",
        DISABLE_AUTOUPDATER="1",
    )


def bench_peers_cli(config: Config) -> list[Series]:
    deltas = 2_000 if config.quick else DELTAS
    claude, about = claude_code()
    modes = (
        ("plain", (), ("--output-format", "text")),
        (
            "JSON lines",
            ("--json",),
            ("--output-format", "stream-json", "--verbose", "--include-partial-messages"),
        ),
    )
    rows: list[Series] = []
    for label, ours, theirs in modes:
        metric = f"CPU per {deltas:,} text deltas, {label}"
        mine = Series("peers-cli", "trio-agent run", metric, "s", subject="claude -p")
        peer = Series("peers-cli", "claude -p", metric, "s")
        rss_mine = Series("peers-cli", "trio-agent run", f"peak RSS, {label}", "MB")
        rss_peer = Series("peers-cli", "claude -p", f"peak RSS, {label}", "MB")
        if claude is None:
            for row in (mine, peer, rss_mine, rss_peer):
                row.skipped = about
            rows += [mine, peer, rss_mine, rss_peer]
            continue
        peer.note = f"Claude Code {about}, the same loopback server and answers"
        with tempfile.TemporaryDirectory(prefix="bench-claude-home-") as home:
            for _ in range(config.repeat):  # interleaved
                for row, rss, argv_of, env in (
                    (mine, rss_mine, _trio_agent(ours), _env()),
                    (peer, rss_peer, _claude(claude, home, theirs), _claude_env(home)),
                ):
                    base = trio.run(_measure, text_answer(1), argv_of, env)
                    run = trio.run(_measure, text_answer(deltas, gap=EVENT_GAP), argv_of, env)
                    row.samples.append(run.cpu - base.cpu)
                    rss.samples.append(run.rss_mb)
        rows += [mine, peer, rss_mine, rss_peer]
    return rows


if __name__ == "__main__":  # python -m benchmarks._command: a quick look
    import statistics

    for name, args in (("plain", ()), ("--json", ("--json",))):
        runs = [measure(DELTAS, args, gap=EVENT_GAP) for _ in range(3)]
        bases = [measure(1, args) for _ in range(3)]
        cpu = statistics.median(r.cpu for r in runs)
        base = statistics.median(r.cpu for r in bases)
        print(f"{name}: cpu {cpu:.3f} s, base {base:.3f} s, per {DELTAS} deltas {cpu - base:.3f} s")
        print(f"{name}: exit after the last send", [round(r.exit, 3) for r in bases])
