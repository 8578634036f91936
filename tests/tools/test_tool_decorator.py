"""@tool bare and with arguments; input_schema derived from type hints; sync tools in threads."""

from __future__ import annotations

import itertools
import subprocess
import sys
import threading
from collections.abc import Mapping
from typing import Annotated, Any, Literal, Optional, TypedDict, Union

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

import trio_agent
from trio_agent import Tool, ToolContext, ToolDefinitionError
from trio_agent._tool_schema import schema_for

_names = (f"T{i}" for i in itertools.count())


class Plain:
    """A class with no JSON meaning."""


# Hints with no schema: planted anywhere in a hint, they make it unsupported.
UNSUPPORTED: list[Any] = [Any, tuple[int, str], set[int], bytes, object, Plain, dict[int, str]]
SCALARS: list[Any] = [str, int, float, bool, type(None), list, dict]
LITERAL_VALUES = st.one_of(
    st.text(max_size=3), st.integers(-3, 3), st.booleans(), st.none(), st.sampled_from([0.5, 1.0])
)
FIELD_NAMES = st.sampled_from(["a", "b", "c", "d"])


def typed_dict(fields: dict[str, Any], total: bool) -> Any:
    return TypedDict(next(_names), fields, total=total)  # type: ignore[operator]


def attrs_class(fields: dict[str, Any], n_required: int) -> Any:
    these = {
        name: attrs.field(type=kind, kw_only=True)
        if i < n_required
        else attrs.field(type=kind, kw_only=True, default=None)
        for i, (name, kind) in enumerate(fields.items())
    }
    return attrs.make_class(next(_names), these)


def hints(leaves: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    def extend(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        fields = st.dictionaries(FIELD_NAMES, inner, min_size=1, max_size=3)
        return st.one_of(
            inner.map(lambda h: list[h]),  # type: ignore[valid-type]
            inner.map(lambda h: dict[str, h]),  # type: ignore[valid-type]
            inner.map(lambda h: Optional[h]),  # noqa: UP045
            st.tuples(inner, inner).map(lambda hs: Union[hs[0], hs[1]]),  # noqa: UP007
            st.builds(typed_dict, fields, st.booleans()),
            st.builds(attrs_class, fields, st.integers(0, 3)),
        )

    literals = st.lists(LITERAL_VALUES, min_size=1, max_size=3).map(
        lambda vs: Literal[tuple(vs)]  # type: ignore[misc]
    )
    return st.recursive(st.one_of(leaves, literals), extend, max_leaves=5)


SUPPORTED = hints(st.sampled_from(SCALARS))
ANY_HINT = hints(st.sampled_from(SCALARS + UNSUPPORTED))
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(FIELD_NAMES, inner, max_size=3),
    max_leaves=6,
)


def is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def same(v: Any, w: Any) -> bool:
    """JSON equality, as ``enum`` compares: true is not 1, "1" is not 1."""
    if isinstance(v, str) or isinstance(w, str):
        return isinstance(v, str) and isinstance(w, str) and v == w
    return isinstance(v, bool) == isinstance(w, bool) and v == w


def fields_of(hint: Any) -> tuple[dict[str, Any], set[str]]:
    """(field types, required fields) of a TypedDict or attrs class."""
    if attrs.has(hint):
        fs = attrs.fields(hint)
        return {f.name: f.type for f in fs}, {f.name for f in fs if f.default is attrs.NOTHING}
    return dict(hint.__annotations__), set(hint.__required_keys__)


def member(v: Any, hint: Any) -> bool:
    """Whether the JSON value *v* is a value of *hint*: the model of the schemas."""
    if hint is str:
        return isinstance(v, str)
    if hint is bool:
        return isinstance(v, bool)
    if hint is int:  # JSON: 1.0 is an integer too
        return is_number(v) and (isinstance(v, int) or float(v).is_integer())
    if hint is float:
        return is_number(v)
    if hint is type(None):
        return v is None
    if hint is list:
        return isinstance(v, list)
    if hint is dict:
        return isinstance(v, dict)
    origin, args = getattr(hint, "__origin__", None), getattr(hint, "__args__", ())
    if origin is list:
        return isinstance(v, list) and all(member(x, args[0]) for x in v)
    if origin is dict:
        return isinstance(v, dict) and all(member(x, args[1]) for x in v.values())
    if origin is Literal:
        return any(same(v, a) for a in args)
    if origin is Union:
        return any(member(v, a) for a in args)
    kinds, required = fields_of(hint)
    return (
        isinstance(v, dict)
        and required <= v.keys() <= kinds.keys()
        and all(member(x, kinds[k]) for k, x in v.items())
    )


def values(hint: Any) -> st.SearchStrategy[Any]:
    """JSON values of *hint*."""
    simple = {
        str: st.text(max_size=3),
        bool: st.booleans(),
        int: st.integers(),
        float: st.floats(allow_nan=False, allow_infinity=False) | st.integers(),
        type(None): st.none(),
        list: st.lists(JSON, max_size=2),
        dict: st.dictionaries(st.text(max_size=2), JSON, max_size=2),
    }
    if hint in simple:
        return simple[hint]
    origin, args = getattr(hint, "__origin__", None), getattr(hint, "__args__", ())
    if origin is list:
        return st.lists(values(args[0]), max_size=2)
    if origin is dict:
        return st.dictionaries(st.text(max_size=2), values(args[1]), max_size=2)
    if origin is Literal:
        return st.sampled_from(args)
    if origin is Union:
        return st.one_of([values(a) for a in args])
    kinds, required = fields_of(hint)
    return st.fixed_dictionaries(
        {k: values(kinds[k]) for k in required},
        optional={k: values(t) for k, t in kinds.items() if k not in required},
    )


SCALAR_JSON = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, 2),
    st.sampled_from([0.5, 2.0, -1.25]),
    st.text(max_size=2),
)


