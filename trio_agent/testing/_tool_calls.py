"""Batches of calls to a user's real tools, and the hypothesis strategy making them.

A :class:`ToolCallBatch` is what a model's answer asks of the executor: the
``tool_use`` blocks in ``add_tool`` order with their arrival times, the
permission answer for each, and outside actions at given times (``interrupt()``,
``discard()``, ``finish()``, cancelling the turn).
:func:`~trio_agent.testing.run_tool_calls` runs one with the real executor and
the user's real tools; :func:`tool_calls` generates them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, cast

import attrs

from .._messages import ToolUseBlock
from .._tools import Tool
from ._scenario import Permission, ScenarioError

if TYPE_CHECKING:
    from hypothesis.strategies import DrawFn, SearchStrategy

__all__ = ["Action", "ToolCall", "ToolCallBatch", "tool_calls"]

Action: TypeAlias = Literal["interrupt", "discard", "finish", "cancel_turn"]
_ACTION_ORDER: Mapping[str, int] = {"interrupt": 1, "discard": 2, "finish": 3, "cancel_turn": 4}


def _time(value: float, what: str) -> float:
    if not (value >= 0 and math.isfinite(value)):
        raise ScenarioError(f"{what} must be a finite time >= 0, not {value!r}")
    return float(value)


@attrs.frozen
class ToolCall:
    """One ``tool_use`` of a batch.

    Attributes:
        block: the block given to ``add_tool``.
        arrival: when it is added (seconds from the start of the run).
        permission: what the batch's permission check answers for it
            (``"allow"`` hands over to the ``can_use_tool`` given to
            :func:`~trio_agent.testing.run_tool_calls`, if any).
    """

    block: ToolUseBlock
    arrival: float = 0.0
    permission: Permission = "allow"

    def __attrs_post_init__(self) -> None:
        _time(self.arrival, "arrival")
        if self.permission not in ("allow", "deny", "reject"):
            raise ScenarioError(f"permission must be allow, deny or reject: {self.permission!r}")


def _calls(value: Iterable[ToolCall]) -> tuple[ToolCall, ...]:
    return tuple(value)


def _actions(value: Iterable[tuple[float, Action]]) -> tuple[tuple[float, Action], ...]:
    return tuple((float(t), a) for t, a in value)


@attrs.frozen
class ToolCallBatch:
    """The calls of one model answer, in ``add_tool`` order, and outside actions.

    Attributes:
        calls: the calls; arrival times must not decrease, ids must be unique.
        actions: ``(time, action)`` pairs, action one of ``"interrupt"``,
            ``"discard"``, ``"finish"``, ``"cancel_turn"``. Without a
            ``"finish"``, ``finish()`` is called right after the last arrival.
        consume_results: whether a task reads ``results`` as they come; if not,
            everything is collected by ``drain()``.

    At one instant the run does, in this order: arrivals, interrupts, discard,
    finish, turn cancellation.
    """

    calls: tuple[ToolCall, ...] = attrs.field(converter=_calls)
    actions: tuple[tuple[float, Action], ...] = attrs.field(default=(), converter=_actions)
    consume_results: bool = True

    def __attrs_post_init__(self) -> None:
        arrivals = [c.arrival for c in self.calls]
        if arrivals != sorted(arrivals):
            raise ScenarioError("calls must be in arrival order (add_tool order)")
        ids = [c.block.id for c in self.calls]
        if len(set(ids)) != len(ids):
            raise ScenarioError(f"tool_use ids must be unique: {ids}")
        for t, action in self.actions:
            _time(t, f"the time of {action}")
            if action not in _ACTION_ORDER:
                raise ScenarioError(f"unknown action {action!r}: use one of {list(_ACTION_ORDER)}")

    def script(self) -> list[tuple[float, str, int]]:
        """``(time, what, call index)`` in the order the run does them; ``what``
        is ``"add"`` or an action (index -1)."""
        items = [(c.arrival, 0, "add", i) for i, c in enumerate(self.calls)]
        items += [(t, _ACTION_ORDER[a], a, -1) for t, a in self.actions]
        if not any(a == "finish" for _, a in self.actions):
            last = self.calls[-1].arrival if self.calls else 0.0
            items.append((last, _ACTION_ORDER["finish"], "finish", -1))
        items.sort(key=lambda item: (item[0], item[1], item[3]))
        return [(t, what, i) for t, _, what, i in items]


# -- the strategy -------------------------------------------------------------------


def _invalid_inputs(tool: Tool, valid: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Inputs near *valid* that break the tool's schema (checked by the caller)."""
    candidates: list[dict[str, Any]] = [{}]
    wrongs: tuple[Any, ...] = (None, [], {"unexpected": True}, 12345, "text")
    for key in valid:
        candidates += [{**valid, key: wrong} for wrong in wrongs]
    required: Any = tool.input_schema.get("required", ())
    for key in cast("list[Any]", required) if isinstance(required, list) else []:
        candidates.append({k: v for k, v in valid.items() if k != key})
    candidates.append({**valid, "__not_in_the_schema__": 1})
    return candidates


