"""TurnOptions: every option of a turn, defined once and checked when it is built.

The attack space is generated: every field gets every kind of value (the right
type, the wrong types, edge numbers, nested junk); each either builds (and is kept
as given, or converted as documented) or raises TypeError/ValueError naming the
field, never anything else, never later.
"""

from __future__ import annotations

import ast
import math
import re
import warnings
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

import trio_agent
from trio_agent import (
    RetryPolicy,
    Session,
    TextBlock,
    ToolUseBlock,
    TurnEnd,
    TurnEndReason,
    TurnOptions,
    UserMessage,
    query,
)
from trio_agent.testing import ScriptedAnswer, ScriptedModel, run_virtual

ROOT = Path(__file__).resolve().parents[1]
FIELDS = attrs.fields(TurnOptions)


async def _hook(*args: Any, **kwargs: Any) -> None:
    return None


# Every kind of value a caller could pass, right or wrong.
anything = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**20), max_value=10**20)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
    | st.binary(max_size=8)
    | st.just(_hook)
    | st.just(RetryPolicy())
    | st.just(object()),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner)
        | st.dictionaries(st.text(max_size=6) | st.integers(), inner, max_size=3)
    ),
    max_leaves=6,
)


@given(field=st.sampled_from(FIELDS), value=anything)
def test_each_option_builds_or_names_itself(field: attrs.Attribute[Any], value: Any) -> None:
    try:
        with warnings.catch_warnings():
            # stop_hooks is deprecated (hooks=Hooks(stop=...)): it warns, and still works
            warnings.simplefilter("ignore", DeprecationWarning)
            options = TurnOptions(**{field.name: value})
    except (TypeError, ValueError) as exc:
        error = str(exc)
    else:
        error = None
    if error is not None:
        assert field.name in error, (field.name, value, error)
        return
    kept = getattr(options, field.name)
    if field.name in ("stop_hooks", "output_validators"):
        assert kept == tuple(value)
        assert all(callable(h) for h in kept)
    elif field.name == "extra_body":
        assert dict(kept) == dict(value)
        assert not set(kept) & trio_agent._options.RESERVED_REQUEST_FIELDS  # pyright: ignore[reportPrivateUsage]
    else:
        assert kept is value
    # and what was accepted is of the documented kind
    if field.name in ("max_turns", "max_tool_concurrency", "max_result_chars", "token_budget"):
        assert kept is None or (type(kept) is int and kept >= 1)
    if field.name in ("tool_timeout", "stall_threshold", "auto_compact") and kept is not None:
        assert not isinstance(kept, bool)
        assert not math.isnan(kept)
        assert kept > 0


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("max_turns", 0),
        ("max_tool_concurrency", 0),
        ("max_result_chars", 0),
        ("max_stalls", 0),
        ("max_stop_hook_blocks", -1),
        ("tool_timeout", 0),
        ("stall_threshold", math.inf),
        ("auto_compact", 0),
        ("context_window", 0),
        ("token_budget", 0),
        ("output_token_cap", 0),
        ("extra_body", {"messages": []}),
        ("extra_body", {"stream": False}),
    ],
)
def test_bad_values_raise_when_the_value_is_built(name: str, value: Any) -> None:
    with pytest.raises(ValueError, match=name):
        TurnOptions(**{name: value})


def test_an_unknown_option_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="max_turn"):
        TurnOptions(max_turn=3)  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]


async def test_query_refuses_unknown_keywords_before_any_request() -> None:
    model = ScriptedModel([ScriptedAnswer(blocks=[TextBlock("hi")])])
    for bad in ({"max_turn": 3}, {"tool_timout": 5}, {"temperature": 0.5}):
        with pytest.raises(TypeError, match=next(iter(bad))):
            async with query(model.client(), [UserMessage("go")], tools=[], model="m", **bad):
                pass  # pragma: no cover - never entered
    with pytest.raises(TypeError, match="TurnOptions"):
        async with query(
            model.client(),
            [UserMessage("go")],
            tools=[],
            model="m",
            options={"max_turns": 3},  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
        ):
            pass  # pragma: no cover - never entered
    assert model.requests == []