def near_miss(data: st.DataObject, v: Any) -> Any:
    """*v* with one part changed: an element, a value, a key added or dropped, a scalar."""
    if isinstance(v, list) and v and data.draw(st.booleans()):
        i = data.draw(st.integers(0, len(v) - 1))
        return [*v[:i], near_miss(data, v[i]), *v[i + 1 :]]
    if isinstance(v, dict) and data.draw(st.booleans()):
        keys = sorted(v)
        how = data.draw(st.sampled_from(["change", "add", "drop"] if keys else ["add"]))
        if how == "add":
            return {**v, data.draw(FIELD_NAMES): data.draw(SCALAR_JSON)}
        key = data.draw(st.sampled_from(keys))
        if how == "drop":
            return {k: x for k, x in v.items() if k != key}
        return {**v, key: near_miss(data, v[key])}
    return data.draw(SCALAR_JSON | JSON)


def has_unsupported(hint: Any) -> bool:
    if hint in UNSUPPORTED:
        return True
    origin, args = getattr(hint, "__origin__", None), getattr(hint, "__args__", ())
    if origin in (list, dict, Union):
        return any(has_unsupported(a) for a in args)
    if origin is Literal or hint in SCALARS:
        return False
    return any(has_unsupported(k) for k in fields_of(hint)[0].values())


def tool_with_param(hint: Any) -> Tool:
    async def fn(x):  # type: ignore[no-untyped-def]
        """Take x."""
        return "x"  # pragma: no cover - never run here

    fn.__annotations__ = {"x": hint}
    return trio_agent.tool(fn)


@settings(max_examples=60, deadline=None)
@given(st.data(), SUPPORTED)
def test_derived_schemas_validate_exactly_the_values_of_the_hint(
    data: st.DataObject, hint: Any
) -> None:
    t = tool_with_param(hint)
    assert t.input_schema["required"] == ["x"]
    good = data.draw(values(hint), label="value of the hint")
    assert member(good, hint)
    assert t.validate({"x": good}) is None
    other = data.draw(JSON | values(data.draw(SUPPORTED, label="other hint")), label="any value")
    assert (t.validate({"x": other}) is None) == member(other, hint), other
    near = near_miss(data, good)
    assert (t.validate({"x": near}) is None) == member(near, hint), near
    assert t.validate({}) is not None
    assert t.validate({"x": good, "y": 1}) is not None  # no unknown arguments


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(SCALARS) | SUPPORTED, st.lists(SCALAR_JSON | JSON, max_size=5))
def test_leaf_schemas_validate_exactly_their_values(hint: Any, others: list[Any]) -> None:
    t = tool_with_param(hint)
    for other in others:
        assert (t.validate({"x": other}) is None) == member(other, hint), other


