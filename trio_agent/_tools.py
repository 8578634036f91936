"""Tools: what the model may call, and what a running tool sees.

A :class:`Tool` is a value: a name, a JSON Schema for its input, an async ``run``
and the scheduling facts the executor needs (concurrency safety, interrupt
behaviour, whether its error cancels its siblings).

Example::

    @trio_agent.tool(
        input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
        concurrency_safe=True,
    )
    async def read(input, ctx):
        "Read a file."
        ctx.progress("reading")
        return pathlib.Path(input["path"]).read_text()
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, TypeAlias, cast

import attrs
import jsonschema
import jsonschema.exceptions
import jsonschema.protocols

from ._exceptions import ToolDefinitionError
from ._messages import ContentBlock

__all__ = ["Tool", "ToolContext", "ToolOutput", "ToolReturn", "tool"]

InterruptBehavior: TypeAlias = Literal["block", "cancel"]
ContextModifier: TypeAlias = Callable[[Any], Any]

_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")


@attrs.frozen
class ToolOutput:
    """What a tool returns when it needs more than a string.

    ``context_modifier`` is a function ``context -> context``; the executor applies
    the modifiers of non-concurrency-safe tools to its shared context, in tool order.
    """

    content: str | Sequence[ContentBlock]
    is_error: bool = False
    context_modifier: ContextModifier | None = None


ToolReturn: TypeAlias = "str | Sequence[ContentBlock] | ToolOutput"


@attrs.define(eq=False)
class ToolContext:
    """What a running tool knows about its call and its turn."""

    tool_use_id: str
    tool_name: str
    #: The executor's shared context value when this tool started.
    context: Any = None
    _report: Callable[[Any], None] = attrs.field(default=lambda _data: None, alias="report")

    def progress(self, data: Any) -> None:
        """Report progress; never blocks, delivered at once out of band."""
        self._report(data)


def plain_json(value: Any) -> Any:
    """*value* with every mapping turned into a ``dict`` and tuple into a ``list``.

    JSON Schema validators and ``json.dumps`` only know ``dict`` and ``list``; wire
    values keep their input as read-only mappings.
    """
    if isinstance(value, Mapping):
        return {str(k): plain_json(v) for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, (list, tuple)):
        return [plain_json(v) for v in value]  # pyright: ignore[reportUnknownVariableType]
    return value


def _check_behavior(_inst: Any, _attr: Any, value: str) -> None:
    if value not in ("block", "cancel"):
        raise ToolDefinitionError(f"interrupt_behavior must be 'block' or 'cancel', not {value!r}")


def _check_cap(_inst: Any, _attr: Any, value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ToolDefinitionError(f"max_result_chars must be an int >= 1 or None, not {value!r}")


def _check_name(_inst: Any, _attr: Any, value: str) -> None:
    if not _NAME.match(value):
        raise ToolDefinitionError(f"invalid tool name {value!r}: use 1-128 of [a-zA-Z0-9_-]")


@attrs.frozen(eq=False)
class Tool:
    """A tool the model may call.

    Args:
        name: the name the model uses.
        description: what the tool does, for the model.
        input_schema: a JSON Schema for the input object.
        run: ``async (input, ctx) -> str | list of blocks | ToolOutput``.
        concurrency_safe: True, or a function of the validated input; tools that
            are safe may run together; a check that raises counts as unsafe.
        interrupt_behavior: ``"cancel"`` to stop when the user types a new message,
            ``"block"`` (default) to run on.
        cancels_siblings_on_error: an error result of this tool cancels the other
            tools of the same answer (as Bash does in Claude Code).
        max_result_chars: the most characters of text this tool's result keeps
            (None: the executor's / session's cap, 100,000 by default); the rest is
            cut with a note of how much.
    """

    name: str = attrs.field(validator=_check_name)
    description: str
    input_schema: Mapping[str, Any]
    run: Callable[[Mapping[str, Any], ToolContext], Awaitable[ToolReturn]]
    concurrency_safe: bool | Callable[[Mapping[str, Any]], bool] = attrs.field(
        default=False, kw_only=True
    )
    interrupt_behavior: InterruptBehavior = attrs.field(
        default="block", kw_only=True, validator=_check_behavior
    )
    cancels_siblings_on_error: bool = attrs.field(default=False, kw_only=True)
    max_result_chars: int | None = attrs.field(default=None, kw_only=True, validator=_check_cap)
    _validator: jsonschema.protocols.Validator = attrs.field(init=False, repr=False)

    @_validator.default  # pyright: ignore[reportAttributeAccessIssue,reportUntypedFunctionDecorator]
    def _compile(self) -> jsonschema.protocols.Validator:
        # Compiled once per tool: validation is on the hot path of add_tool().
        cls = jsonschema.validators.validator_for(self.input_schema)  # pyright: ignore
        try:
            cls.check_schema(self.input_schema)
        except jsonschema.exceptions.SchemaError as exc:
            raise ToolDefinitionError(
                f"tool {self.name!r}: invalid input_schema: {exc.message}"
            ) from exc
        return cls(self.input_schema)  # pyright: ignore[reportUnknownVariableType]

    def validate(self, input: Mapping[str, Any]) -> str | None:
        """The first schema error for *input* as a readable message, or None.

        Any mapping is accepted (``ToolUseBlock.input`` is a read-only proxy); it is
        checked as the JSON object it stands for.
        """
        error = cast(
            "jsonschema.exceptions.ValidationError | None",
            jsonschema.exceptions.best_match(self._validator.iter_errors(plain_json(input))),
        )
        if error is None:
            return None
        path = cast("Iterable[object]", error.absolute_path)
        where = "/".join(str(p) for p in path)
        message = str(error.message)
        return f"{where}: {message}" if where else message

    def is_concurrency_safe(self, input: Mapping[str, Any]) -> bool:
        """Whether this call may run beside others; a raising check means no."""
        if isinstance(self.concurrency_safe, bool):
            return self.concurrency_safe
        try:
            return bool(self.concurrency_safe(input))
        except Exception:
            return False

    def to_api(self) -> dict[str, Any]:
        """The tool as a Messages API ``tools`` entry."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": dict(self.input_schema),
        }


def tool(
    *,
    input_schema: Mapping[str, Any],
    name: str | None = None,
    description: str | None = None,
    concurrency_safe: bool | Callable[[Mapping[str, Any]], bool] = False,
    interrupt_behavior: InterruptBehavior = "block",
    cancels_siblings_on_error: bool = False,
    max_result_chars: int | None = None,
) -> Callable[[Callable[[Mapping[str, Any], ToolContext], Awaitable[ToolReturn]]], Tool]:
    """Build a :class:`Tool` from an async function; name and description default to
    the function's name and docstring."""

    def decorate(fn: Callable[[Mapping[str, Any], ToolContext], Awaitable[ToolReturn]]) -> Tool:
        doc = description if description is not None else (fn.__doc__ or "").strip()
        if not doc:
            raise ToolDefinitionError(f"tool {fn.__name__!r} needs a description or docstring")
        return Tool(
            name=name or fn.__name__,
            description=doc,
            input_schema=input_schema,
            run=fn,
            concurrency_safe=concurrency_safe,
            interrupt_behavior=interrupt_behavior,
            cancels_siblings_on_error=cancels_siblings_on_error,
            max_result_chars=max_result_chars,
        )

    return decorate
