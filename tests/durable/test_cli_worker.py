"""``trio-agent worker`` and ``trio-agent submit``: arguments and clear errors."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conftest import Workers  # pyright: ignore

import json
import pathlib
import subprocess
import sys

import pytest
import trio

from trio_agent._cli import main
from trio_agent.durable import DurableClient, DurableError, load_agent

HERE = pathlib.Path(__file__).resolve().parent


@pytest.fixture(autouse=True)
def _app_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(HERE))


@pytest.mark.parametrize(
    ("app", "message"),
    [
        ("no_such_module_xyz:agent", "cannot import"),
        ("durable_app", "module:attribute"),
        (":agent", "module:attribute"),
        ("durable_app:missing", "no attribute"),
        ("durable_app:build", "not a trio_agent.durable.Agent"),
    ],
)
def test_worker_with_a_bad_app_says_why(
    app: str, message: str, capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path
) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    assert main(["worker", "--app", app, "--database-url", url]) == 1
    err = capsys.readouterr().err
    assert "DurableError" in err
    assert message in err
    with pytest.raises(DurableError, match=message):
        load_agent(app)


@pytest.mark.parametrize("value", ["0", "-3", "many"])
def test_worker_concurrency_must_be_positive(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["worker", "--app", "durable_app:agent", "--concurrency", value]) == 2
    assert "--concurrency" in capsys.readouterr().err


def test_worker_with_an_unsupported_database(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["worker", "--app", "durable_app:agent", "--database-url", "mysql://u@h/db"])
    assert code == 1
    assert "unsupported database" in capsys.readouterr().err


def test_submit_no_wait_enqueues_a_turn(
    capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path
) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    argv = ["submit", "alice", "hello", "--agent", "durable-test", "--database-url", url]
    assert main([*argv, "--no-wait"]) == 0
    turn_id = capsys.readouterr().out.strip()
    client = DurableClient.connect(url, agent="durable-test")
    try:
        from trio_agent.durable import TurnHandle

        assert TurnHandle(turn_id, client=client).status() == "ENQUEUED"
    finally:
        client.close()


@pytest.mark.parametrize("session", ["", "../etc/passwd", "a/b", "x" * 201, "nul\x00"])
def test_submit_refuses_bad_session_ids(
    session: str, capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path
) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    argv = ["submit", session, "hi", "--agent", "a", "--database-url", url, "--no-wait"]
    assert main(argv) == 1
    assert "not a valid session id" in capsys.readouterr().err


def test_the_parser_imports_neither_dbos_nor_the_durable_package() -> None:
    code = (
        "import sys\n"
        "from trio_agent._cli._main import build_parser\n"
        "args = build_parser().parse_args(['worker', '--app', 'm:a'])\n"
        "assert args.func is not None\n"
        "print(sorted(m for m in sys.modules if m == 'dbos' or m.startswith('trio_agent.durable')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout == "[]\n"


async def test_submit_waits_and_prints_the_summary(
    capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path, workers: Workers
) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    argv = ["submit", "carol", "hello", "--agent", "durable-test", "--database-url", url]
    await trio.to_thread.run_sync(lambda: main([*argv, "--no-wait"]))  # creates the database
    workers.start(url, executor_id="cli")
    assert await trio.to_thread.run_sync(main, argv) == 0
    lines = capsys.readouterr().out.splitlines()
    summary = json.loads(lines[-1])
    assert summary["session_id"] == "carol"
    assert summary["reason"] == "completed"
    assert summary["text"] == "done: hello"
    # The turn submitted first, without waiting, ran before it: one effect each.
    assert len((tmp_path / "effect-carol").read_text().splitlines()) == 2
    # A turn for an agent this worker does not have fails, and says why.
    wrong = ["submit", "dave", "hi", "--agent", "nobody-here", "--database-url", url]
    assert await trio.to_thread.run_sync(main, wrong) == 1
    err = capsys.readouterr().err
    assert "DurableError" in err
    assert "no agent named 'nobody-here'" in err


@pytest.mark.parametrize(
    ("command", "hidden"), [("worker", "dbos"), ("submit", "trio_agent.durable._journal")]
)
def test_without_the_extra_the_install_hint_is_printed_once(command: str, hidden: str) -> None:
    argv = (
        ["worker", "--app", "x:y"] if command == "worker" else ["submit", "s", "p", "--agent", "a"]
    )
    code = (
        f"import sys\nsys.modules[{hidden!r}] = None\n"
        "from trio_agent._cli import main\n"
        f"sys.exit(main({argv!r}))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert run.returncode == 1, run.stderr
    assert run.stderr.count("pip install 'trio-agent[durable]'") == 1, run.stderr
    assert run.stderr.startswith("trio-agent: "), run.stderr
    assert hidden in run.stderr
    assert "Traceback" not in run.stderr


@pytest.mark.parametrize("value", ["0", "-1", "inf", "nan", "soon"])
def test_worker_lease_must_be_positive_seconds(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["worker", "--app", "durable_app:agent", "--lease", value]) == 2
    assert "--lease" in capsys.readouterr().err


def test_worker_help_names_the_real_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["worker", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "(default: local)" in out
    assert "--lease SECONDS" in out
    assert "take over this one's turns (default 30)" in out


async def test_submit_without_a_worker_says_it_is_waiting(tmp_path: pathlib.Path) -> None:
    """The real command, no worker anywhere: within a few seconds it says so on
    stderr (instead of waiting in silence), and keeps waiting until stopped."""
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    argv = [sys.executable, "-m", "trio_agent._cli", "submit", "erin", "hi", "--agent", "a"]
    process = await trio.lowlevel.open_process(
        [*argv, "--database-url", url], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL
    )
    seen = b""
    try:
        assert process.stderr is not None
        with trio.fail_after(60):  # a bound, not a timing: the notice comes at ~3 s
            while b"waiting for a worker" not in seen:
                chunk = await process.stderr.receive_some(4096)
                assert chunk, f"submit ended without the notice: {seen!r}"
                seen += chunk
        assert process.poll() is None  # still waiting
    finally:
        process.kill()
        await process.wait()
    assert b"trio-agent worker" in seen
