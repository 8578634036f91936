"""Stalls are visible (issue 12, item 10): each stall is a Stall event and a log line
with its duration; ``max_stalls`` aborts the call and retries it."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from trio_agent import (
    AttemptDiscarded,
    RetryPolicy,
    Stall,
    StreamStalledError,
    TextBlock,
    TextDelta,
    TransitionReason,
    TurnEndReason,
    TurnOptions,
    query,
)
from trio_agent.testing import Faults, ScriptedAnswer, ScriptedModel, Timing

TEXT = "A fairly long answer that streams in many small pieces."
#: One retry, after exactly 0.5 s.
RETRY = RetryPolicy(max_retries=1, jitter=(1.0, 1.0))


def stalling(before_event: int, seconds: float) -> ScriptedAnswer:
    return ScriptedAnswer(
        blocks=[TextBlock(TEXT)],
        timing=Timing(token_delay=0.1),
        faults=Faults(stall_before_event=before_event, stall_seconds=seconds),
    )


async def test_each_stall_is_an_event_and_a_log_line(
    autojump_clock: Any, caplog: pytest.LogCaptureFixture, turn: Any
) -> None:
    scripted = ScriptedModel([stalling(4, 45.0)])
    with caplog.at_level(logging.WARNING, logger="trio_agent.loop"):
        events, end = await turn(
            scripted.client(retry=RETRY), options=TurnOptions(stall_threshold=30.0)
        )
    assert end.reason is TurnEndReason.COMPLETED
    (stall,) = [e for e in events if isinstance(e, Stall)]
    assert stall.duration == pytest.approx(45.1)  # the stall plus one token delay
    assert (stall.model_call, stall.count) == (1, 1)
    # sent when the stream resumed: right before the delayed content
    assert isinstance(events[events.index(stall) + 1], TextDelta)
    (record,) = [r for r in caplog.records if "stalled" in r.getMessage()]
    assert "45.1s" in record.getMessage()


async def test_gaps_under_the_threshold_are_not_stalls(autojump_clock: Any, turn: Any) -> None:
    scripted = ScriptedModel([stalling(4, 20.0)])
    events, _ = await turn(scripted.client(retry=RETRY), options=TurnOptions(stall_threshold=30.0))
    assert not [e for e in events if isinstance(e, Stall)]


async def test_max_stalls_aborts_and_retries(autojump_clock: Any, turn: Any) -> None:
    scripted = ScriptedModel([stalling(4, 45.0), ScriptedAnswer(blocks=[TextBlock("Quick.")])])
    events, end = await turn(
        scripted.client(retry=RETRY), options=TurnOptions(stall_threshold=30.0, max_stalls=1)
    )
    assert end.reason is TurnEndReason.COMPLETED
    (tombstone,) = [e for e in events if isinstance(e, AttemptDiscarded)]
    assert isinstance(tombstone.error, StreamStalledError)
    assert tombstone.reason is TransitionReason.STREAM_RETRY
    assert end.messages[-1].text == "Quick."  # type: ignore[union-attr]
    assert [r.body["stream"] for r in scripted.requests] == [True, True]


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("stall_threshold", 0),
        ("stall_threshold", -1.0),
        ("max_stalls", 0),
        ("output_token_cap", 0),
        ("token_budget", 0),
        ("max_stop_hook_blocks", -1),
        ("auto_compact", 0),
        ("auto_compact", 1.5),
        ("max_tokens", 0),
    ],
)
async def test_bad_options_are_refused(option: str, value: float) -> None:
    scripted = ScriptedModel([])

    async def start() -> None:
        if option == "max_tokens":
            async with query(scripted.client(), [], tools=[], model="m", max_tokens=int(value)):
                pass  # pragma: no cover
        else:
            async with query(
                scripted.client(), [], tools=[], model="m", options=TurnOptions(**{option: value})
            ):
                pass  # pragma: no cover

    with pytest.raises(ValueError, match=option):
        await start()
    assert scripted.requests == []