@settings(max_examples=60, deadline=None)
@given(ANY_HINT)
def test_a_hint_without_schema_asks_for_an_explicit_one(hint: Any) -> None:
    if has_unsupported(hint):
        with pytest.raises(ToolDefinitionError, match=r"give input_schema=\.\.\. explicitly"):
            tool_with_param(hint)
    else:
        assert tool_with_param(hint).input_schema["properties"]["x"] == schema_for(hint)


def test_missing_hints_positional_only_and_self_reference_are_refused() -> None:
    with pytest.raises(ToolDefinitionError, match="parameter 'input' has no type hint"):

        @trio_agent.tool
        async def old_style(input, ctx):  # type: ignore[no-untyped-def]
            """Needs a schema."""

    with pytest.raises(ToolDefinitionError, match="cannot be passed by keyword"):

        @trio_agent.tool
        async def positional(a: int, /) -> str:
            """Positional only."""
            return ""  # pragma: no cover - never run here

    with pytest.raises(ToolDefinitionError, match="refers to itself"):
        schema_for(Node)
    with pytest.raises(ToolDefinitionError, match="needs a description"):

        @trio_agent.tool
        async def undocumented(a: int) -> str:
            return ""  # pragma: no cover - never run here

    with pytest.raises(ToolDefinitionError, match="needs a function"):
        trio_agent.tool(42)  # type: ignore[call-overload]


@attrs.frozen
class Node:
    children: list[Node]


@attrs.frozen
class Point:
    x: int
    y: float = 0.0


class Options(TypedDict, total=False):
    verbose: bool


async def test_bare_decorator_calls_with_fields_attrs_instances_and_the_context() -> None:
    seen: list[Any] = []

    @trio_agent.tool
    async def plot(
        points: list[Point],
        ctx: ToolContext,
        label: str = "none",
        options: Options | None = None,
    ) -> str:
        """Plot points."""
        seen.append((points, label, options, ctx.tool_use_id))
        return "plotted"

    assert plot.name == "plot"
    assert plot.description == "Plot points."
    assert "ctx" not in plot.input_schema["properties"]
    assert plot.input_schema["required"] == ["points"]
    out = await plot.run({"points": [{"x": 1}, {"x": 2, "y": 2.5}]}, ToolContext("t1", "plot"))
    assert out == "plotted"
    out = await plot.run(
        {"points": [], "label": "L", "options": {"verbose": True}}, ToolContext("t2", "plot")
    )
    assert seen == [
        ([Point(1), Point(2, 2.5)], "none", None, "t1"),
        ([], "L", {"verbose": True}, "t2"),
    ]


async def test_decorator_with_arguments_and_explicit_schema() -> None:
    @trio_agent.tool(name="Echo", timeout=5, concurrency_safe=True)
    async def echo(text: str) -> str:
        """Echo."""
        return text

    assert (echo.name, echo.timeout, echo.concurrency_safe) == ("Echo", 5, True)

    @trio_agent.tool(input_schema={"type": "object"})
    async def raw(input: Mapping[str, Any], ctx: ToolContext) -> str:
        """Raw input."""
        return f"{dict(input)} {ctx.tool_name}"

    assert await raw.run({"a": 1}, ToolContext("t", "raw")) == "{'a': 1} raw"


async def test_sync_tools_run_in_a_worker_thread_and_report_progress() -> None:
    reports: list[Any] = []

    @trio_agent.tool
    def count(n: int, ctx: ToolContext) -> str:
        """Count in a thread."""
        for i in range(n):
            ctx.progress(i)
        return threading.current_thread().name

    @trio_agent.tool(input_schema={"type": "object"})
    def legacy(input: Mapping[str, Any], ctx: ToolContext) -> str:
        """Sync with a schema."""
        return str(input["a"] + 1)

    main = threading.current_thread().name
    out = await count.run({"n": 3}, ToolContext("t", "count", report=reports.append))
    assert out != main
    assert reports == [0, 1, 2]
    assert await legacy.run({"a": 1}, ToolContext("t", "legacy")) == "2"


