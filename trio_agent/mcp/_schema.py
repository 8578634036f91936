"""A server's input schemas, checked without trusting them.

A schema comes from the server, so it may be slow, broken or hostile; the checks
run on every ``add_tool()``, in the loop. So:

- ``pattern`` / ``patternProperties`` (and the ``additionalProperties`` they shape)
  run on RE2, which is linear in the input: ``^(a+)+$`` cannot freeze the loop. A
  pattern RE2 cannot compile (a lookaround, a backreference) is not checked: the
  server still checks its own input.
- ``$ref`` is never fetched: the registry refuses every retrieval. At listing,
  :func:`schema_problem` (run in a worker thread) names a schema that is invalid,
  whose ``$ref`` points nowhere or off the document, or that refers to itself
  without end; that tool is left out. A ``$ref`` that still fails on some input
  (or recurses without end) is that call's error, never an exception.
- The validator is compiled on the first call of the tool, not at listing: 10,000
  tools cost nothing until used.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import Any, cast

import attrs
import jsonschema
import jsonschema.exceptions
import jsonschema.protocols
import jsonschema.validators
import jsonschema_specifications
import re2
import referencing
import referencing.exceptions
import referencing.jsonschema
from jsonschema.exceptions import ValidationError

__all__ = ["InputValidator", "schema_problem"]

Validator = jsonschema.protocols.Validator


def _refuse(uri: str) -> referencing.Resource[Any]:
    # Every $ref off the document would be a fetch the server chose: never.
    raise referencing.exceptions.NoSuchResource(ref=uri)


#: The registry of every MCP schema; jsonschema adds the metaschemas to it.
REGISTRY: referencing.Registry[Any] = referencing.Registry(retrieve=_refuse)


@functools.lru_cache(maxsize=4096)
def _regex(pattern: str) -> Any:
    """The RE2 regex of *pattern*, or None if RE2 cannot compile it."""
    try:
        return re2.compile(pattern)
    except Exception:  # re2's own error type is private
        return None


def _search(pattern: str, text: str) -> bool | None:
    regex = _regex(pattern)
    return None if regex is None else regex.search(text) is not None


def _pattern(validator: Any, pattern: str, instance: Any, _schema: Any) -> Iterator[Any]:
    if validator.is_type(instance, "string") and _search(pattern, instance) is False:
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: Mapping[str, Any], instance: Any, _schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in cast("Mapping[str, Any]", instance).items():
            if _search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(
    validator: Any, additional: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    known = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = [
        key
        for key in cast("Mapping[str, Any]", instance)
        if key not in known and not any(_search(p, key) for p in patterns)
    ]
    if validator.is_type(additional, "object"):
        for key in extras:
            yield from validator.descend(instance[key], additional, path=key)
    elif additional is False and extras:
        shown = ", ".join(repr(key) for key in sorted(extras))
        yield ValidationError(f"Additional properties are not allowed ({shown} unexpected)")


_KEYWORDS = {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
}


@functools.cache
def _linear(cls: type[Validator]) -> type[Validator]:
    """*cls* with the regex keywords on RE2."""
    return cast("type[Validator]", jsonschema.validators.extend(cls, validators=_KEYWORDS))


def _compile(schema: Mapping[str, Any]) -> Validator:
    return _linear(jsonschema.validators.validator_for(schema))(schema, registry=REGISTRY)


def _refs(value: Any) -> Iterator[str]:
    """Every ``$ref`` in a schema (a property named ``$ref`` is a false alarm at worst)."""
    if isinstance(value, Mapping):
        for key, item in cast("Mapping[str, Any]", value).items():
            if key == "$ref" and isinstance(item, str):
                yield item
            else:
                yield from _refs(item)
    elif isinstance(value, list):
        for item in cast("list[Any]", value):
            yield from _refs(item)


def _has_nested_id(value: Any, top: bool = True) -> bool:
    if isinstance(value, Mapping):
        items = cast("Mapping[str, Any]", value)
        if not top and isinstance(items.get("$id"), str):
            return True
        return any(_has_nested_id(v, False) for v in items.values())
    if isinstance(value, list):
        return any(_has_nested_id(v, False) for v in cast("list[Any]", value))
    return False


def _why(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "it refers to itself without end"
    if isinstance(exc, referencing.exceptions.Unresolvable):
        return f"a $ref does not resolve within the schema ({exc.ref!r}; nothing is fetched)"
    return f"{type(exc).__name__}: {exc}"


def schema_problem(schema: Mapping[str, Any]) -> str | None:
    """Why *schema* cannot be a tool's input schema, or None. Pure, and may be slow:
    run it off the loop."""
    try:
        jsonschema.validators.validator_for(schema).check_schema(dict(schema))
    except jsonschema.exceptions.SchemaError as exc:
        return f"invalid input_schema: {exc.message}"
    except RecursionError as exc:
        return _why(exc)
    try:
        validator = _compile(schema)
        # Resolved from the root; a schema that moves its base with a nested $id is
        # left to the check at call time.
        if not _has_nested_id(schema):
            specification = referencing.jsonschema.specification_with(
                str(schema.get("$schema", "")), default=referencing.jsonschema.DRAFT202012
            )
            registry = jsonschema_specifications.REGISTRY.combine(REGISTRY)
            resolver = registry.resolver_with_root(specification.create_resource(schema))
            for ref in _refs(schema):
                resolver.lookup(ref)
        # A schema that loops on its own (``{"$ref": "#"}``) loops on any input.
        for instance in ({}, None):  # pyright: ignore[reportUnknownVariableType]
            list(validator.iter_errors(instance))
    except (referencing.exceptions.Unresolvable, RecursionError) as exc:
        return _why(exc)
    return None


@attrs.define(eq=False)
class InputValidator:
    """What ``Tool`` calls to check an input: compiled on first use, and a schema
    that cannot be applied to this input is an error for it, not an exception."""

    schema: Mapping[str, Any]
    _compiled: Validator | None = None

    def iter_errors(self, instance: Any) -> Iterator[ValidationError]:
        if self._compiled is None:
            self._compiled = _compile(self.schema)
        try:
            errors = list(self._compiled.iter_errors(instance))
        except (referencing.exceptions.Unresolvable, RecursionError) as exc:
            errors = [
                ValidationError(f"cannot be checked against the server's schema: {_why(exc)}")
            ]
        yield from errors
