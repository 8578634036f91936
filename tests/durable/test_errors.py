"""DurableError belongs to trio_agent's one error tree."""

from __future__ import annotations

import trio_agent
from trio_agent import _exceptions
from trio_agent.durable import DurableError


def test_durable_error_is_a_trio_agent_error_listed_in_the_tree() -> None:
    assert issubclass(DurableError, trio_agent.TrioAgentError)
    assert DurableError.__mro__[1] is trio_agent.TrioAgentError
    doc = _exceptions.__doc__
    assert doc is not None
    assert "    └── DurableError " in doc
