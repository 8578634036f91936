"""Fixtures for the model client tests (tests/model): one way to read a stream.

A test takes ``collect`` as an argument and awaits it::

    async def test_something(autojump_clock: Any, collect: Any) -> None:
        model = ScriptedModel([ScriptedAnswer(blocks=[TextBlock("Hi")])])
        *_, result = await collect(model.client())
        assert result.message.text == "Hi"

A stream that fails raises out of ``collect`` (``pytest.raises`` around it); a test
that acts while the stream runs (leaves early, times a read) opens
``client.stream(...)`` itself.

The raw events of an answer (a ``message_start`` to feed an accumulator, say) come
from the testing package's rendering, not from hand-written dicts::

    START = ScriptedAnswer(blocks=[], message_id="msg_1", model="m").events()[0]

(a plain expression, so it works at import time too, in a constant or a
``parametrize`` list, where no fixture reaches).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest

from trio_agent import ModelClient, UserMessage
from trio_agent.lowlevel import StreamResult

#: The history a request sends unless the test passes its own.
HI: tuple[UserMessage, ...] = (UserMessage("hi"),)


async def _collect(
    client: ModelClient,
    *,
    model: str = "claude-x",
    max_tokens: int = 64,
    messages: Sequence[Any] = HI,
    on_item: Callable[[Any], object] | None = None,
    **kw: Any,
) -> list[Any]:
    """Every item of one ``client.stream(model=, max_tokens=, messages=, **kw)``.

    ``**kw`` goes to ``stream()`` as it is (``tools=``, ``system=``,
    ``extra_body=``...); ``on_item(item)`` is called as each item arrives (to note
    the time, say). The last item must be the :class:`~trio_agent.lowlevel.StreamResult`.
    """
    items: list[Any] = []
    async with client.stream(
        model=model, max_tokens=max_tokens, messages=messages, **kw
    ) as channel:
        async for item in channel:
            items.append(item)
            if on_item is not None:
                on_item(item)
    assert items, "the stream sent no item"
    assert isinstance(items[-1], StreamResult), f"the last item is {items[-1]!r:.200}"
    return items


@pytest.fixture(scope="session")
def collect() -> Callable[..., Awaitable[list[Any]]]:
    """``items = await collect(client, *, model="claude-x", max_tokens=64,
    messages=[UserMessage("hi")], on_item=None, **stream_kw)``: every item of one
    streamed request (events, a message per finished block, the StreamResult last)."""
    return _collect
