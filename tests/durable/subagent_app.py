"""The agent of the durable subagent test's workers (``--app subagent_app:agent``).

Not a test module: a worker imports it. The session's tools: ``helper``, a subagent
whose own tools are ``child_effect`` (appends a line to ``childeffect-<session>`` in
``$DURABLE_TEST_DIR``: the side effect the test counts) and ``child_gate`` (marks
``childgate-<session>-<pid>`` and waits while the file ``hold-child`` exists), and
``gate`` (marks ``gate-<session>-<pid>`` and waits while ``hold`` exists). The model
is the test's loopback scripted model at ``$DURABLE_TEST_MODEL_URL``.
"""

from __future__ import annotations

import os
import pathlib

import trio

import trio_agent
from trio_agent import durable

DIR = pathlib.Path(os.environ.get("DURABLE_TEST_DIR", "."))
SCHEMA = {"type": "object"}
#: The helper's system prompt: the test's model tells the child's requests by it.
CHILD_SYSTEM = "You are the child helper."


def _waiter(name: str, mark: str, hold: str) -> trio_agent.Tool:
    """A tool *name* that touches the file *mark* and waits while *hold* exists."""

    async def wait(input, ctx):
        (DIR / mark).touch()
        while (DIR / hold).exists():
            await trio.sleep(0.02)
        return f"{name} open"

    return trio_agent.Tool(name, "Wait.", SCHEMA, wait)


def build(session_id: str) -> trio_agent.Session:
    async def child_effect(input, ctx):
        with open(DIR / f"childeffect-{session_id}", "a") as f:
            f.write(f"{ctx.tool_use_id} {durable.idempotency_key(ctx)}\n")
        return "child effect recorded"

    helper = trio_agent.subagent(
        "helper",
        "Hands a task to the helper.",
        tools=[
            trio_agent.Tool("child_effect", "Record a side effect.", SCHEMA, child_effect),
            _waiter("child_gate", f"childgate-{session_id}-{os.getpid()}", "hold-child"),
        ],
        system=CHILD_SYSTEM,
    )
    client = trio_agent.AnthropicClient(
        api_key="test-key", base_url=os.environ.get("DURABLE_TEST_MODEL_URL", "http://127.0.0.1:9")
    )
    return trio_agent.Session(
        client,
        [helper, _waiter("gate", f"gate-{session_id}-{os.getpid()}", "hold")],
        model="claude-scripted",
        max_tokens=256,
    )


agent = durable.Agent("durable-subagent-test", build)