def test_session_refuses_options_at_once(tmp_path: Path) -> None:
    client = ScriptedModel([]).client()
    transcript = tmp_path / "t.jsonl"
    for bad in ({"max_turns": 0}, {"max_turn": 3}, {"params": {}}):
        with pytest.raises(TypeError):
            Session(client, [], model="m", transcript_path=transcript, **bad)
    with pytest.raises(ValueError, match="max_turns"):
        Session(client, [], model="m", options=TurnOptions(max_turns=0))
    with pytest.raises(ValueError, match="max_tokens"):
        Session(client, [], model="m", max_tokens=0)
    with pytest.raises(TypeError, match="model"):
        Session(client, [], model="")  # type: ignore[arg-type]
    assert not transcript.exists()


def test_session_options_are_replaced_between_turns_and_checked() -> None:
    session = Session(ScriptedModel([]).client(), [], model="m")
    assert session.options == TurnOptions()
    session.options = attrs.evolve(session.options, max_turns=1)
    assert session.options.max_turns == 1
    with pytest.raises(TypeError, match="TurnOptions"):
        session.options = {"max_turns": 1}  # type: ignore[assignment]  # pyright: ignore[reportAttributeAccessIssue]
    assert session.options.max_turns == 1


def test_a_replaced_option_governs_the_next_turn() -> None:
    """max_turns=1 set between two turns ends the second one after one model call."""
    tool_turn = ScriptedAnswer(blocks=[ToolUseBlock("t1", "Nope", {})])
    model = ScriptedModel(
        [ScriptedAnswer(blocks=[TextBlock("first")]), tool_turn, ScriptedAnswer(blocks=[])]
    )
    session = Session(model.client(), [], model="m")

    async def main() -> list[TurnEnd]:
        ends: list[TurnEnd] = []
        for prompt in ("one", "two"):
            async with session.submit(prompt) as events:
                ends.extend([e async for e in events if isinstance(e, TurnEnd)])
            session.options = attrs.evolve(session.options, max_turns=1)
        return ends

    first, second = run_virtual(main)
    assert first.reason is TurnEndReason.COMPLETED
    assert second.reason is TurnEndReason.MAX_TURNS
    assert len(model.requests) == 2


def test_extra_body_reaches_the_request_as_it_is() -> None:
    model = ScriptedModel([ScriptedAnswer(blocks=[TextBlock("hi")])])
    extra = {"temperature": 0.25, "metadata": {"user_id": "u1"}, "top_k": 3}

    async def main() -> TurnEnd:
        async with query(
            model.client(),
            [UserMessage("go")],
            tools=[],
            model="m",
            options=TurnOptions(extra_body=extra),
        ) as events:
            return [e async for e in events][-1]

    end = run_virtual(main)
    assert end.reason is TurnEndReason.COMPLETED
    body = model.requests[0].body
    assert {k: body[k] for k in extra} == extra
    assert body["model"] == "m"


def test_each_option_has_one_line_of_documentation() -> None:
    """Each field is followed by its docstring in the class body (one place)."""
    tree = ast.parse((ROOT / "trio_agent" / "_options.py").read_text(encoding="utf-8"))
    (body,) = [s for s in tree.body if isinstance(s, ast.ClassDef) and s.name == "TurnOptions"]
    documented: dict[str, str] = {}
    for stmt, after in zip(body.body, body.body[1:], strict=False):
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            assert isinstance(after, ast.Expr)
            assert isinstance(after.value, ast.Constant)
            documented[stmt.target.id] = after.value.value
    assert set(documented) == {f.name for f in FIELDS}
    assert all(doc and "\n" not in doc for doc in documented.values())


def test_each_option_is_read_by_the_runtime() -> None:
    """No field is declared and forgotten: each is read outside the options module."""
    sources = "\n".join(
        p.read_text(encoding="utf-8")
        for p in (ROOT / "trio_agent").rglob("*.py")
        if p.name != "_options.py"
    )
    for field in FIELDS:
        assert re.search(rf"options\.{field.name}\b", sources), field.name
