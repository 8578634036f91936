"""The agent the durable tests' worker subprocesses run (``--app durable_app:agent``).

Not a test module: a worker imports it. Each turn: the model calls ``effect``
(appends one line to ``effect-<session>`` in ``$DURABLE_TEST_DIR``: the side effect
the tests count; a prompt with "boom" makes it raise :class:`Boom`, a BaseException), then ``gate`` (appends its idempotency key to ``gatekey-<session>``, marks
``gate-<session>-<pid>`` and, while the file
``hold`` or ``hold-<pid>`` exists, waits: the worker is killed there), then answers with text.
The model is the tests' loopback scripted model at ``$DURABLE_TEST_MODEL_URL``.
"""

from __future__ import annotations

import os
import pathlib

import attrs
import trio

import trio_agent
from trio_agent import durable

DIR = pathlib.Path(os.environ.get("DURABLE_TEST_DIR", "."))
SCHEMA = {"type": "object", "properties": {"note": {"type": "string"}}}


class Boom(BaseException):
    """A tool's own BaseException (not an Exception): a prompt with "boom" raises it."""


def build(session_id: str) -> trio_agent.Session:
    async def effect(input, ctx):
        if "boom" in input.get("note", ""):
            raise Boom("the tool blew up")
        with open(DIR / f"effect-{session_id}", "a") as f:
            # The worker's one Trio loop: its root task, whichever turn this is.
            loop = f"{os.getpid()}:{id(trio.lowlevel.current_root_task())}"
            f.write(f"{ctx.tool_use_id} {durable.idempotency_key(ctx)} {loop}\n")
        return f"effect recorded for {session_id}"

    async def gate(input, ctx):
        with open(DIR / f"gatekey-{session_id}", "a") as f:
            f.write(f"{ctx.tool_use_id} {durable.idempotency_key(ctx)}\n")
        (DIR / f"gate-{session_id}-{os.getpid()}").touch()
        while (DIR / "hold").exists() or (DIR / f"hold-{os.getpid()}").exists():
            await trio.sleep(0.02)
        return "gate open"

    tools = [
        trio_agent.Tool("effect", "Record a side effect.", SCHEMA, effect),
        trio_agent.Tool("gate", "Wait at the gate.", SCHEMA, gate),
    ]
    client = trio_agent.AnthropicClient(
        api_key="test-key", base_url=os.environ.get("DURABLE_TEST_MODEL_URL", "http://127.0.0.1:9")
    )
    return trio_agent.Session(client, tools, model="claude-scripted", max_tokens=256)


agent = durable.Agent("durable-test", build)


def build_deferring(session_id: str) -> trio_agent.Session:
    """:func:`build`, but every ``effect`` call waits for approval (``Defer``)."""

    async def ask_later(tool, input, ctx):
        return trio_agent.Defer() if tool.name == "effect" else trio_agent.Allow()

    session = build(session_id)
    return attrs.evolve(session, options=attrs.evolve(session.options, can_use_tool=ask_later))


deferring = durable.Agent("durable-deferring", build_deferring)