def tool_calls(
    tools: Sequence[Tool],
    *,
    inputs: Mapping[str, SearchStrategy[Mapping[str, Any]]] | None = None,
    min_calls: int = 0,
    max_calls: int = 8,
    time_unit: float = 1.0,
    actions: bool = True,
    permissions: bool = True,
    defects: bool = True,
) -> SearchStrategy[ToolCallBatch]:
    """A hypothesis strategy for :class:`ToolCallBatch` values calling *tools*.

    Args:
        tools: the user's tools (the names the calls use).
        inputs: a strategy of input objects per tool name; a tool without one
            gets inputs generated from its ``input_schema``
            (``hypothesis-jsonschema``, in the ``testing`` extra).
        min_calls: the fewest calls.
        max_calls: the most calls.
        time_unit: seconds per step of the time grid: arrivals are whole steps
            from 0 to 8, outside actions half steps up to 14.5. Use a small one
            (``0.01``) with real tools on the real clock.
        actions: also draw ``interrupt()``, ``discard()``, an early ``finish()``
            and turn cancellation.
        permissions: also draw Deny and Reject answers.
        defects: also draw, at a small rate, inputs that break the schema,
            unparsable input and calls to a tool nobody knows (the executor must
            answer them with error results).
    """
    from hypothesis import strategies as st

    if not 0 <= min_calls <= max_calls:
        raise ValueError("need 0 <= min_calls <= max_calls")
    if not (time_unit > 0 and math.isfinite(time_unit)):
        raise ValueError(f"time_unit must be a positive number of seconds, not {time_unit!r}")
    tools = list(tools)
    if not tools:
        raise ValueError("tool_calls() needs at least one tool")
    by_name = {t.name: t for t in tools}
    unknown = set(inputs or {}) - set(by_name)
    if unknown:
        raise ValueError(f"inputs given for unknown tools: {sorted(unknown)}")
    strategies = {name: _input_strategy(t, (inputs or {}).get(name)) for name, t in by_name.items()}
    names = sorted(by_name)

    @st.composite
    def build(draw: DrawFn) -> ToolCallBatch:
        n = draw(st.integers(min_calls, max_calls))
        arrivals = sorted(draw(st.lists(st.integers(0, 8), min_size=n, max_size=n)))
        calls: list[ToolCall] = []
        for i, step in enumerate(arrivals):
            name = draw(st.sampled_from(names))
            tool_use_id = f"toolu_{i:03d}"
            block = ToolUseBlock(tool_use_id, name, dict(draw(strategies[name])))
            if defects and draw(st.integers(0, 9)) == 0:
                block = _defect(draw, by_name[name], block, set(names))
            permission: Permission = "allow"
            if permissions and draw(st.integers(0, 5)) == 0:
                permission = draw(st.sampled_from(["deny", "reject"]))
            calls.append(ToolCall(block, step * time_unit, permission))
        drawn: list[tuple[float, Action]] = []
        consume = True
        if actions:
            moments = draw(
                st.lists(st.integers(0, 14), min_size=5, max_size=5, unique=True).map(
                    lambda ks: [(k + 0.5) * time_unit for k in ks]
                )
            )
            once: tuple[Action, ...] = ("finish", "cancel_turn", "discard")
            for moment, action in zip(moments, once, strict=False):
                if draw(st.integers(0, 3)) == 0:
                    drawn.append((moment, action))
            for t in draw(st.sampled_from([[], moments[3:4], moments[3:5]])):
                drawn.append((t, "interrupt"))
            consume = draw(st.integers(0, 5)) != 0
        return ToolCallBatch(calls, sorted(drawn), consume_results=consume)

    return build()


