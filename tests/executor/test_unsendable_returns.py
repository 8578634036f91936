"""A tool returning blocks no model request can carry: the call is answered with an
error result and the turn goes on (the next request is sent).

Before, a plain Session raised a bare ``TypeError`` or ``ValueError`` out of the
turn when it encoded the next request: a ``datetime``, a set or NaN in an opaque
block's data, or nesting deeper than ``json`` encodes. Lone surrogates are
cleaned to U+FFFD, as in text.
"""

from __future__ import annotations

import datetime
import json
import math
from collections.abc import Callable, Mapping
from typing import Any

import httpx
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import (
    AnthropicClient,
    OpaqueBlock,
    RetryPolicy,
    Session,
    TextBlock,
    Tool,
    ToolContext,
    ToolUseBlock,
    TurnEnd,
)
from trio_agent.testing import ScriptedAnswer, ScriptedModel, Timing, check_history, run_virtual

FAST = Timing(first_event_delay=0.0, token_delay=0.0)
UNSENDABLE = "Error: t returned a result that cannot be sent to the model ("

#: Anything a tool might put in an opaque block's data: JSON, and what JSON is not.
leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),  # NaN and the infinities among them
    st.text(),  # lone surrogates among them
    st.datetimes(),
    st.binary(max_size=8),
    st.frozensets(st.integers(), max_size=2),
    st.just(object()),
)
data = st.recursive(
    leaves,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=12,
)


def _deep(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


async def _turn(content: Any) -> tuple[Session, ScriptedModel, TurnEnd]:
    model = ScriptedModel(
        [
            ScriptedAnswer(blocks=[ToolUseBlock("toolu_1", "t", {})], timing=FAST),
            ScriptedAnswer(blocks=[TextBlock("done")], timing=FAST),
        ]
    )
    client = AnthropicClient(
        api_key="k",
        base_url="http://scripted",
        http_client=httpx.AsyncClient(transport=model.transport()),
        retry=RetryPolicy(max_retries=0),
    )

    async def run(input: Mapping[str, Any], ctx: ToolContext) -> Any:
        return content

    tool = Tool("t", "t", {"type": "object"}, run)
    session = Session(client, [tool], model="m")
    end = None
    async with session.submit("go") as events:
        async for event in events:
            if isinstance(event, TurnEnd):
                end = event
    assert end is not None
    return session, model, end


def _encodes(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except (TypeError, ValueError, RecursionError):
        return False
    return True


@settings(max_examples=150, deadline=None)
@given(extra=data)
def test_any_opaque_block_is_sent_or_answered_with_an_error(
    extra: Any, surrogates_replaced: Callable[[Any], Any]
) -> None:
    block = OpaqueBlock({"type": "image", "extra": extra})

    async def main() -> None:
        session, model, end = await _turn([block])
        assert end.reason == "completed"
        assert len(model.requests) == 2  # the turn went on: the result was sent
        check_history(session.messages, strict=True)
        (result,) = session.messages[2].tool_results
        sent = json.loads(model.requests[1].content)["messages"][2]["content"][0]
        if _encodes(surrogates_replaced(block.to_api())):
            assert not result.is_error
            assert sent["content"] == [surrogates_replaced(block.to_api())]
        else:
            assert result.is_error
            assert isinstance(result.content, str)
            assert result.content.startswith(UNSENDABLE), result.content
            assert sent["is_error"] is True

    run_virtual(main)


def test_the_named_unsendable_values_are_error_results() -> None:
    for extra in (datetime.datetime(2020, 1, 1), math.nan, {1, 2}, b"raw", _deep(100_000)):

        async def main(extra: Any = extra) -> None:
            session, model, end = await _turn(
                [TextBlock("ok"), OpaqueBlock({"type": "image", "v": extra})]
            )
            assert end.reason == "completed"
            assert len(model.requests) == 2
            (result,) = session.messages[2].tool_results
            assert result.is_error
            assert str(result.content).startswith(UNSENDABLE), result.content

        run_virtual(main)
