"""``trio-agent worker`` and ``trio-agent submit``: durable turns over DBOS.

``trio-agent worker --app module:agent [--database-url URL] [--concurrency N]``
runs a worker until interrupted; ``trio-agent submit SESSION PROMPT --agent NAME``
enqueues a turn and (unless ``--no-wait``) prints its summary as one JSON line;
it exits 1, saying why on stderr, when the turn did not complete (an error, calls
awaiting approval). Both need the
``durable`` extra (``pip install 'trio-agent[durable]'``).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .._exceptions import TrioAgentError
from ._args import positive_float, positive_int

__all__ = ["add_worker_commands", "summary_record"]


def add_worker_commands(subparsers: Any) -> None:
    """Add ``worker`` and ``submit`` to an argparse subparsers object."""
    worker = subparsers.add_parser("worker", help="run durable turns (DBOS; SQLite or Postgres)")
    worker.add_argument("--app", required=True, help="module:attribute of a durable.Agent")
    worker.add_argument(
        "--database-url",
        default=None,
        help="sqlite:///file (default sqlite:///trio_agent.sqlite) or postgresql://...",
    )
    worker.add_argument(
        "--concurrency", type=positive_int, default=100, help="turns in flight (default 100)"
    )
    worker.add_argument(
        "--executor-id",
        default=None,
        help="this worker's identity; restart with the same id to resume its turns (default: local)",
    )
    worker.add_argument(
        "--lease",
        type=positive_float,
        default=30.0,
        metavar="SECONDS",
        help="without a heartbeat for this long, live workers take over this one's turns"
        " (default 30)",
    )
    worker.set_defaults(func=_worker_command)

    submit = subparsers.add_parser("submit", help="enqueue a durable turn and print its summary")
    submit.add_argument("session", help="the session id")
    submit.add_argument("prompt", help="what to ask the model")
    submit.add_argument("--agent", required=True, help="the durable.Agent's name")
    submit.add_argument(
        "--database-url",
        default=None,
        help="the worker's database (default sqlite:///trio_agent.sqlite)",
    )
    submit.add_argument("--no-wait", action="store_true", help="print the turn id and exit")
    submit.set_defaults(func=_submit_command)


_HINT = "pip install 'trio-agent[durable]'"


def _durable() -> Any:
    try:  # lazy: the durable extra (dbos) is optional, and heavy
        from .. import durable
    except ImportError as exc:
        # trio_agent.durable's own error already names the extra when dbos is missing.
        said = str(exc)
        hint = "" if _HINT in said else f": the durable extra is missing, {_HINT}"
        sys.stderr.write(f"trio-agent: {said}{hint}\n")
        return None
    return durable


def _worker_command(args: argparse.Namespace) -> int:
    durable = _durable()
    if durable is None:
        return 1
    sys.path.insert(0, "")  # --app names a module of the working directory, as python -m does
    try:
        agent = durable.load_agent(args.app)

        def ready() -> None:  # connected, first heartbeat written
            sys.stderr.write(f"trio-agent: worker for agent {agent.name!r} ready\n")
            sys.stderr.flush()

        durable.run_worker(
            agent,
            database_url=args.database_url,
            concurrency=args.concurrency,
            executor_id=args.executor_id,
            lease=args.lease,
            on_ready=ready,
        )
    except TrioAgentError as exc:
        sys.stderr.write(f"trio-agent: {type(exc).__name__}: {exc}\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write("trio-agent: worker stopped; unfinished turns resume on restart\n")
        return 130
    return 0


def _submit_command(args: argparse.Namespace) -> int:
    durable = _durable()
    if durable is None:
        return 1
    try:
        client = durable.DurableClient.connect(args.database_url, agent=args.agent)
        try:
            handle = client.submit(args.session, args.prompt)
            if args.no_wait:
                print(handle.turn_id)
                return 0
            summary = handle.result(on_no_worker=_say_waiting)
        finally:
            client.close()
    except TrioAgentError as exc:
        sys.stderr.write(f"trio-agent: {type(exc).__name__}: {exc}\n")
        return 1
    except KeyboardInterrupt:
        return 130
    record, problem = summary_record(summary)
    print(json.dumps(record, ensure_ascii=False))
    sys.stdout.flush()
    if problem is not None:
        sys.stderr.write(f"trio-agent: {problem}\n")
        return 1
    return 0


def _say_waiting() -> None:
    sys.stderr.write(
        "trio-agent: waiting for a worker: none is registered on this database"
        " (start one with `trio-agent worker`)\n"
    )
    sys.stderr.flush()


def summary_record(summary: Any) -> tuple[dict[str, Any], str | None]:
    """A durable turn's summary as the JSON ``submit`` prints, and what to say on
    stderr when the turn did not complete (None when it did).

    A failed turn is never shown as an empty answer: its error (type and message),
    its explanation and the tool calls awaiting approval are all in the record.
    """
    reason = None if summary.reason is None else str(summary.reason)
    record: dict[str, Any] = {
        "turn_id": summary.turn_id,
        "session_id": summary.session_id,
        "reason": reason,
        "turns": summary.turns,
        "text": summary.text,
        "replayed_tools": summary.replayed_tools,
    }
    if summary.error is not None:
        record["error"] = summary.error
    if summary.message:
        record["message"] = summary.message
    if summary.abort_reason:
        record["abort_reason"] = summary.abort_reason
    if summary.pending:
        record["pending"] = list(summary.pending)
    if reason == "completed":
        return record, None
    if summary.error is not None:
        problem = f"error: the turn failed ({reason}): {summary.error}"
    elif summary.pending:
        ids = ", ".join(summary.pending)
        problem = (
            f"the turn awaits approval of {len(summary.pending)} tool call"
            f"{'s' if len(summary.pending) > 1 else ''}: {ids}"
        )
    else:
        said = f": {summary.message}" if summary.message else ""
        problem = f"the turn ended {reason}{said}"
    return record, problem
