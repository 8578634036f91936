"""Tool, the tool() decorator, ToolContext, ToolOutput and the permission values."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

import trio_agent
from trio_agent import Allow, Deny, Reject, Tool, ToolContext, ToolDefinitionError, ToolUseBlock
from trio_agent._tools import plain_json

SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "lines": {"type": "array"}},
    "required": ["path"],
}


async def run(input: Mapping[str, Any], ctx: ToolContext) -> str:
    return "x"  # pragma: no cover - never run here


def test_validate_accepts_wire_inputs_and_names_the_error() -> None:
    read = Tool("Read", "read a file", SCHEMA, run)
    block = ToolUseBlock("t", "Read", {"path": "a", "lines": (1, 2)})
    assert read.validate(block.input) is None
    assert read.validate({"path": 3}) == "path: 3 is not of type 'string'"
    assert read.validate({}) == "'path' is a required property"


def test_plain_json_copies_mappings_and_tuples() -> None:
    block = ToolUseBlock("t", "Read", {"a": {"b": (1, {"c": 2})}})
    assert plain_json(block.input) == {"a": {"b": [1, {"c": 2}]}}
    assert type(plain_json(block.input)) is dict


def test_concurrency_safety() -> None:
    assert Tool("A", "d", SCHEMA, run, concurrency_safe=True).is_concurrency_safe({})
    assert not Tool("A", "d", SCHEMA, run).is_concurrency_safe({})

    def by_path(input: Mapping[str, Any]) -> bool:
        return input["path"].startswith("/tmp")

    checked = Tool("A", "d", SCHEMA, run, concurrency_safe=by_path)
    assert checked.is_concurrency_safe({"path": "/tmp/x"})
    assert not checked.is_concurrency_safe({"path": "/etc"})
    assert not checked.is_concurrency_safe({})  # the check raised: unsafe


def test_bad_definitions_are_typed_errors() -> None:
    with pytest.raises(ToolDefinitionError, match="invalid tool name"):
        Tool("no spaces", "d", SCHEMA, run)
    with pytest.raises(ToolDefinitionError, match="interrupt_behavior"):
        Tool("A", "d", SCHEMA, run, interrupt_behavior="stop")  # type: ignore[arg-type]
    with pytest.raises(ToolDefinitionError, match="invalid input_schema"):
        Tool("A", "d", {"type": "no-such-type"}, run)


def test_to_api() -> None:
    assert Tool("Read", "read a file", SCHEMA, run).to_api() == {
        "name": "Read",
        "description": "read a file",
        "input_schema": SCHEMA,
    }


def test_the_decorator() -> None:
    @trio_agent.tool(input_schema=SCHEMA, concurrency_safe=True, interrupt_behavior="cancel")
    async def grep(input: Mapping[str, Any], ctx: ToolContext) -> str:
        """Search files."""
        return "x"  # pragma: no cover

    assert (grep.name, grep.description, grep.concurrency_safe) == ("grep", "Search files.", True)
    assert grep.interrupt_behavior == "cancel"
    assert not grep.cancels_siblings_on_error

    named = trio_agent.tool(
        input_schema=SCHEMA, name="Bash", description="Run", cancels_siblings_on_error=True
    )(run)
    assert (named.name, named.description, named.cancels_siblings_on_error) == ("Bash", "Run", True)

    async def undocumented(input: Mapping[str, Any], ctx: ToolContext) -> str:
        return "x"  # pragma: no cover

    with pytest.raises(ToolDefinitionError, match="needs a description"):
        trio_agent.tool(input_schema=SCHEMA)(undocumented)


def test_tool_context_progress() -> None:
    seen: list[Any] = []
    ToolContext("t", "Read", report=seen.append).progress(1)
    ToolContext("t", "Read").progress(2)  # no listener: dropped
    assert seen == [1]


def test_permission_values() -> None:
    assert Allow().updated_input is None
    assert Deny().message == "Permission to use this tool was denied."
    assert Reject().message == "The user rejected this tool use."
