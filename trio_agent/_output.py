"""Typed results: what ``TurnOptions(output_type=...)`` asks of a turn's final answer.

An output type is an attrs class, a dataclass, a ``TypedDict``, a ``Literal``, an
``enum.Enum``, a scalar, a ``list`` of those (any hint ``@tool`` understands, see
:mod:`trio_agent._tool_schema`), or an explicit JSON Schema (a mapping; the value is
then the plain JSON). :func:`output_spec` turns it into an :class:`OutputSpec`: the
JSON Schema the model is given, and how an answer becomes the value.

The model is given the schema one of two ways (``TurnOptions.output_mode``): the
provider's structured output (Anthropic's ``output_config.format``, OpenAI's
``text.format`` / ``response_format``), where the final answer's text is the JSON;
or a final-result tool (:data:`OUTPUT_TOOL_NAME`) the model must call, whose input
is the value. A schema that is not an object's is wrapped as ``{"result": ...}``
either way (tool inputs are objects; providers ask for an object at the top).

The loop builds the value (:meth:`OutputSpec.build`: validated against the schema,
then constructed), then runs the output validators, each of which may refuse it by
raising :class:`OutputRejected` with a reason. An invalid or refused value is sent
back to the model with the reason and tried again, ``output_retries`` times; past
that the turn ends ``output_invalid`` with an :class:`OutputValidationError`.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeAlias, cast

import attrs
import jsonschema
import jsonschema.exceptions

from ._exceptions import ToolDefinitionError, TrioAgentError, excerpt
from ._tool_schema import convert, schema_for

__all__ = [
    "OUTPUT_TOOL_NAME",
    "OutputRejected",
    "OutputSpec",
    "OutputValidationError",
    "OutputValidator",
    "output_spec",
    "run_validators",
]

#: The name of the final-result tool (when the provider's structured output is not used).
OUTPUT_TOOL_NAME = "final_result"
#: What the model is told about the final-result tool.
OUTPUT_TOOL_DESCRIPTION = (
    "Give the final result of the task. Call this tool exactly once, when you are done,"
    " with the result as its input; the turn ends when it is accepted."
)

#: ``(value) -> None`` or ``async (value) -> None``; raise :class:`OutputRejected` to refuse.
OutputValidator: TypeAlias = Callable[[Any], Awaitable[None] | None]


class OutputRejected(Exception):
    """Raised by an output validator to refuse a value: the model reads *message*
    and answers again (up to ``output_retries`` times)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class OutputValidationError(TrioAgentError):
    """The turn's typed output stayed invalid (or refused by a validator) past
    ``output_retries``: ``TurnEnd.error`` of a turn that ended ``output_invalid``.

    Attributes:
        message: why the last attempt was refused.
        attempts: how many answers were refused.
    """

    def __init__(self, message: str, attempts: int) -> None:
        super().__init__(f"the output was refused {attempts} time(s); last: {message}")
        self.message = message
        self.attempts = attempts


class InvalidOutput(Exception):
    """One answer's value does not meet the schema (internal: becomes a retry)."""


def _strip_fences(text: str) -> str:
    """JSON inside a Markdown code fence (some models add one) as the bare JSON."""
    stripped = text.strip()
    if stripped.startswith("```") and stripped.endswith("```") and "\n" in stripped:
        body = stripped[3:-3]
        return body.split("\n", 1)[1] if "\n" in body else body
    return stripped


