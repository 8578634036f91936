"""Shared parts of the durable tests: the loopback scripted model that answers each
session by the state of its conversation, and worker subprocesses."""

from __future__ import annotations

import atexit
import collections
import contextlib
import json
import os
import pathlib
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from typing import Final

import dbos  # noqa: F401  (the durable extra is part of the test extra: missing is a failure)
import pytest
import trio

from trio_agent import TextBlock, ToolUseBlock
from trio_agent.durable import DurableClient, TurnHandle, TurnSummary
from trio_agent.testing import (
    Faults,
    ScriptedAnswer,
    ScriptedModel,
    Timing,
    process_exited,
    serve_scripted_model,
)

HERE = pathlib.Path(__file__).parent
ROOT = HERE.parent.parent
FAST = Timing(first_event_delay=0.0, token_delay=0.0)


#: Seconds the gate call's answer of a prompt with "cut-stream" stalls before its end.
CUT_STALL = 3.0


class TurnModel(ScriptedModel):
    """Answers each request by where its conversation is: effect, then gate, then text.

    Counts the assistant messages since the last prompt (a user message with text),
    so any number of sessions can interleave on one server. For a prompt with
    "cut-stream", the gate call's answer stalls ``cut_stall`` seconds after the
    gate's tool_use block (before ``message_delta``): the gate runs (tools start
    mid-stream) while its answer is not yet recorded. ``asked`` counts the requests
    by (prompt, step).
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.asked: collections.Counter[tuple[str, int]] = collections.Counter()
        self.cut_stall = CUT_STALL

    def respond(self, method, path, headers, content):
        body = json.loads(content)
        messages = body.get("messages", [])
        step = 0
        prompt = ""
        for m in messages:
            if m["role"] == "user":
                if isinstance(m["content"], str):
                    step, prompt = 0, m["content"]
                elif any(b.get("type") == "text" for b in m["content"]):
                    step = 0
                    prompt = next(b["text"] for b in m["content"] if b.get("type") == "text")
            else:
                step += 1
        n = sum(1 for m in messages if m["role"] == "assistant")
        self.asked[prompt, step] += 1
        faults = Faults()
        if step == 0:
            blocks = [ToolUseBlock(f"toolu_effect_{n}", "effect", {"note": prompt})]
        elif step == 1:
            # A fresh id each time: the answer asked again differs, as a real model's does.
            blocks = [ToolUseBlock(f"toolu_gate_{n}_{self.asked[prompt, step]}", "gate", {})]
            if "cut-stream" in prompt:
                end = len(ScriptedAnswer(blocks=blocks, timing=FAST).events()) - 2
                faults = Faults(stall_before_event=end, stall_seconds=self.cut_stall)
        else:
            blocks = [TextBlock(f"done: {prompt}")]
        self.append(ScriptedAnswer(blocks=blocks, timing=FAST, faults=faults))
        return super().respond(method, path, headers, content)


@pytest.fixture
def turn_model() -> TurnModel:
    return TurnModel()


@pytest.fixture
async def model_url(turn_model: TurnModel) -> AsyncIterator[str]:
    async with serve_scripted_model(turn_model) as url:
        yield url


class Workers:
    """Worker subprocesses (``trio-agent worker``); killed at the end of the test."""

    def __init__(self, directory: pathlib.Path, model_url: str) -> None:
        self.directory = directory
        self.model_url = model_url
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(
        self,
        database_url: str,
        *,
        executor_id: str = "w1",
        concurrency: int = 8,
        app: str = "durable_app:agent",
        lease: float | None = None,
    ):
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(ROOT), str(HERE), *filter(None, [env.get("PYTHONPATH")])]
        )
        env["DURABLE_TEST_DIR"] = str(self.directory)
        env["DURABLE_TEST_MODEL_URL"] = self.model_url
        code = "import sys; from trio_agent._cli import main; sys.exit(main())"
        argv = [sys.executable, "-c", code, "worker", "--app", app]
        argv += ["--database-url", database_url, "--concurrency", str(concurrency)]
        argv += ["--executor-id", executor_id]
        if lease is not None:
            argv += ["--lease", str(lease)]
        path = self.directory / f"worker-{executor_id}-{len(self.procs)}.log"
        with open(path, "wb") as log:
            proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(proc)
        return proc

    def kill9(self, proc: subprocess.Popen[bytes]) -> None:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert proc.returncode == -signal.SIGKILL

    def logs(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in self.directory.glob("worker-*.log"))

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.fixture
def workers(tmp_path: pathlib.Path, model_url: str) -> Iterator[Workers]:
    w = Workers(tmp_path, model_url)
    try:
        yield w
    finally:
        w.close()


#: Seconds a wait on worker processes may take before the test fails, saying where it
#: stood: a bound against a hang (far beyond any run's time), not a timing. Under
#: pytest-timeout's own bound, whose signal lands in Trio's loop and leaves the run
#: broken for the tests after it.
HANG: Final = 200.0


async def wait_for(
    predicate, what: str, workers: Workers | None = None, *, bound: float = HANG
) -> None:
    """Poll *predicate* until true; fail (with the workers' logs) if a worker died
    first, or after *bound* seconds."""
    with trio.move_on_after(bound) as scope:
        while not predicate():
            if workers is not None:
                for proc in workers.procs:
                    if proc.poll() not in (None, -signal.SIGKILL):
                        pytest.fail(
                            f"a worker exited ({proc.returncode}) waiting for {what}:\n"
                            + workers.logs()
                        )
            await trio.sleep(0.02)
    if scope.cancelled_caught:
        logs = "" if workers is None else "\n" + workers.logs()
        pytest.fail(f"still waiting for {what} after {bound:g} s{logs}")


@pytest.fixture(name="wait_for")
def wait_for_fixture():
    """:func:`wait_for`, for test modules (which never import conftest)."""
    return wait_for


async def wait_all(
    client: DurableClient, handles: list[TurnHandle], workers: Workers, *, bound: float = HANG
) -> list[TurnSummary]:
    """Each turn's summary, in order; past *bound* seconds the test fails, with the
    status of each turn not done, the workers' heartbeats and their logs."""
    summaries: list[TurnSummary] = []
    with trio.move_on_after(bound) as scope:
        for handle in handles:
            summaries.append(await handle.wait())
    if scope.cancelled_caught:
        left = {h.turn_id: h.status() for h in handles[len(summaries) :]}
        beats = client.store.workers()
        pytest.fail(
            f"turns not done after {bound:g} s: {left}\nheartbeats: {beats}\n{workers.logs()}"
        )
    return summaries


@pytest.fixture(name="wait_all")
def wait_all_fixture():
    """:func:`wait_all`, for test modules."""
    return wait_all


def _postgres_bin() -> pathlib.Path | None:
    found = sorted(pathlib.Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    if found:
        return found[-1].parent
    initdb = shutil.which("initdb")
    return pathlib.Path(initdb).parent if initdb else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresCluster:
    """A throwaway PostgreSQL cluster (initdb + pg_ctl on a temp dir and a free port).

    Run as the current user, or as ``nobody`` when that is root (Postgres refuses
    root). :meth:`stop` stops the server and removes its directory, whatever
    :meth:`start` got to; it runs on every path: the fixture's finalizer, a failed
    start, and ``atexit`` (registered before anything is created) for a run that
    ends without its finalizers. It then checks that no process of the cluster
    survives. Only a SIGKILL of the test run itself leaves one behind.
    """

    STOP_TIMEOUT = 30.0

    def __init__(self, bindir: pathlib.Path, port: int | None = None) -> None:
        self.bindir = bindir
        self.port = port if port is not None else _free_port()
        self.directory: pathlib.Path | None = None  # None again once removed
        self.created: pathlib.Path | None = None  # the directory start() made, kept
        self.pids: set[int] = set()  # the postmaster and its children, seen while running
        self._prefix: list[str] = []

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/trio_agent"

    @property
    def data(self) -> pathlib.Path:
        assert self.directory is not None
        return self.directory / "data"

    def start(self) -> str:
        atexit.register(self.stop)
        try:
            self.directory = self.created = pathlib.Path(tempfile.mkdtemp(prefix="trio-agent-pg-"))
            if os.geteuid() == 0:
                nobody = pwd.getpwnam("nobody")
                os.chown(self.directory, nobody.pw_uid, nobody.pw_gid)
                self._prefix = ["runuser", "-u", "nobody", "--"]
            self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8")
            self.start_server()
        except BaseException as exc:
            log = self.directory / "log" if self.directory is not None else None
            if log is not None and log.exists():
                exc.add_note("server log:\n" + log.read_text(errors="replace"))
            self.stop()
            raise
        return self.url

    def start_server(self) -> None:
        """Start the server (again, after :meth:`stop_server`)."""
        options = f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1"
        options += " -c max_connections=200"
        log = str(self.directory / "log")
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", log, "-w", "start")
        self.pids |= self.processes()

    def stop_server(self) -> None:
        """Stop the server (``immediate``), keeping its data: the database going away."""
        self.pids |= self.processes()
        # If pg_ctl fails, stop() kills what is left.
        with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def _run(self, program: str, *argv: str) -> None:
        command = [*self._prefix, str(self.bindir / program), *argv]
        done = subprocess.run(
            command, capture_output=True, cwd=self.directory, timeout=120, check=False
        )
        if done.returncode != 0:
            output = (done.stdout + done.stderr).decode(errors="replace")
            raise RuntimeError(f"{program} exited {done.returncode}:\n{output}")

    def postmaster_pid(self) -> int | None:
        """The server's pid, from ``postmaster.pid`` (None before it started)."""
        if self.directory is None:
            return None
        try:
            return int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None

    def processes(self) -> set[int]:
        """The live processes of this cluster: the postmaster and its children."""
        pid = self.postmaster_pid()
        if pid is None or not _alive(pid):
            return set()
        return {pid, *(child for child, parent in _parents().items() if parent == pid)}

    def stop(self) -> None:
        """Stop the server (``immediate``; SIGKILL if that fails) and remove the directory.

        Idempotent. Raises if a process of the cluster is still alive after a bounded
        wait, so a leak fails the run instead of passing unseen.
        """
        atexit.unregister(self.stop)
        if self.directory is None:
            return
        self.pids |= self.processes()
        if self.pids:
            self.stop_server()
        survivors = _wait_gone(self.pids, self.STOP_TIMEOUT)
        for pid in survivors:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        survivors = _wait_gone(survivors, self.STOP_TIMEOUT)
        shutil.rmtree(self.directory, ignore_errors=True)
        self.directory = None
        if survivors:
            raise RuntimeError(f"PostgreSQL processes survived the fixture: {sorted(survivors)}")


def _alive(pid: int) -> bool:
    """True while *pid* runs (a zombie nobody reaped counts as gone)."""
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def _parents() -> dict[int, int]:
    """Every live process's parent, from /proc."""
    parents: dict[int, int] = {}
    for entry in pathlib.Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rpartition(")")[2].split()[1])
    return parents


def _wait_gone(pids: set[int], timeout: float) -> set[int]:
    """Wait up to *timeout* seconds for *pids* to exit; return those still alive."""
    deadline = time.monotonic() + timeout
    return {p for p in pids if not process_exited(p, timeout=deadline - time.monotonic())}


@pytest.fixture(scope="session")
def postgres_cluster() -> type[PostgresCluster]:
    """:class:`PostgresCluster`, for the test of the fixture itself."""
    return PostgresCluster


class Cluster:
    """A :class:`PostgresCluster` started for a fixture (skipped without the binaries,
    but not in CI: ``TRIO_AGENT_REQUIRE_POSTGRES=1``, set by ``.ci/run``, fails).

    :meth:`stop` stops only the server (a test's database going away) and
    :meth:`start` starts it again; :meth:`remove` stops it and removes its directory
    (:meth:`PostgresCluster.stop`: also at exit, and leak-checked).
    """

    def __init__(self) -> None:
        bindir = _postgres_bin()
        if bindir is None:
            if os.environ.get("TRIO_AGENT_REQUIRE_POSTGRES"):
                pytest.fail("PostgreSQL binaries (initdb, pg_ctl) not found")
            pytest.skip("PostgreSQL binaries (initdb, pg_ctl) not found")
        self.cluster = PostgresCluster(bindir)
        self.url = self.cluster.start()
        self.port = self.cluster.port
        self.data = self.cluster.data

    def start(self) -> None:
        self.cluster.start_server()

    def stop(self) -> None:
        self.cluster.stop_server()

    def remove(self) -> None:
        self.cluster.stop()


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A throwaway PostgreSQL cluster for the session (see :class:`Cluster`).

    Run as the current user, or as ``nobody`` when that is root (Postgres refuses
    root). Skipped only when the binaries are absent, and then not in CI
    (``TRIO_AGENT_REQUIRE_POSTGRES=1``, set by ``.ci/run``): there it fails.
    """
    cluster = Cluster()
    try:
        yield cluster.url
    finally:
        cluster.remove()


@pytest.fixture
def own_postgres() -> Iterator[Cluster]:
    """A cluster of the test's own, which it may stop (the database going away)."""
    cluster = Cluster()
    try:
        yield cluster
    finally:
        cluster.remove()
