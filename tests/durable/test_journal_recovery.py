"""The turn journal keeps the client whole: wrapping a recoverable client gives a
recoverable one, so a durable turn keeps the loop's retry policy, its overload
counting and its non-streaming last resort (and tracing on top sees them too)."""

from __future__ import annotations

import pathlib
from typing import Any

import httpx
import trio
import trio.testing

from trio_agent import (
    AnthropicClient,
    ModelClient,
    RetryPolicy,
    Session,
    TextBlock,
    TurnEnd,
    TurnEndReason,
    TurnOptions,
)
from trio_agent.durable import SqlSessionStore
from trio_agent.durable._journal import TurnJournal
from trio_agent.lowlevel import RecoverableModelClient
from trio_agent.otel import traced_submit
from trio_agent.testing import (
    Faults,
    ScriptedAnswer,
    ScriptedModel,
    Timing,
    encode_event,
)

SLOW = Timing(token_delay=0.1, block_delay=0.1)
TEXT = "A fairly long answer, long enough to be cut after its first block."


def cut_answer() -> ScriptedAnswer:
    """An answer whose connection drops after its first block has streamed."""
    plain = ScriptedAnswer(blocks=[TextBlock(TEXT), TextBlock("more")], timing=SLOW)
    events = plain.events()
    stop = next(i for i, e in enumerate(events) if e["type"] == "content_block_stop")
    cut = len(b"".join(encode_event(e) for e in events[: stop + 1]))
    return ScriptedAnswer(
        blocks=plain.blocks, timing=SLOW, faults=Faults(disconnect_after_byte=cut)
    )


def client(model: ScriptedModel) -> AnthropicClient:
    return AnthropicClient(
        api_key="k",
        base_url="http://scripted",
        http_client=httpx.AsyncClient(transport=model.transport()),
        retry=RetryPolicy(max_retries=2, jitter=(1.0, 1.0)),
    )


class Plain:
    """A ModelClient that is not recoverable (stream() only)."""

    def __init__(self, inner: ModelClient) -> None:
        self.inner = inner

    def stream(self, **request: Any) -> Any:
        return self.inner.stream(**request)


async def test_the_journaled_client_is_the_kind_it_wraps(tmp_path: pathlib.Path) -> None:
    store = SqlSessionStore.connect(f"sqlite:///{tmp_path / 'db.sqlite'}")
    journal = await TurnJournal.open(store, "turn-kind")
    inner = client(ScriptedModel([]))
    wrapped = journal.client(inner)
    assert isinstance(wrapped, RecoverableModelClient)
    assert wrapped.retry is inner.retry
    plain = journal.client(Plain(inner))
    assert isinstance(plain, ModelClient)
    assert not isinstance(plain, RecoverableModelClient)


def run(turn: Any) -> Any:
    return trio.run(turn, clock=trio.testing.MockClock(autojump_threshold=0))


def test_a_durable_turn_retries_then_takes_the_last_resort_and_replays_it(
    tmp_path: pathlib.Path,
) -> None:
    """Three answers cut mid-stream (the first and the loop's two streamed retries),
    then the non-streaming last resort: as a plain session does it, traced too; then
    the same turn again answers from the record and asks nothing."""
    store = SqlSessionStore.connect(f"sqlite:///{tmp_path / 'db.sqlite'}")
    answers = [cut_answer(), cut_answer(), cut_answer()]
    answers.append(ScriptedAnswer(blocks=[TextBlock("From the last resort.")]))

    async def durable_turn(model: ScriptedModel) -> TurnEnd:
        journal = await TurnJournal.open(store, "turn-recover")
        journal.bind()
        session = Session(journal.client(client(model)), [], model="m", options=TurnOptions())
        async with traced_submit(session, "go") as events:
            return [e async for e in events][-1]

    model = ScriptedModel(list(answers))
    end = run(lambda: durable_turn(model))
    assert end.reason is TurnEndReason.COMPLETED
    assert end.messages[-1].content[0] == TextBlock("From the last resort.")
    assert len(model.requests) == 4
    assert model.requests[-1].body.get("stream") in (None, False)  # the last resort
    again = ScriptedModel([])
    replayed = run(lambda: durable_turn(again))
    assert replayed.messages[-1] == end.messages[-1]
    assert again.requests == []
