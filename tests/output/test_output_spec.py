"""OutputSpec over the attack space: any JSON value, any text (lone surrogates, deep
nesting, huge numbers) either builds a value of the output type or is refused with
InvalidOutput, never anything else; a bad output_type is refused when the options
are built."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from trio_agent import TurnOptions
from trio_agent._output import InvalidOutput, output_spec


@attrs.frozen
class Person:
    name: str
    age: int


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.lists(st.characters(), max_size=10).map("".join),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(["name", "age", "result", "x"]), inner, max_size=4)
    ),
    max_leaves=12,
)

SPECS = [output_spec(Person), output_spec(list[Person]), output_spec(int)]


@given(spec=st.sampled_from(SPECS), value=json_values)
@example(spec=SPECS[0], value={"name": "Ada", "age": 36})  # built: the checks run
def test_build_gives_the_type_or_refuses(spec: Any, value: Any) -> None:
    try:
        built = spec.build(value)
    except InvalidOutput:
        return
    if spec.hint is Person:
        assert isinstance(built, Person)
        assert isinstance(built.name, str)
    elif spec.hint is int:
        assert isinstance(built, int | float)
    else:
        assert all(isinstance(p, Person) for p in built)


@given(text=st.lists(st.characters(), max_size=60).map("".join) | json_values.map(json.dumps))
@example(text='{"name": "Ada", "age": 36}')  # built: the check runs
def test_parse_text_gives_the_type_or_refuses(text: str) -> None:
    spec = output_spec(Person)
    assert spec is not None
    try:
        built = spec.parse_text(text)
    except InvalidOutput:
        return
    assert isinstance(built, Person)


def test_deep_json_is_refused_not_a_crash() -> None:
    spec = output_spec(Person)
    assert spec is not None
    with pytest.raises(InvalidOutput):
        spec.parse_text("[" * 100_000 + "]" * 100_000)


@pytest.mark.parametrize(
    "bad",
    [object(), [Person], "Person", 3, tuple, {"type": 5}, {"type": "object", "required": "name"}],
)
def test_a_bad_output_type_is_refused_at_once(bad: Any) -> None:
    with pytest.raises((TypeError, ValueError), match="output_type"):
        TurnOptions(output_type=bad)
