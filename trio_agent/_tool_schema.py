"""A tool's ``input_schema`` from its function's type hints, and the input back
into those types.

``@trio_agent.tool`` without ``input_schema=`` reads the function's parameters:
each one (but a ``ToolContext`` parameter) is a property of the input object,
required unless it has a default. The hints understood, and their JSON Schema:

=====================================  ============================================
``str`` / ``int`` / ``float`` / ``bool``  ``string`` / ``integer`` / ``number`` / ``boolean``
``list`` / ``list[X]``                 ``array`` (of X)
``dict`` / ``dict[str, X]``            ``object`` (whose values are X)
``Literal[a, b, ...]``                 ``enum`` (str, int, float, bool or None values)
``X | None``, ``Optional[X]``, unions  ``anyOf``
a ``TypedDict``                        ``object`` with its keys, no others
an attrs class, a dataclass            ``object`` with its fields, no others
an ``enum.Enum``                       ``enum`` of its members' values
``Annotated[X, "text"]``               X, with ``"text"`` as its description
=====================================  ============================================

Anything else (``Any``, ``tuple``, a plain class, a missing hint) is a
:class:`~trio_agent.ToolDefinitionError` that asks for an explicit schema.

The docstring (:func:`read_docstring`) gives the tool's description, dedented,
and, from a Google ``Args:``, a NumPy ``Parameters`` or Sphinx ``:param x:``
section, each parameter's description (an ``Annotated`` text wins); those
sections are parsed with griffe, as pydantic-ai does, and are left out of the
description, which keeps the text and what the tool returns.

JSON has no separate integer type: ``1.0`` is a valid ``integer`` and arrives as
a float; ``number`` accepts ints as Python's ``float`` hint does.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import re
import types
import typing
from collections.abc import Callable, Mapping
from typing import (
    Any,
    Literal,
    Union,
    cast,
    get_args,
    get_origin,
    get_type_hints,
    is_typeddict,
)

import attrs
import jsonschema

from ._exceptions import ToolDefinitionError

__all__ = [
    "Signature",
    "convert",
    "describe_parameters",
    "read_docstring",
    "schema_for",
    "signature_of",
]

_SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}
_LITERAL_TYPES = (str, int, float, bool, type(None))


class _Unsupported(Exception):
    """A hint with no JSON Schema; the message names it."""


def schema_for(hint: Any) -> dict[str, Any]:
    """The JSON Schema of the values of *hint*.

    Raises:
        ToolDefinitionError: the hint is not one of those understood.
    """
    try:
        return _schema(hint, ())
    except _Unsupported as exc:
        raise ToolDefinitionError(str(exc)) from None


def _schema(hint: Any, seen: tuple[Any, ...]) -> dict[str, Any]:
    if hint in _SCALARS:
        return {"type": _SCALARS[hint]}
    if hint is type(None) or hint is None:
        return {"type": "null"}
    origin = get_origin(hint)
    args = get_args(hint)
    if origin is typing.Annotated:
        schema = _schema(args[0], seen)
        texts = [a for a in args[1:] if isinstance(a, str)]
        return {**schema, "description": texts[0]} if texts else schema
    if hint is list or origin is list:
        return {"type": "array", "items": _schema(args[0], seen)} if args else {"type": "array"}
    if hint is dict or origin is dict:
        if not args:
            return {"type": "object"}
        if args[0] is not str:
            raise _Unsupported(f"dict keys must be str in JSON, not {_name(args[0])}")
        return {"type": "object", "additionalProperties": _schema(args[1], seen)}
    if origin is Literal:
        for value in args:
            if not isinstance(value, _LITERAL_TYPES):
                raise _Unsupported(f"Literal value {value!r} is not a JSON value")
        return {"enum": list(args)}
    if origin is Union or origin is types.UnionType:
        return {"anyOf": [_schema(a, seen) for a in args]}
    if hint in seen:
        raise _Unsupported(f"{_name(hint)} refers to itself")
    if is_typeddict(hint):
        hints = _hints(hint)
        required = sorted(hint.__required_keys__)
        return _object({k: _schema(h, (*seen, hint)) for k, h in hints.items()}, required)
    if isinstance(hint, type) and attrs.has(hint):
        fields = [f for f in attrs.fields(hint) if f.init]
        types_ = _field_types(hint)
        props = {f.alias: _schema(types_[f.name], (*seen, hint)) for f in fields}
        return _object(props, [f.alias for f in fields if f.default is attrs.NOTHING])
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        fields = [f for f in dataclasses.fields(hint) if f.init]
        hints = _hints(hint)
        props = {f.name: _schema(hints[f.name], (*seen, hint)) for f in fields}
        return _object(props, [f.name for f in fields if not _has_default(f)])
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        values = [m.value for m in hint]
        for value in values:
            if not isinstance(value, _LITERAL_TYPES):
                raise _Unsupported(f"{_name(hint)} has a value {value!r} that is not a JSON value")
        return {"enum": values}
    raise _Unsupported(f"no JSON Schema for the type hint {_name(hint)}")


def _has_default(field: dataclasses.Field[Any]) -> bool:
    return (
        field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING
    )


def _object(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


def _hints(obj: Any) -> dict[str, Any]:
    try:
        return get_type_hints(obj, include_extras=True)
    except Exception as exc:  # a forward reference that does not resolve, ...
        raise _Unsupported(f"cannot read the type hints of {_name(obj)}: {exc}") from None


def _field_types(cls: Any) -> dict[str, Any]:
    """The type of each init field of an attrs class (annotation, or ``type=``)."""
    hints = _hints(cls)
    found: dict[str, Any] = {}
    for f in attrs.fields(cls):
        kind = hints.get(f.name, f.type)
        if kind is None:
            raise _Unsupported(f"field {f.name!r} of {_name(cls)} has no type")
        found[f.name] = kind
    return found


def _name(hint: Any) -> str:
    return getattr(hint, "__qualname__", None) or repr(hint)


def convert(hint: Any, value: Any) -> Any:
    """*value*, valid for ``schema_for(hint)``, with attrs classes and dataclasses
    built from their objects and enum members from their values (anywhere inside);
    everything else is left as it is."""
    origin = get_origin(hint)
    args = get_args(hint)
    if origin is typing.Annotated:
        return convert(args[0], value)
    if origin is list and args and isinstance(value, list):
        return [convert(args[0], v) for v in value]  # pyright: ignore[reportUnknownVariableType]
    if origin is dict and args and isinstance(value, dict):
        return {k: convert(args[1], v) for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType]
    if origin is Union or origin is types.UnionType:
        # The first member whose schema the value meets (the schema said one does).
        for member in args:
            if _matches(member, value):
                return convert(member, value)
        return value
    if is_typeddict(hint) and isinstance(value, dict):
        hints = _hints(hint)
        return {k: convert(hints[k], v) if k in hints else v for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType]
    if isinstance(hint, type) and attrs.has(hint) and isinstance(value, dict):
        types_ = _field_types(hint)
        by_alias = {f.alias: f.name for f in attrs.fields(hint) if f.init}
        kwargs = {k: convert(types_[by_alias[k]], v) for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType]
        return hint(**kwargs)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint) and isinstance(value, dict):
        hints = _hints(hint)
        return hint(**{k: convert(hints[k], v) for k, v in value.items()})  # pyright: ignore[reportUnknownVariableType]
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return hint(value)
    return value


def _matches(hint: Any, value: Any) -> bool:
    return bool(jsonschema.Draft202012Validator(_schema(hint, ())).is_valid(value))


@attrs.frozen
class Signature:
    """What ``@tool`` read from a function: its input schema, the hint of each
    input parameter, and the name of the parameter that gets the ``ToolContext``."""

    input_schema: dict[str, Any]
    hints: Mapping[str, Any]
    context_param: str | None


def signature_of(fn: Callable[..., Any], context_type: type) -> Signature:
    """Read *fn*'s parameters into a :class:`Signature`.

    Raises:
        ToolDefinitionError: a parameter cannot be passed by keyword, has no hint,
            or its hint has no JSON Schema; the message asks for ``input_schema=``.
    """
    label = getattr(fn, "__name__", repr(fn))
    ask = "give input_schema=... explicitly"
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError) as exc:
        raise ToolDefinitionError(f"tool {label!r}: cannot read its signature ({exc})") from None
    try:
        hints = get_type_hints(fn, include_extras=True)
    except Exception as exc:
        raise ToolDefinitionError(
            f"tool {label!r}: cannot read its type hints ({exc}); {ask}"
        ) from None
    props: dict[str, Any] = {}
    required: list[str] = []
    inputs: dict[str, Any] = {}
    context_param: str | None = None
    for param in params.values():
        if param.kind not in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY):
            raise ToolDefinitionError(
                f"tool {label!r}: parameter {param.name!r} cannot be passed by keyword; {ask}"
            )
        if param.name not in hints:
            raise ToolDefinitionError(
                f"tool {label!r}: parameter {param.name!r} has no type hint; {ask}"
            )
        hint = hints[param.name]
        if hint is context_type:
            context_param = param.name
            continue
        try:
            props[param.name] = _schema(hint, ())
        except _Unsupported as exc:
            raise ToolDefinitionError(
                f"tool {label!r}: parameter {param.name!r}: {exc}; {ask}"
            ) from None
        inputs[param.name] = hint
        if param.default is param.empty:
            required.append(param.name)
    return Signature(_object(props, required), inputs, context_param)


#: A line that opens a section of a Google, NumPy or Sphinx docstring; a docstring
#: without one is only dedented (griffe, ~60 ms to import, is not needed).
_SECTION = re.compile(
    r"^[ \t]*(?:(?:Args|Arguments|Params|Parameters|Keyword Args|Keyword Arguments|"
    r"Other Parameters|Returns?|Yields?|Raises|Examples?|Notes?|Attributes|Warnings?)"
    r":[ \t]*$|(?:Parameters|Other Parameters|Returns|Yields|Raises)[ \t]*\n[ \t]*-{3,}"
    r"|:(?:param|parameter|arg|argument|key|keyword|type|returns?|rtype|raises?)\b)",
    re.MULTILINE,
)
_SPHINX = re.compile(r"^[ \t]*:(?:param|parameter|arg|argument|key|keyword)\b", re.MULTILINE)
_NUMPY = re.compile(r"^[ \t]*[A-Z][a-z]+(?: [A-Z][a-z]+)?[ \t]*\n[ \t]*-{3,}[ \t]*$", re.MULTILINE)


def read_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """A tool's description and its parameters' descriptions, from a docstring.

    The description is the docstring dedented (``inspect.cleandoc``). With a
    parameters section (Google ``Args:``, NumPy ``Parameters``, Sphinx ``:param
    x:``; the style is told by its markers), that section becomes the parameter
    descriptions, and the description keeps the text and the ``Returns`` section.

    Example::

        def read(path: str) -> str:
            \"""Read a file.

            Args:
                path: relative to the workspace.
            \"""

        read_docstring(read.__doc__)  # ("Read a file.", {"path": "relative to the workspace."})
    """
    text = inspect.cleandoc(doc)
    if not _SECTION.search(text):
        return text, {}
    # Lazy: only a docstring with sections needs the parser.
    import griffe

    options: griffe.GoogleOptions | griffe.NumpyOptions | griffe.SphinxOptions
    if _SPHINX.search(text):
        style, options = "sphinx", griffe.SphinxOptions(warnings=False)
    elif _NUMPY.search(text):
        style, options = "numpy", griffe.NumpyOptions(warnings=False)
    else:
        options = griffe.GoogleOptions(
            warnings=False, returns_named_value=False, returns_multiple_items=False
        )
        style = "google"
    sections = griffe.Docstring(text, lineno=1, parser=style, parser_options=options).parse()
    params: dict[str, str] = {}
    parts: list[str] = []
    for section in sections:
        if isinstance(section, griffe.DocstringSectionParameters):
            for param in section.value:
                if param.description:
                    params.setdefault(param.name.lstrip("*"), param.description)
        elif isinstance(section, griffe.DocstringSectionText):
            parts.append(section.value)
        elif isinstance(section, griffe.DocstringSectionReturns):
            returned = "\n".join(r.description for r in section.value if r.description)
            if returned:
                parts.append(f"Returns: {returned}")
    if not params:
        return text, {}
    return ("\n\n".join(p.strip() for p in parts if p.strip()) or text), params


def describe_parameters(
    schema: Mapping[str, Any], descriptions: Mapping[str, str]
) -> dict[str, Any]:
    """*schema* (an object's) with *descriptions* on its properties; a property's
    own description (from ``Annotated``) is kept."""
    props = schema.get("properties")
    if not descriptions or not isinstance(props, Mapping):
        return dict(schema)
    described = {
        name: (
            {**prop, "description": descriptions[name]}
            if name in descriptions and "description" not in prop
            else prop
        )
        for name, prop in cast("Mapping[str, Mapping[str, Any]]", props).items()
    }
    return {**schema, "properties": described}
