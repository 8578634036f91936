"""Tracing keeps the client whole (issue 24): every recovery path of the loop gives
the same turn with ``traced_submit`` as with ``Session.submit``.

Each case runs twice, each time in its own ``trio.run`` on a fresh virtual clock and
a fresh scripted model: once plain, once traced (spans read back with the SDK's
in-memory exporter). The two runs' events, histories and requests must be the same;
then the spans must show the calls the loop made.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs
import opentelemetry.sdk.trace as sdk
import pytest
import trio
import trio.testing
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from trio_agent import (
    ModelClient,
    RetryPolicy,
    Session,
    TextBlock,
    Tool,
    ToolContext,
    ToolUseBlock,
    TransitionReason,
    TurnEnd,
    TurnEndReason,
    TurnOptions,
    otel,
)
from trio_agent.lowlevel import RecoverableModelClient
from trio_agent.testing import (
    Faults,
    HTTPErrorAnswer,
    ScriptedAnswer,
    ScriptedModel,
    Timing,
    encode_event,
)

SLOW = Timing(token_delay=0.1, block_delay=0.1)
#: Exact backoff: 0.5 s, then 1 s.
EXACT = RetryPolicy(max_retries=2, jitter=(1.0, 1.0))
OVERLOADED = HTTPErrorAnswer(status=529)
DONE = ScriptedAnswer(blocks=[TextBlock("All done.")])


def _acting(tool_id: str, **kw: Any) -> ScriptedAnswer:
    return ScriptedAnswer(
        blocks=[TextBlock("Working on it."), ToolUseBlock(tool_id, "Act", {})], timing=SLOW, **kw
    )


def _reset(tool_id: str) -> ScriptedAnswer:
    """An answer whose connection drops after its tool_use block has streamed."""
    plain = _acting(tool_id)
    events = plain.events()
    stop = [i for i, e in enumerate(events) if e["type"] == "content_block_stop"][1]
    cut = len(b"".join(encode_event(e) for e in events[: stop + 1]))
    return _acting(tool_id, faults=Faults(disconnect_after_byte=cut))


def _stalling() -> ScriptedAnswer:
    return ScriptedAnswer(
        blocks=[TextBlock("A fairly long answer that streams in many small pieces.")],
        timing=Timing(token_delay=0.1),
        faults=Faults(stall_before_event=4, stall_seconds=45.0),
    )


@attrs.frozen
class Case:
    answers: Callable[[], list[Any]]
    retry: RetryPolicy = EXACT
    options: TurnOptions = attrs.field(factory=TurnOptions)
    model: str = "big"
    max_tokens: int | None = 100
    #: The transitions the turn must make (checked on the plain run).
    transitions: tuple[TransitionReason, ...] = ()
    #: Each chat span's ``trio_agent.request.stream``, in order.
    chats: tuple[bool, ...] = (True, True)


CASES = {
    "mid-stream reset, then a streamed retry": Case(
        lambda: [_reset("x1"), DONE],
        transitions=(TransitionReason.STREAM_RETRY,),
    ),
    "three overloaded, then the fallback model": Case(
        lambda: [OVERLOADED] * 3 + [DONE] + [OVERLOADED] * 5,
        retry=RetryPolicy(jitter=(1.0, 1.0)),
        options=TurnOptions(fallback_model="small"),
        transitions=(TransitionReason.MODEL_FALLBACK,),
    ),
    "the streamed retries fail, then the non-streaming last resort": Case(
        lambda: [_reset(f"x{i}") for i in range(3)] + [DONE],
        transitions=(
            TransitionReason.STREAM_RETRY,
            TransitionReason.STREAM_RETRY,
            TransitionReason.NON_STREAMING_FALLBACK,
        ),
        chats=(True, True, True, False),
    ),
    "max_tokens escalation": Case(
        lambda: [ScriptedAnswer(blocks=[TextBlock("cut sho")], stop_reason="max_tokens"), DONE],
        model="claude-sonnet-5-5-20250929",
        max_tokens=None,
        transitions=(TransitionReason.MAX_OUTPUT_TOKENS_ESCALATE,),
    ),
    "a stall aborts the call, then a streamed retry": Case(
        lambda: [_stalling(), DONE],
        retry=RetryPolicy(max_retries=1, jitter=(1.0, 1.0)),
        options=TurnOptions(stall_threshold=30.0, max_stalls=1),
        transitions=(TransitionReason.STREAM_RETRY,),
    ),
}


def _act(started: list[str]) -> Tool:
    async def run(input: Mapping[str, Any], ctx: ToolContext) -> str:
        started.append(ctx.tool_use_id)
        await trio.sleep(5000)
        return "acted"

    return Tool("Act", "A side effect.", {"type": "object"}, run)


@attrs.define
class Run:
    events: list[Any]
    #: The virtual time each event arrived at.
    times: list[float]
    requests: list[dict[str, Any]]
    started: list[str]
    session: Session
    spans: list[Any]


def _run(case: Case, *, traced: bool) -> Run:
    model = ScriptedModel(case.answers())
    started: list[str] = []
    session = Session(
        model.client(retry=case.retry, idle_timeout=20),
        [_act(started)],
        model=case.model,
        max_tokens=case.max_tokens,
        options=case.options,
    )
    exporter = InMemorySpanExporter()
    provider = sdk.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    events: list[Any] = []
    times: list[float] = []

    async def main() -> None:
        start = trio.current_time()
        with trio.fail_after(3600):  # virtual: a hang is a failure, not a stuck test
            async with (
                otel.traced_submit(session, "go", tracer_provider=provider)
                if traced
                else session.submit("go")
            ) as stream:
                async for event in stream:
                    events.append(event)
                    times.append(trio.current_time() - start)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    requests = [r.body for r in model.requests]
    spans = sorted(exporter.get_finished_spans(), key=lambda s: s.start_time)
    return Run(events, times, requests, started, session, spans)


def _comparable(event: Any) -> str:
    # Exceptions compare by identity; their type and message are what must match.
    return repr(event)


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_recovery_path_gives_the_same_turn_traced(name: str) -> None:
    case = CASES[name]
    plain = _run(case, traced=False)
    traced = _run(case, traced=True)

    (end,) = [e for e in plain.events if isinstance(e, TurnEnd)]
    assert end.reason is TurnEndReason.COMPLETED, end
    made = tuple(e.reason for e in plain.events if type(e).__name__ == "Transition")
    assert made[: len(case.transitions)] == case.transitions

    assert [_comparable(e) for e in traced.events] == [_comparable(e) for e in plain.events]
    assert traced.times == plain.times  # the same backoffs: the client's retry policy
    assert traced.session.messages == plain.session.messages
    assert traced.requests == plain.requests
    assert traced.started == plain.started
    assert traced.session.usage == plain.session.usage

    # One chat span per model call the loop made (the client's own retries of an
    # HTTP error are inside one), each under the turn's span.
    (turn,) = [s for s in traced.spans if s.name.startswith("invoke_agent")]
    chats = [s for s in traced.spans if s.name.startswith("chat ")]
    assert tuple(c.attributes["trio_agent.request.stream"] for c in chats) == case.chats
    assert all(c.parent.span_id == turn.context.span_id for c in chats)
    assert turn.attributes["trio_agent.turn.end_reason"] == "completed"
    assert chats[-1].attributes["gen_ai.response.finish_reasons"] == ("end_turn",)
    assert chats[-1].status.status_code is StatusCode.UNSET


def test_the_overload_count_is_seen_through_the_traced_client() -> None:
    traced = _run(CASES["three overloaded, then the fallback model"], traced=True)
    first, fallback = [s for s in traced.spans if s.name.startswith("chat ")]
    assert first.attributes["gen_ai.request.model"] == "big"
    assert fallback.attributes["gen_ai.request.model"] == "small"
    # the loop's observer was asked before each of the client's two retries (the
    # policy's max_retries); the third overloaded answer ended the call, and the loop
    # counted it as the third in a row
    retries = [e for e in first.events if e.name == "trio_agent.retry"]
    assert [e.attributes["trio_agent.retry.allowed"] for e in retries] == [True, True]
    assert {e.attributes["error.type"] for e in retries} == {"OverloadedError"}
    assert first.attributes["error.type"] == "OverloadedError"
    assert [r["model"] for r in traced.requests] == ["big", "big", "big", "small"]


def test_the_traced_client_is_the_kind_it_wraps() -> None:
    model = ScriptedModel([DONE])
    inner = model.client(retry=EXACT)
    seen: list[ModelClient] = []

    class Plain:
        def stream(self, **request: Any) -> Any:
            return inner.stream(**request)

    async def main() -> None:
        for client in (inner, Plain()):
            session = Session(client, [], model="m", max_tokens=10)  # type: ignore[arg-type]
            async with otel.traced_submit(session, "hi") as events:
                seen.append(session.client)
                async for _ in events:
                    pass

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    recoverable, plain = seen
    assert isinstance(recoverable, RecoverableModelClient)
    assert recoverable.retry is EXACT
    assert not isinstance(plain, RecoverableModelClient)
    assert isinstance(plain, ModelClient)
