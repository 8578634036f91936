"""One tool call as the executor tracks it, and the pure steps around running it:
checking its input (and so its concurrency safety) and reading what the tool
returned."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, TypeAlias, get_args

import attrs
import trio

from .._exceptions import excerpt
from .._messages import ContentBlock, ToolUseBlock
from .._tools import ContextModifier, Tool, ToolOutput, plain_json
from ._results import ToolResult, summarize_call

__all__ = ["Call", "CallState", "check_input", "read_return"]

_BLOCK_TYPES: tuple[type, ...] = get_args(ContentBlock)

CallState: TypeAlias = Literal["queued", "executing", "finished"]


@attrs.define(eq=False)
class Call:
    """One added ``tool_use`` and where it is in its life."""

    block: ToolUseBlock
    tool: Tool | None
    safe: bool
    input_error: str | None
    state: CallState = "queued"
    started: bool = False  # tool.run() was called
    result: ToolResult | None = None
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)

    def summary(self) -> str:
        return summarize_call(self.block.name, self.block.input)


def check_input(tool: Tool, block: ToolUseBlock) -> tuple[str | None, bool]:
    """The input's error (None if valid) and whether the call is concurrency-safe.

    Safety is decided on the validated input; an invalid input, or a safety
    check that raises, makes the call unsafe.
    """
    if block.invalid_input is not None:
        return f"the input is not valid JSON: {excerpt(block.invalid_input)}", False
    error = tool.validate(block.input)
    if error is not None:
        return error, False
    return None, tool.is_concurrency_safe(plain_json(block.input))


def read_return(
    value: Any,
) -> tuple[str | tuple[ContentBlock, ...], bool, ContextModifier | None] | None:
    """What a tool's ``run`` returned as (content, is_error, context modifier), or
    None if it is not a str, a sequence of content blocks or a ToolOutput."""
    modifier = None
    is_error = False
    content: Any = value
    if isinstance(value, ToolOutput):
        content, is_error, modifier = value.content, value.is_error, value.context_modifier
    if isinstance(content, str):
        return content, is_error, modifier
    if isinstance(content, Sequence) and all(isinstance(b, _BLOCK_TYPES) for b in content):  # pyright: ignore[reportUnknownVariableType]
        return tuple(content), is_error, modifier  # pyright: ignore[reportUnknownArgumentType,reportUnknownVariableType]
    return None
