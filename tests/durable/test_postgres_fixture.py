"""The throwaway PostgreSQL cluster of the durable tests leaves nothing behind: no
server process and no data directory, whether it is stopped by the fixture, by a
failed start, or by ``atexit`` when the process ends without the finalizer.

Real servers, real processes; every wait is bounded.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import time

import pytest

from trio_agent.testing import process_exited

HERE = pathlib.Path(__file__).parent


def _bindir() -> pathlib.Path:
    found = sorted(pathlib.Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    initdb = found[-1] if found else shutil.which("initdb")
    if initdb is None:
        if os.environ.get("TRIO_AGENT_REQUIRE_POSTGRES"):
            pytest.fail("PostgreSQL binaries (initdb, pg_ctl) not found")
        pytest.skip("PostgreSQL binaries (initdb, pg_ctl) not found")
    return pathlib.Path(initdb).parent


def _gone_within(pids: set[int], seconds: float) -> set[int]:
    deadline = time.monotonic() + seconds
    return {p for p in pids if not process_exited(p, timeout=deadline - time.monotonic())}


def test_stop_ends_every_process_and_removes_the_directory(postgres_cluster) -> None:
    cluster = postgres_cluster(_bindir())
    url = cluster.start()
    directory = cluster.directory
    pids = cluster.processes()
    try:
        assert url.startswith("postgresql://postgres@127.0.0.1:")
        assert cluster.postmaster_pid() in pids
        assert len(pids) > 1  # the postmaster and its children (checkpointer, ...)
        with socket.create_connection(("127.0.0.1", cluster.port), timeout=5):
            pass
    finally:
        cluster.stop()
    assert _gone_within(pids, 5) == set()
    assert directory is not None
    assert not directory.exists()
    cluster.stop()  # idempotent


def test_a_failed_start_leaves_nothing(postgres_cluster) -> None:
    # The port is taken: initdb succeeds, then the server cannot listen and pg_ctl fails.
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        cluster = postgres_cluster(_bindir(), port=taken.getsockname()[1])
        with pytest.raises(RuntimeError, match="pg_ctl exited"):
            cluster.start()
    assert cluster.created is not None
    assert not cluster.created.exists()
    assert cluster.directory is None
    assert cluster.processes() == set()


CHILD = """
import json, pathlib, sys
sys.path.insert(0, sys.argv[1])
from conftest import PostgresCluster
cluster = PostgresCluster(pathlib.Path(sys.argv[2]))
cluster.start()
print(json.dumps({"directory": str(cluster.directory), "pids": sorted(cluster.processes())}))
sys.stdout.flush()
# exits without calling stop(): only atexit can clean up
"""


def test_a_process_that_exits_without_the_finalizer_stops_its_cluster() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(HERE), str(_bindir())],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["pids"]  # the server was running when the process ended
    assert _gone_within(set(seen["pids"]), 5) == set()
    assert not pathlib.Path(seen["directory"]).exists()
