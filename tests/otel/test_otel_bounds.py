"""Bounded span attributes (issue 24): a 10 MB exception message, a huge id from the
model, a lone surrogate or a NUL never reach a span as they are."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import opentelemetry.sdk.trace as sdk
import trio
import trio.testing
from hypothesis import example, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from trio_agent import (
    Session,
    TextBlock,
    Tool,
    ToolContext,
    ToolResult,
    ToolUseBlock,
    TurnEnd,
    TurnEndReason,
    Usage,
    otel,
)
from trio_agent.otel._spans import MAX_ATTRIBUTE_CHARS, MAX_STACKTRACE_CHARS, bounded
from trio_agent.testing import HTTPErrorAnswer, ScriptedAnswer, ScriptedModel

HUGE = 10 * 1024 * 1024
#: What the model sends is 1 MB at most (the client refuses an 8 MB event).
BIG = 1024 * 1024
#: Odd text: a lone surrogate, a NUL, and a character outside the BMP.
ODD = "\ud800\x00\U0001f600"


def _strings(span: Any) -> Iterator[tuple[str, str]]:
    """Every string a finished span carries, with where it is."""
    yield "name", span.name
    if span.status.description is not None:
        yield "status", span.status.description
    for where, attributes in [("attribute", span.attributes)] + [
        (f"event {e.name}", e.attributes) for e in span.events
    ]:
        for key, value in attributes.items():
            for item in value if isinstance(value, tuple) else (value,):
                if isinstance(item, str):
                    yield f"{where} {key}", item


def _check_bounded(spans: Any) -> None:
    for span in spans:
        for where, text in _strings(span):
            limit = (
                MAX_STACKTRACE_CHARS
                if where.endswith("exception.stacktrace")
                else MAX_ATTRIBUTE_CHARS
            )
            assert len(text) <= limit, f"{span.name}: {where} is {len(text)} chars"
            text.encode("utf-8")  # strict: no lone surrogate left


def _traced(session: Session) -> tuple[list[Any], list[Any]]:
    exporter = InMemorySpanExporter()
    provider = sdk.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    events: list[Any] = []

    async def main() -> None:
        with trio.fail_after(600):
            async with otel.traced_submit(
                session, "go", agent_name="a" * HUGE, tracer_provider=provider
            ) as stream:
                events.extend([e async for e in stream])

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return events, list(exporter.get_finished_spans())


def test_a_tool_raising_a_10_mb_message_with_a_huge_id() -> None:
    async def run(input: Mapping[str, Any], ctx: ToolContext) -> str:
        ctx.progress("p" * HUGE + ODD)
        raise ValueError(ODD + "x" * HUGE)

    huge_id = "toolu_" + "i" * BIG
    model = ScriptedModel(
        [
            ScriptedAnswer(blocks=[ToolUseBlock(huge_id, "Boom", {})]),
            ScriptedAnswer(blocks=[TextBlock("It failed.")], usage=Usage(1, 2)),
        ]
    )
    session = Session(
        model.client(), [Tool("Boom", "Fails.", {"type": "object"}, run)], model="m" * BIG
    )
    events, spans = _traced(session)
    (end,) = [e for e in events if isinstance(e, TurnEnd)]
    assert end.reason is TurnEndReason.COMPLETED
    (result,) = [e for e in events if isinstance(e, ToolResult)]
    assert result.is_error
    _check_bounded(spans)
    (tool,) = [s for s in spans if s.name.startswith("execute_tool")]
    assert tool.status.status_code is StatusCode.ERROR
    assert tool.status.description.startswith("\ufffd\x00\U0001f600xxx")
    assert tool.attributes["error.type"] == "ValueError"
    assert tool.attributes["gen_ai.tool.call.id"].startswith("toolu_iii")
    (exception,) = [e for e in tool.events if e.name == "exception"]
    assert exception.attributes["exception.message"].startswith("\ufffd\x00\U0001f600xxx")
    # the traceback names where it was raised, and its message is cut on its own
    stacktrace = exception.attributes["exception.stacktrace"]
    assert "in run\n" in stacktrace
    assert "ValueError: \ufffd\x00\U0001f600xxx" in stacktrace
    assert len(stacktrace) < 2000


def test_an_api_error_with_a_10_mb_message_ends_the_turn_bounded() -> None:
    body = {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "\x00\U0001f600" * (HUGE // 2)},
    }
    model = ScriptedModel([HTTPErrorAnswer(status=400, body=body)])
    events, spans = _traced(Session(model.client(), [], model="m"))
    (end,) = [e for e in events if isinstance(e, TurnEnd)]
    assert end.reason is TurnEndReason.ERROR
    _check_bounded(spans)
    (turn,) = [s for s in spans if s.name.startswith("invoke_agent")]
    assert turn.status.status_code is StatusCode.ERROR
    assert turn.attributes["error.type"] == "error"
    (chat,) = [s for s in spans if s.name.startswith("chat ")]
    assert chat.status.status_code is StatusCode.ERROR


# -- bounded() itself -----------------------------------------------------------------

_ODD_TEXT = st.text(
    alphabet=st.one_of(
        st.characters(),
        st.sampled_from(["\x00", "\ud800", "\udfff", "\U0001f600", "\u200d"]),
    )
)


@given(
    text=_ODD_TEXT | st.builds(lambda c, n: c * n, _ODD_TEXT, st.integers(0, 3000)),
    limit=st.integers(0, 5000),
    keep_end=st.booleans(),
)
@example(text="x" * 100_000, limit=MAX_ATTRIBUTE_CHARS, keep_end=False)
@example(text="\ud800" * 10, limit=3, keep_end=True)
@settings(deadline=None)
def test_bounded_is_short_and_encodable(text: str, limit: int, keep_end: bool) -> None:
    out = bounded(text, limit, keep_end=keep_end)
    assert len(out) <= limit
    out.encode("utf-8")  # strict
    clean = "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)
    if len(text) <= limit:
        # only the lone surrogates change
        assert len(out) == len(text)
        assert all(a == b or 0xD800 <= ord(b) <= 0xDFFF for a, b in zip(out, text, strict=True))
    elif limit >= 40:
        # it says it was cut, and how long the text was
        assert f"{len(text)} chars" in out
        kept = out.split(" [cut", 1)[0] if not keep_end else out.rsplit("] ", 1)[1]
        assert (clean.startswith if not keep_end else clean.endswith)(kept)
        assert len(kept) > 0
