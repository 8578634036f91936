"""The agent of the durable test's worker subprocess (``--app durable_aio_app:agent``).

Not a test module: the worker imports it. Each session's model is scripted in the
worker: it calls ``shout`` on the prompt, then answers with what came back.
"""

from __future__ import annotations

import trio_agent
from trio_agent import TextBlock, ToolUseBlock, durable
from trio_agent.testing import ScriptedAnswer, ScriptedModel


@trio_agent.tool
async def shout(text: str) -> str:
    """Say the text louder."""
    return text.upper()


def build(session_id: str) -> trio_agent.Session:
    model = ScriptedModel(
        [
            ScriptedAnswer(blocks=[ToolUseBlock("toolu_1", "shout", {"text": session_id})]),
            ScriptedAnswer(blocks=[TextBlock(f"shouted {session_id.upper()}")]),
        ]
    )
    return trio_agent.Session(model.client(), [shout], model=trio_agent.DEFAULT_MODEL)


agent = durable.Agent("aio-test", build)