def _input_strategy(
    tool: Tool, given: SearchStrategy[Mapping[str, Any]] | None
) -> SearchStrategy[Mapping[str, Any]]:
    if given is not None:
        return given
    try:
        import hypothesis_jsonschema  # noqa: F401  # pyright: ignore
    except ImportError as exc:  # pragma: no cover - the testing extra has it
        raise ImportError(
            f"generating inputs for {tool.name!r} from its input_schema needs "
            "hypothesis-jsonschema (pip install 'trio-agent[testing]'), "
            "or pass a strategy in inputs="
        ) from exc
    return _from_schema(tool.input_schema).filter(lambda value: tool.validate(value) is None)


# Keywords _from_schema does not build objects for itself: left to hypothesis-jsonschema.
_OBJECT_EXTRAS = frozenset(
    [
        "allOf",
        "anyOf",
        "oneOf",
        "not",
        "if",
        "$ref",
        "patternProperties",
        "dependencies",
        "dependentRequired",
        "dependentSchemas",
        "propertyNames",
        "minProperties",
    ]
)


def _from_schema(schema: Any) -> SearchStrategy[Any]:
    """Values for a JSON Schema: objects and arrays built here, leaves by
    ``hypothesis_jsonschema.from_schema``.

    hypothesis-jsonschema 0.23 builds objects with a Hypothesis internal that
    newer Hypothesis releases removed, so plain object schemas (``properties``,
    ``required``) are drawn with ``fixed_dictionaries`` instead; whatever they
    do not express is enforced by the tool's own validation (a filter).
    """
    from hypothesis import strategies as st
    from hypothesis_jsonschema import from_schema  # pyright: ignore

    leaf = cast("Callable[[Any], SearchStrategy[Any]]", from_schema)
    if schema is True or schema == {}:
        return st.none() | st.booleans() | st.integers() | st.text()
    if not isinstance(schema, Mapping):
        return leaf(schema)
    node = cast("Mapping[str, Any]", schema)
    if _OBJECT_EXTRAS & set(node):
        return leaf(dict(node))
    kind = node.get("type")
    if kind == "object" or (kind is None and "properties" in node):
        props = cast("Mapping[str, Any]", node.get("properties", {}))
        required = [k for k in cast("list[Any]", node.get("required", [])) if isinstance(k, str)]
        return st.fixed_dictionaries(
            {k: _from_schema(props.get(k, True)) for k in required},
            optional={k: _from_schema(v) for k, v in props.items() if k not in required},
        )
    if kind == "array" and isinstance(node.get("items"), Mapping):
        return st.lists(
            _from_schema(node["items"]),
            min_size=int(node.get("minItems", 0)),
            max_size=int(node.get("maxItems", 5)),
        )
    return leaf(dict(node))


def _defect(draw: DrawFn, tool: Tool, block: ToolUseBlock, names: set[str]) -> ToolUseBlock:
    from hypothesis import strategies as st

    kind = draw(st.sampled_from(["schema_error", "invalid_json", "unknown_tool"]))
    if kind == "unknown_tool":
        name = next(
            f"no_such_tool_{k}" for k in range(len(names) + 1) if f"no_such_tool_{k}" not in names
        )
        return ToolUseBlock(block.id, name, block.input)
    if kind == "schema_error":
        broken = [c for c in _invalid_inputs(tool, block.input) if tool.validate(c) is not None]
        if broken:
            return ToolUseBlock(block.id, block.name, draw(st.sampled_from(broken)))
    return ToolUseBlock(block.id, block.name, {}, invalid_input='{"' + block.name[:8])