async def test_a_cancelled_sync_tool_is_abandoned_and_reports_nothing_after(
    autojump_clock: trio.testing.MockClock,
) -> None:
    release = threading.Event()
    done = threading.Event()
    reports: list[Any] = []

    @trio_agent.tool
    def stuck(ctx: ToolContext) -> str:
        """Waits for a release."""
        release.wait()
        ctx.progress("late")
        done.set()
        return "late"

    with trio.move_on_after(1) as scope:
        await stuck.run({}, ToolContext("t", "stuck", report=reports.append))
    assert scope.cancelled_caught  # answered at once, the thread still running
    release.set()
    await trio.to_thread.run_sync(done.wait)
    await trio.testing.wait_all_tasks_blocked()
    assert reports == []  # its progress after the call is dropped


@pytest.mark.parametrize("bad", [0, -1, float("nan"), "5", True])
def test_bad_timeouts_are_definition_errors(bad: Any) -> None:
    with pytest.raises(ToolDefinitionError, match="timeout"):

        @trio_agent.tool(timeout=bad)
        async def t(a: int) -> str:
            """T."""
            return ""  # pragma: no cover - never run here


async def _google(path: str, limit: int = 10, *, pattern: Annotated[str, "kept"] = "") -> str:
    """Read a file.

        An indented line stays indented.

    Args:
        path: The file, relative
            to the workspace.
        limit: How many lines.
        pattern: Not this one: the Annotated text wins.

    Returns:
        The file's text.

    Raises:
        OSError: not for the model.
    """
    return ""  # pragma: no cover - never run here


async def _numpy(path: str, limit: int = 10, *, pattern: Annotated[str, "kept"] = "") -> str:
    """Read a file.

        An indented line stays indented.

    Parameters
    ----------
    path : str
        The file, relative
        to the workspace.
    limit : int, optional
        How many lines.
    pattern : str
        Not this one: the Annotated text wins.

    Returns
    -------
    str
        The file's text.
    """
    return ""  # pragma: no cover - never run here


async def _sphinx(path: str, limit: int = 10, *, pattern: Annotated[str, "kept"] = "") -> str:
    """Read a file.

        An indented line stays indented.

    :param path: The file, relative
        to the workspace.
    :param int limit: How many lines.
    :param pattern: Not this one: the Annotated text wins.
    :returns: The file's text.
    """
    return ""  # pragma: no cover - never run here


@pytest.mark.parametrize("fn", [_google, _numpy, _sphinx], ids=["google", "numpy", "sphinx"])
def test_a_docstrings_parameters_describe_the_schema(fn: Any) -> None:
    made = trio_agent.tool(fn)
    assert made.description == (
        "Read a file.\n\n    An indented line stays indented.\n\nReturns: The file's text."
    )
    props = made.input_schema["properties"]
    assert props["path"]["description"] == "The file, relative\nto the workspace."
    assert props["limit"] == {"type": "integer", "description": "How many lines."}
    assert props["pattern"]["description"] == "kept"
    # a description given explicitly is the tool's; the parameters are still described
    named = trio_agent.tool(description="Reads.")(fn)
    assert named.description == "Reads."
    assert named.input_schema == made.input_schema
    # an explicit schema is left as it is
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    assert trio_agent.tool(input_schema=schema)(fn).input_schema == schema


def test_a_docstring_is_dedented() -> None:
    @trio_agent.tool
    async def look(a: int) -> str:
        """Look around.

        Two lines
            and an indented one.
        """
        return ""  # pragma: no cover - never run here

    assert look.description == "Look around.\n\nTwo lines\n    and an indented one."
    assert "description" not in look.input_schema["properties"]["a"]


def test_a_docstring_without_sections_needs_no_parser() -> None:
    code = (
        "import sys, trio_agent\n"
        "@trio_agent.tool\n"
        "async def t(a: int) -> str:\n"
        "    '''T.\n\n    More.\n    '''\n"
        "assert t.description == 'T.\\n\\nMore.', t.description\n"
        "print('griffe' in sys.modules)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "False"
