"""What a server lists, checked without trusting it (real server processes): 10,000
tools, catastrophic patterns, $refs that point nowhere, off the document or at
themselves, schemas the SDK refuses, tools that need MCP tasks."""

from __future__ import annotations

import logging
import threading
import urllib.request
from collections.abc import Callable
from typing import Any

import jsonschema
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent.mcp import _open as mcp_open
from trio_agent.mcp import open_mcp_tools
from trio_agent.mcp._schema import InputValidator, schema_problem
from trio_agent.testing import no_leaks

#: A generous bound on real seconds: a hang fails with a message, never a timing.
BOUND = 60

Raw = Callable[[dict[str, Any]], dict[str, Any]]


def tool(name: str, schema: Any, **extra: Any) -> dict[str, Any]:
    return {"name": name, "inputSchema": schema, **extra}


OBJECT = {"type": "object"}


async def test_10_000_tools_do_not_freeze_the_loop(
    raw_server: Raw, run_calls: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The schema checks run in a worker thread (never the loop's) and each distinct
    schema is checked once; a call's input is validated when it is made. Asserted by
    where and how often the check runs, not by a time."""
    loop_thread = threading.get_ident()
    checked_on: list[int] = []

    def recording(schema: Any) -> str | None:
        checked_on.append(threading.get_ident())
        return schema_problem(schema)

    monkeypatch.setattr(mcp_open, "schema_problem", recording)
    schemas = [
        {"type": "object", "properties": {"x": {"type": "string", "maxLength": 5 + i % 7}}}
        for i in range(10_000)
    ]
    listed = [tool(f"t{i}", schemas[i], description=f"tool {i}") for i in range(10_000)]
    with no_leaks(), trio.fail_after(BOUND):
        async with open_mcp_tools({"s": raw_server({"tools": listed})}) as tools:
            assert len(tools) == 10_000
            ran = await run_calls(
                tools, [("mcp__s__t9999", {"x": "ok"}), ("mcp__s__t7", {"x": 6 * "y"})]
            )
    assert ran.results["call_0"].content == "ok"
    assert ran.results["call_1"].is_error
    assert len(checked_on) == 7  # one per distinct schema
    assert loop_thread not in checked_on


async def test_a_catastrophic_pattern_does_not_freeze_the_loop(
    raw_server: Raw, run_calls: Any
) -> None:
    """Python's ``re`` would take about 2**30 steps on these inputs (the bound fails the
    test); RE2 is linear."""
    # Python's re takes about 2**n steps for n "a"s then a "b"; RE2 is linear.
    schema = {"type": "object", "properties": {"x": {"type": "string", "pattern": "^(a+)+$"}}}
    keys = {
        "type": "object",
        "patternProperties": {"^(a+)+$": {"type": "integer"}},
        "additionalProperties": False,
    }
    entry = raw_server({"tools": [tool("t", schema), tool("k", keys)]})
    with no_leaks(), trio.fail_after(BOUND):
        async with open_mcp_tools({"s": entry}) as tools:
            ran = await run_calls(
                tools,
                [
                    ("mcp__s__t", {"x": "a" * 30 + "b"}),
                    ("mcp__s__t", {"x": "a" * 30}),
                    ("mcp__s__k", {"a" * 30 + "b": 1}),
                    ("mcp__s__k", {"a" * 30: 1}),
                ],
            )
    r = ran.results
    assert r["call_0"].is_error
    assert not r["call_0"].started  # refused by the schema, never sent
    assert r["call_1"].content == "ok"
    assert r["call_2"].is_error
    assert not r["call_2"].started
    assert r["call_3"].content == "ok"


async def test_refs_nowhere_remote_or_to_themselves(
    raw_server: Raw, run_calls: Any, caplog: pytest.LogCaptureFixture, monkeypatch: Any
) -> None:
    fetched: list[Any] = []

    def no_network(*args: Any, **kwargs: Any) -> Any:
        fetched.append(args)
        raise AssertionError("a $ref was fetched")

    monkeypatch.setattr(urllib.request, "urlopen", no_network)
    listed = [
        tool(
            "good",
            {
                "$defs": {"n": {"type": "integer"}},
                "type": "object",
                "properties": {"a": {"$ref": "#/$defs/n"}},
            },
        ),
        tool("nowhere", {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}),
        tool(
            "remote",
            {"type": "object", "properties": {"a": {"$ref": "https://example.invalid/s.json"}}},
        ),
        tool("itself", {"type": "object", "$ref": "#"}),
        tool("itself_untyped", {"$ref": "#"}),  # the SDK refuses it too
        # Loops only on an input that has "a": left in, that call is an error.
        tool("loops", {"type": "object", "properties": {"a": {"$ref": "#/properties/a"}}}),
    ]
    with no_leaks(), trio.fail_after(BOUND):
        async with open_mcp_tools({"s": raw_server({"tools": listed})}) as tools:
            assert [t.name for t in tools] == ["mcp__s__good", "mcp__s__loops"]
            ran = await run_calls(
                tools,
                [
                    ("mcp__s__good", {"a": 1}),
                    ("mcp__s__good", {"a": "x"}),
                    ("mcp__s__loops", {"a": 1}),
                ],
            )
    r = ran.results
    assert r["call_0"].content == "ok"
    assert r["call_1"].is_error
    assert r["call_2"].is_error
    assert "refers to itself" in str(r["call_2"].content)
    assert not fetched
    skipped = " ".join(m for m in caplog.messages if "skipped" in m)
    for name in ("nowhere", "remote", "itself", "itself_untyped"):
        assert f"'{name}'" in skipped


async def test_a_bad_tool_or_one_that_needs_tasks_is_left_out_alone(
    raw_server: Raw, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="trio_agent.mcp")
    listed = [
        tool("t", OBJECT),
        tool("not_a_schema", 5),
        tool("bad_schema", {"type": "object", "properties": {"x": {"type": 7}}}),
        {"name": "no_schema"},
        tool("tasks", OBJECT, execution={"taskSupport": "required"}),
        tool("maybe_tasks", OBJECT, execution={"taskSupport": "optional"}),
    ]
    with no_leaks(), trio.fail_after(BOUND):
        async with open_mcp_tools({"s": raw_server({"tools": listed})}) as tools:
            names = [t.name for t in tools]
    assert names == ["mcp__s__t", "mcp__s__maybe_tasks"]
    skipped = " ".join(m for m in caplog.messages if "skipped" in m)
    for name in ("not_a_schema", "bad_schema", "no_schema", "tasks"):
        assert f"'{name}'" in skipped
    assert "taskSupport" in skipped


async def test_several_text_items_are_joined_with_a_newline(
    raw_server: Raw, run_calls: Any
) -> None:
    with no_leaks(), trio.fail_after(BOUND):
        async with open_mcp_tools({"s": raw_server({"texts": ["a", "b", "", "c"]})}) as tools:
            ran = await run_calls(tools, [("mcp__s__t", {})])
    assert ran.results["call_0"].content == "a\nb\n\nc"


# -- the checks themselves, against jsonschema as the model ------------------------------

# No "": jsonschema's additionalProperties forgets that the empty pattern matches
# every key (ours does not), so the model would be wrong there.
SAFE_PATTERNS = st.sampled_from(["^a", "b$", "^[a-c]+$", "x|y", "^\\d{2,3}$", "a.c"])
EVIL = st.sampled_from(
    [
        {"$ref": "#"},
        {"allOf": [{"$ref": "#"}]},
        {"$ref": "#/$defs/nowhere"},
        {"$ref": "https://example.invalid/x"},
        {"$ref": "other.json#/a"},
        {"properties": {"a": {"$ref": "#/properties/a"}}},
        {"pattern": "^(a+)+$"},
        {"pattern": "(?=a)"},  # RE2 has no lookahead: not checked
        {"type": 7},
    ]
)


def schemas(leaf: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    return st.recursive(
        leaf,
        lambda inner: st.one_of(
            st.builds(
                lambda p: {"type": "object", "properties": p},
                st.dictionaries(st.sampled_from("abc"), inner, max_size=3),
            ),
            st.builds(
                lambda p, s: {"patternProperties": {p: s}, "additionalProperties": False},
                SAFE_PATTERNS,
                inner,
            ),
            st.builds(lambda s: {"items": s}, inner),
            st.builds(lambda xs: {"anyOf": xs}, st.lists(inner, min_size=1, max_size=3)),
        ),
        max_leaves=6,
    )


SAFE_LEAVES = st.one_of(
    st.builds(lambda p: {"type": "string", "pattern": p}, SAFE_PATTERNS),
    st.sampled_from([{"type": "integer"}, {"type": "string"}, {}, {"minLength": 2}]),
)
VALUES = st.recursive(
    st.none() | st.integers(-3, 3) | st.text("abcxy19", max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text("abcxy", max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(schema=schemas(SAFE_LEAVES), value=VALUES)
def test_the_checks_agree_with_jsonschema_where_it_is_safe(
    schema: dict[str, Any], value: Any
) -> None:
    assert schema_problem(schema) is None
    ours = not list(InputValidator(schema).iter_errors(value))
    assert ours == jsonschema.Draft202012Validator(schema).is_valid(value)


@settings(max_examples=300, deadline=None)
@given(schema=schemas(st.one_of(SAFE_LEAVES, EVIL)), value=VALUES)
def test_no_schema_raises_or_fetches(schema: dict[str, Any], value: Any) -> None:
    # No fetch can happen: the registry's retrieve refuses (an attempt would raise
    # Unresolvable out of the check, failing the example).
    problem = schema_problem(schema)
    if problem is None:
        errors = list(InputValidator(schema).iter_errors(value))
        assert all(isinstance(e, jsonschema.ValidationError) for e in errors)
