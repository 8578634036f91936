"""A tool's ``input_schema`` is checked against its metaschema once per distinct
schema (the check costs about a millisecond a tool, and agents build the same tools
for every session), and the remembered checks never change a verdict.

The attack: schemas from every JSON-ish spelling (tuples for lists, mapping
proxies, ``True`` for ``1``, ``1.0`` for ``1``, keys that are not strings, deep
nesting), each built after its "twin" (the same schema spelled with the other
types), must be accepted or refused exactly as a fresh ``check_schema`` says.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import jsonschema
import jsonschema.exceptions
import jsonschema.validators
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from trio_agent import Tool, ToolContext, ToolDefinitionError, _tools


async def run(input: Mapping[str, Any], ctx: ToolContext) -> str:
    return "ok"


def reference_verdict(schema: Any) -> bool:
    """What a fresh check says: True when the schema is valid (a tool's schema is
    a JSON object: a mapping)."""
    if not isinstance(schema, Mapping):
        return False
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.exceptions.SchemaError:
        return False
    return True


def tool_verdict(schema: Any) -> bool:
    try:
        Tool("T", "d", schema, run)
    except ToolDefinitionError as exc:
        refused = str(exc)
    else:
        return True
    assert "invalid input_schema" in refused
    return False


def twin(value: Any) -> Any:
    """The same schema in the other spelling: lists <-> tuples, bools <-> ints,
    ints <-> floats, mapping proxies -> dicts (each dict's values twinned)."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return float(value) if value not in (0, 1) else bool(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return tuple(twin(v) for v in value)  # pyright: ignore[reportUnknownVariableType,reportUnknownArgumentType]
    if isinstance(value, tuple):
        return [twin(v) for v in value]  # pyright: ignore[reportUnknownVariableType,reportUnknownArgumentType]
    if isinstance(value, (dict, MappingProxyType)):  # a proxy becomes a plain dict
        return {k: twin(v) for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType]
    return value


_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.floats(allow_nan=False, width=16),
    st.sampled_from(["object", "string", "integer", "array", "nope", "", "\ud800"]),
)
_keys = st.sampled_from(
    ["type", "minProperties", "required", "properties", "items", "enum", "maxLength", "x"]
)


def _containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(children, max_size=3),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(_keys, children, max_size=4),
        st.dictionaries(_keys, children, max_size=3).map(MappingProxyType),
        st.dictionaries(st.integers(0, 2), children, max_size=2),  # keys that are not str
    )


_values = st.recursive(_scalars, _containers, max_leaves=12)
_schemas = st.one_of(
    st.dictionaries(_keys, _values, max_size=5),
    st.fixed_dictionaries(
        {"type": st.just("object"), "properties": st.dictionaries(st.text(max_size=3), _values)},
        optional={"required": _values, "minProperties": _values},
    ),
    _values,
)


@settings(max_examples=300, deadline=None)
@given(_schemas, st.booleans())
@example({"type": "object", "minProperties": True}, True)  # valid twin: 1
@example({"type": "object", "required": ("a",)}, True)  # valid twin: a list
@example({"type": "object", "minProperties": 1.5}, False)
@example(MappingProxyType({"type": "object"}), True)
def test_a_remembered_check_never_changes_a_verdict(schema: Any, twin_first: bool) -> None:
    if twin_first:
        tool_verdict(twin(schema))  # may be remembered as valid
    expected = reference_verdict(schema)
    assert tool_verdict(schema) is expected
    assert tool_verdict(schema) is expected  # again: now possibly from what is remembered
    assert tool_verdict(twin(schema)) is reference_verdict(twin(schema))


def test_the_same_schema_is_checked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    checks: list[object] = []
    real = jsonschema.Draft202012Validator.check_schema

    def counted(schema: Any, *args: Any, **kwargs: Any) -> None:
        checks.append(schema)
        real(schema, *args, **kwargs)

    monkeypatch.setattr(jsonschema.Draft202012Validator, "check_schema", staticmethod(counted))
    monkeypatch.setattr(_tools, "_CHECKED", set())
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    tools = [Tool(f"T{i}", "d", dict(schema), run) for i in range(5)]
    assert len(checks) == 1
    assert all(t.validate({"path": 1}) for t in tools)  # each validates with its own
    Tool("U", "d", {**schema, "required": ["path"]}, run)  # another schema: checked
    assert len(checks) == 2
    ordered = OrderedDict(schema)  # not plain JSON types: not remembered
    Tool("V", "d", ordered, run)
    Tool("W", "d", ordered, run)
    assert len(checks) == 4
    bad = {"type": "object", "minProperties": -1}
    for _ in range(2):  # a refusal is never remembered
        with pytest.raises(ToolDefinitionError, match="invalid input_schema"):
            Tool("X", "d", bad, run)
    assert len(checks) == 6


def test_what_is_remembered_stays_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_tools, "_CHECKED", set())
    for i in range(_tools._CHECKED_MAX + 10):  # pyright: ignore[reportPrivateUsage]
        Tool("T", "d", {"type": "object", "description": str(i)}, run)
    assert 0 < len(_tools._CHECKED) <= _tools._CHECKED_MAX  # pyright: ignore[reportPrivateUsage]
    huge = {"type": "object", "description": "x" * (_tools._KEY_MAX + 1)}  # pyright: ignore[reportPrivateUsage]
    assert _tools._schema_key(jsonschema.Draft202012Validator, huge) is None  # pyright: ignore[reportPrivateUsage]
    deep: Any = {"type": "object"}
    for _ in range(_tools.MAX_INPUT_DEPTH + 5):
        deep = {"items": deep}
    assert _tools._schema_key(jsonschema.Draft202012Validator, deep) is None  # pyright: ignore[reportPrivateUsage]
