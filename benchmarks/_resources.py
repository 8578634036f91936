"""The resources benchmarks share within one run: the scripted model's server process
and the corpus of files the scenario tools read. Each is made on first use, kept on
the :class:`~benchmarks._config.Config`, and removed by its closer when the run ends."""

from __future__ import annotations

import select
import subprocess
import sys
import tempfile
from functools import partial
from pathlib import Path

from ._config import Config
from ._scenarios import make_corpus

#: Seconds the server process may take to print its URL.
SERVER_START_TIMEOUT = 60.0


def server_url(config: Config) -> str:
    """The base URL of the benchmark's server process, started on first use.

    The server stays in this process's process group (so killing the group from
    outside reaches it too) and exits on its own when its stdin closes, which also
    happens when this process dies. The closer, which the CLI runs however the run
    ends (error, KeyboardInterrupt), closes its stdin and kills it if it is still
    there shortly after.
    """
    if config.server is None:
        root = Path(__file__).resolve().parent.parent
        proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks", "serve"],
            cwd=root,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        config.closers.append(partial(stop_server, proc))
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], SERVER_START_TIMEOUT)
        url = proc.stdout.readline().strip() if ready else ""
        if not url.startswith("http://"):
            stop_server(proc)
            said = f"said {url!r}" if ready else f"said nothing in {SERVER_START_TIMEOUT:.0f} s"
            raise RuntimeError(f"the benchmark server did not start ({said})")
        config.server = url
    return config.server


def stop_server(proc: subprocess.Popen[str]) -> None:
    """Ask the server to stop (close its stdin), then kill it if it has not."""
    if proc.poll() is not None:
        return
    try:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        pass
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def corpus(config: Config) -> Path:
    """The directory of files the scenario tools read, made on first use."""
    if config.corpus is None:
        tmp = tempfile.TemporaryDirectory(prefix="trio-agent-bench-")
        config.closers.append(tmp.cleanup)
        files = 4 if config.quick else 24
        config.corpus = make_corpus(Path(tmp.name), files=files)
    return config.corpus
