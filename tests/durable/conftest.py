"""Shared parts of the durable tests: the loopback scripted model that answers each
session by the state of its conversation, and worker subprocesses."""

from __future__ import annotations

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
from collections.abc import AsyncIterator, Iterator

import dbos  # noqa: F401  (the durable extra is part of the test extra: missing is a failure)
import pytest
import trio

from trio_agent import TextBlock, ToolUseBlock
from trio_agent.testing import ScriptedAnswer, ScriptedModel, Timing, serve_scripted_model

HERE = pathlib.Path(__file__).parent
ROOT = HERE.parent.parent
FAST = Timing(first_event_delay=0.0, token_delay=0.0)


class TurnModel(ScriptedModel):
    """Answers each request by where its conversation is: effect, then gate, then text.

    Counts the assistant messages since the last prompt (a user message with text),
    so any number of sessions can interleave on one server.
    """

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
        if step == 0:
            blocks = [ToolUseBlock(f"toolu_effect_{n}", "effect", {"note": prompt})]
        elif step == 1:
            blocks = [ToolUseBlock(f"toolu_gate_{n}", "gate", {})]
        else:
            blocks = [TextBlock(f"done: {prompt}")]
        self.append(ScriptedAnswer(blocks=blocks, timing=FAST))
        return super().respond(method, path, headers, content)


@pytest.fixture
async def model_url() -> AsyncIterator[str]:
    async with serve_scripted_model(TurnModel()) as url:
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


async def wait_for(predicate, what: str, workers: Workers | None = None) -> None:
    """Poll *predicate* until true; fail (with the workers' logs) if a worker died first."""
    while not predicate():
        if workers is not None:
            for proc in workers.procs:
                if proc.poll() not in (None, -signal.SIGKILL):
                    pytest.fail(
                        f"a worker exited ({proc.returncode}) waiting for {what}:\n"
                        + workers.logs()
                    )
        await trio.sleep(0.02)


@pytest.fixture(name="wait_for")
def wait_for_fixture():
    """:func:`wait_for`, for test modules (which never import conftest)."""
    return wait_for


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


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A throwaway PostgreSQL cluster (initdb + pg_ctl on a temp dir and a free port).

    Run as the current user, or as ``nobody`` when that is root (Postgres refuses
    root). Skipped only when the binaries are absent, and then not in CI
    (``TRIO_AGENT_REQUIRE_POSTGRES=1``, set by ``.ci/run``): there it fails.
    """
    bindir = _postgres_bin()
    if bindir is None:
        if os.environ.get("TRIO_AGENT_REQUIRE_POSTGRES"):
            pytest.fail("PostgreSQL binaries (initdb, pg_ctl) not found")
        pytest.skip("PostgreSQL binaries (initdb, pg_ctl) not found")
    directory = pathlib.Path(tempfile.mkdtemp(prefix="trio-agent-pg-"))
    prefix: list[str] = []
    if os.geteuid() == 0:
        nobody = pwd.getpwnam("nobody")
        os.chown(directory, nobody.pw_uid, nobody.pw_gid)
        prefix = ["runuser", "-u", "nobody", "--"]
    data = directory / "data"
    port = _free_port()

    def run(*argv: str) -> None:
        subprocess.run([*prefix, *argv], check=True, capture_output=True, cwd=directory)

    run(str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "-E", "UTF8")
    options = f"-p {port} -k {directory} -c listen_addresses=127.0.0.1 -c max_connections=200"
    run(
        str(bindir / "pg_ctl"),
        "-D",
        str(data),
        "-o",
        options,
        "-l",
        str(directory / "log"),
        "-w",
        "start",
    )
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/trio_agent"
    finally:
        subprocess.run(
            [*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
            capture_output=True,
            cwd=directory,
        )
        shutil.rmtree(directory, ignore_errors=True)
