"""The benchmark's defence against hangs: a contestant whose server never answers gives
up at its sample timeout, and :func:`benchmarks._guard.sample` records that as a failed
sample of its row instead of hanging the run."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from benchmarks import _peers
from benchmarks._guard import sample
from benchmarks._report import Series
from benchmarks._turns import run_after_stream, run_query


@pytest.fixture
def silent_url() -> Iterator[str]:
    """A loopback port whose connections the kernel accepts but nobody ever answers."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        host, port = sock.getsockname()
        yield f"http://{host}:{port}/s/seed1/0.15"


def test_trio_contestants_give_up_at_their_timeout(silent_url: str, tmp_path: Path) -> None:
    with pytest.raises(trio.TooSlowError):
        run_query(silent_url, tmp_path, timeout=0.2)
    with pytest.raises(trio.TooSlowError):
        run_after_stream(silent_url, tmp_path, parallel=True, timeout=0.2)


def test_asyncio_peer_gives_up_at_its_timeout(silent_url: str, tmp_path: Path) -> None:
    # The test extra installs the SDK: a missing tool runner is a failure, not a skip.
    assert _peers.sdk_version() is None, _peers.sdk_version()
    with pytest.raises(TimeoutError):
        _peers.sdk_turn(silent_url, tmp_path, False, 0.2)


def test_a_hung_sample_is_a_reported_failure(
    silent_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    row = Series("e2e.seed1", "after-stream sequential", "turn wall time", "s")
    got = sample(
        row, lambda t: run_after_stream(silent_url, tmp_path, parallel=False, timeout=t), 0.2
    )
    assert got is None
    assert row.samples == []
    assert len(row.errors) == 1
    assert "sample timeout" in row.errors[0]
    assert "e2e.seed1 / after-stream sequential: FAILED" in capsys.readouterr().err
    # Any other exception is a failed sample too; a value is a sample.
    assert sample(row, lambda t: 1 / 0, 1.0) is None
    assert "ZeroDivisionError" in row.errors[1]
    assert sample(row, lambda t: t * 2, 1.5) == 3.0
    assert row.samples == [3.0]


def test_watchdog_ends_a_process_cancellation_cannot_reach() -> None:
    # A hang no timeout can cancel (a blocking call): the watchdog dumps the stacks to
    # stderr and exits the process instead of hanging whoever runs it.
    code = (
        "import threading\nfrom benchmarks._guard import watchdog\n"
        "with watchdog(0.3):\n    threading.Event().wait(120)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode != 0
    assert "Timeout" in out.stderr
    assert 'File "<string>", line 4' in out.stderr  # the stack of the hung line