@attrs.frozen(eq=False)
class OutputSpec:
    """The typed output of a turn: its schema and how a JSON value becomes it.

    Attributes:
        hint: the output type, or None for an explicit JSON Schema.
        schema: the JSON Schema of the value.
        wrapped: the model gives ``{"result": value}`` (the schema is not an object's).
        name: the schema's name in requests (and the final-result tool's).
    """

    hint: Any
    schema: Mapping[str, Any]
    wrapped: bool
    name: str = OUTPUT_TOOL_NAME
    _validator: Any = attrs.field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "_validator", jsonschema.Draft202012Validator(self.schema))

    @property
    def request_schema(self) -> dict[str, Any]:
        """The JSON Schema sent to the model (the tool's input, the answer's JSON)."""
        if not self.wrapped:
            return dict(self.schema)
        return {
            "type": "object",
            "properties": {"result": dict(self.schema)},
            "required": ["result"],
            "additionalProperties": False,
        }

    def unwrap(self, data: Any) -> Any:
        """The value inside what the model gave (``{"result": value}`` when wrapped)."""
        if not self.wrapped:
            return data
        if not isinstance(data, Mapping) or "result" not in data:
            raise InvalidOutput('the output must be an object {"result": ...}')
        return cast("Mapping[str, Any]", data)["result"]

    def build(self, data: Any) -> Any:
        """The value the model gave in *data* (a tool's input, the answer's parsed
        JSON), validated against the schema and built (attrs classes, dataclasses,
        enums...).

        Raises:
            InvalidOutput: *data* does not meet the schema; the message says where.
        """
        value = self.unwrap(data)
        errors: Any = self._validator.iter_errors(value)
        error = cast(
            "jsonschema.exceptions.ValidationError | None",
            jsonschema.exceptions.best_match(errors),
        )
        if error is not None:
            where = "/".join(str(p) for p in cast("list[object]", list(error.absolute_path)))
            at = f" at {where!r}" if where else ""
            raise InvalidOutput(f"the output does not match its schema{at}: {error.message}")
        if self.hint is None:
            return value
        try:
            return convert(self.hint, value)
        except Exception as exc:  # a constructor's own check (an attrs validator...)
            raise InvalidOutput(
                f"the output could not be built: {type(exc).__name__}: {exc}"
            ) from None

    def parse_text(self, text: str) -> Any:
        """The value of an answer whose text is the JSON (structured output).

        Raises:
            InvalidOutput: the text is not JSON, or not of the schema.
        """
        try:
            data = json.loads(_strip_fences(text))
        except (ValueError, RecursionError) as exc:
            raise InvalidOutput(
                f"the answer is not the JSON of the output ({exc}): {excerpt(text)}"
            ) from None
        return self.build(data)


def _check_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    try:
        plain = json.loads(json.dumps(schema))
        jsonschema.Draft202012Validator.check_schema(plain)
    except jsonschema.exceptions.SchemaError as exc:
        raise ValueError(f"output_type is not a valid JSON Schema: {exc.message}") from None
    except (TypeError, ValueError, RecursionError) as exc:
        raise TypeError(f"output_type is not a JSON Schema (not JSON: {exc})") from None
    if not isinstance(plain, dict):  # pragma: no cover - a Mapping dumps as an object
        raise TypeError("output_type must be a JSON Schema object")
    return cast("dict[str, Any]", plain)


def output_spec(output_type: Any) -> OutputSpec | None:
    """The :class:`OutputSpec` of *output_type* (None for None).

    Raises:
        TypeError: *output_type* is neither a type the schema code understands
            nor a JSON Schema mapping.
        ValueError: a mapping that is not a valid JSON Schema.
    """
    if output_type is None:
        return None
    if isinstance(output_type, Mapping):
        schema = _check_schema(cast("Mapping[str, Any]", output_type))
        hint = None
    else:
        try:
            schema = schema_for(output_type)
        except ToolDefinitionError as exc:
            raise TypeError(f"output_type {output_type!r:.80}: {exc}") from None
        except Exception as exc:  # an unhashable or odd value handed in as a type
            raise TypeError(
                f"output_type must be a type or a JSON Schema, not {output_type!r:.80}"
            ) from exc
        hint = output_type
    wrapped = schema.get("type") != "object"
    return OutputSpec(hint, schema, wrapped)


async def run_validators(validators: Sequence[OutputValidator], value: Any) -> str | None:
    """Run each validator on *value*: the first refusal's message, or None.

    An exception other than :class:`OutputRejected` is raised as it is.
    """
    for validate in validators:
        try:
            result = validate(value)
            if inspect.isawaitable(result):
                await result
        except OutputRejected as exc:
            return exc.message or "the output was rejected"
    return None
