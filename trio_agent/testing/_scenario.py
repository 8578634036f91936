"""Tool-call scenarios: what the model asks for, when, and what the tools then do.

A :class:`ToolScenario` is a plain value describing one executor's life: the
calls in ``add_tool`` order (arrival time, safety, duration, outcome, progress,
interrupt behaviour, cascade flag, permission decision) and the outside actions
at given virtual times (``interrupt()``, ``discard()``, ``finish()``, cancelling
the turn). :func:`~trio_agent.testing.reference_schedule` says what must happen;
:func:`~trio_agent.testing.run_scenario` makes it happen with the real executor.

:func:`scenarios` generates them for hypothesis, on a time grid where no two
independent events ever coincide (see its docstring), so that the real executor,
whose same-instant tasks Trio runs in any order, must match the reference
exactly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

import attrs

from .._exceptions import TrioAgentError

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

__all__ = ["ScenarioCall", "ScenarioError", "ToolScenario", "scenarios"]

Outcome: TypeAlias = Literal["ok", "error", "raise", "garbage", "hang"]
InputKind: TypeAlias = Literal["valid", "schema_error", "invalid_json", "unknown_tool"]
Permission: TypeAlias = Literal["allow", "deny", "reject"]


class ScenarioError(TrioAgentError):
    """A scenario is malformed, or never ends (a tool hangs and nothing stops it)."""


def _non_negative(_inst: Any, attribute: attrs.Attribute[Any], value: float) -> None:
    if not (value >= 0 and math.isfinite(value)):
        raise ScenarioError(f"{attribute.name} must be a finite time >= 0, not {value!r}")


def _times(_inst: Any, attribute: attrs.Attribute[Any], value: tuple[float, ...]) -> None:
    for t in value:
        _non_negative(_inst, attribute, t)


def _optional_time(_inst: Any, attribute: attrs.Attribute[Any], value: float | None) -> None:
    if value is not None:
        _non_negative(_inst, attribute, value)


@attrs.frozen
class ScenarioCall:
    """One tool call of a scenario (the model's ``tool_use`` and its tool).

    Attributes:
        arrival: when ``add_tool`` is called (virtual seconds).
        duration: how long the tool runs once started (ignored for ``"hang"``).
        outcome: ``"ok"``, ``"error"`` (returns ``is_error``), ``"raise"``,
            ``"garbage"`` (returns a non-result) or ``"hang"`` (until cancelled).
        safe: concurrency safety; ``"raises"`` makes the safety check raise.
        progress: offsets from the start at which the tool reports progress
            (those after ``duration`` are never reached).
        interrupt_behavior: ``"block"`` or ``"cancel"``.
        cascade: ``cancels_siblings_on_error``.
        permission: what ``can_use_tool`` answers, after ``permission_delay``.
        input: ``"valid"``, or a defect: schema error, unparsable JSON, or a
            tool name nobody knows.
        name: the tool's name (default ``tool_<index>``).
    """

    arrival: float = attrs.field(default=0.0, validator=_non_negative)
    duration: float = attrs.field(default=1.0, validator=_non_negative)
    outcome: Outcome = "ok"
    safe: bool | Literal["raises"] = True
    progress: tuple[float, ...] = attrs.field(default=(), converter=tuple, validator=_times)
    interrupt_behavior: Literal["block", "cancel"] = "block"
    cascade: bool = False
    permission: Permission = "allow"
    permission_delay: float = attrs.field(default=0.0, validator=_non_negative)
    input: InputKind = "valid"
    name: str | None = None

    @property
    def effectively_safe(self) -> bool:
        """Safe as the executor sees it: a valid input and a check saying yes."""
        return self.input == "valid" and self.safe is True

    @property
    def fails(self) -> bool:
        """Whether running the tool gives an error result."""
        return self.outcome in ("error", "raise", "garbage")


def _calls(value: Sequence[ScenarioCall]) -> tuple[ScenarioCall, ...]:
    return tuple(value)


@attrs.frozen
class ToolScenario:
    """One executor's life: the calls in ``add_tool`` order and outside actions.

    Attributes:
        calls: the calls; arrival times must not decrease.
        max_concurrency: the executor's cap.
        finish_at: when ``finish()`` is called (default: right after the last
            arrival); calls arriving later are refused (``ExecutorClosedError``).
        cancel_turn_at: when the turn scope is cancelled from outside.
        interrupt_at: when ``interrupt()`` is called.
        discard_at: when ``discard()`` is called.
        consume_results: whether a task reads ``results`` as they come; if not,
            everything is collected by ``drain()``.

    At one instant the script does, in this order: arrivals, interrupts,
    discard, finish, turn cancellation.
    """

    calls: tuple[ScenarioCall, ...] = attrs.field(converter=_calls)
    max_concurrency: int = 10
    finish_at: float | None = attrs.field(default=None, validator=_optional_time)
    cancel_turn_at: float | None = attrs.field(default=None, validator=_optional_time)
    interrupt_at: tuple[float, ...] = attrs.field(default=(), converter=tuple, validator=_times)
    discard_at: float | None = attrs.field(default=None, validator=_optional_time)
    consume_results: bool = True

    def __attrs_post_init__(self) -> None:
        arrivals = [c.arrival for c in self.calls]
        if arrivals != sorted(arrivals):
            raise ScenarioError("calls must be in arrival order (add_tool order)")
        names = [self.tool_name(i) for i in range(len(self.calls))]
        if len(set(names)) != len(names):
            raise ScenarioError(f"tool names must be distinct: {names}")
        if self.max_concurrency < 1:
            raise ScenarioError("max_concurrency must be at least 1")

    def tool_name(self, index: int) -> str:
        """The name of call *index*'s tool."""
        return self.calls[index].name or f"tool_{index}"

    def tool_use_id(self, index: int) -> str:
        """The ``tool_use`` id of call *index*."""
        return f"toolu_{index:03d}"

    def script(self) -> list[tuple[float, str, int]]:
        """The outside actions in the order they happen: (time, what, call index),
        with ``what`` one of add, interrupt, discard, finish, cancel_turn."""
        items: list[tuple[float, int, str, int]] = [
            (c.arrival, 0, "add", i) for i, c in enumerate(self.calls)
        ]
        items += [(t, 1, "interrupt", -1) for t in self.interrupt_at]
        if self.discard_at is not None:
            items.append((self.discard_at, 2, "discard", -1))
        finish = self.finish_at
        if finish is None:
            finish = self.calls[-1].arrival if self.calls else 0.0
        items.append((finish, 3, "finish", -1))
        if self.cancel_turn_at is not None:
            items.append((self.cancel_turn_at, 4, "cancel_turn", -1))
        items.sort(key=lambda item: (item[0], item[1], item[3]))
        return [(t, what, i) for t, _, what, i in items]


_MAX_GRID_CALLS = 16


def scenarios(
    *,
    min_calls: int = 0,
    max_calls: int = 8,
    max_concurrency: int | None = None,
    outcomes: Sequence[Outcome] = ("ok", "ok", "ok", "error", "raise", "garbage", "hang"),
    defects: bool = True,
    permissions: bool = True,
    actions: bool = True,
    progress: bool = True,
    cascades: bool = True,
) -> SearchStrategy[ToolScenario]:
    """A hypothesis strategy for :class:`ToolScenario` values.

    Times are drawn on a grid where independent events never coincide: arrivals
    are whole seconds, outside actions are at ``k + 0.5``, and call *i*'s
    duration (or permission delay) and progress offsets carry its own binary
    fraction ``2**-(i + 2)``. Any event time is then a whole number plus the
    fractions of the causal chain that led to it, so two events coincide only
    when one caused the other, and the real executor, whatever order Trio runs
    same-instant tasks in, must match :func:`reference_schedule` exactly.

    Args:
        min_calls: the fewest calls.
        max_calls: the most calls (at most 16).
        max_concurrency: a fixed cap, or None to draw one (1 to 4, or 10).
        outcomes: the outcomes to draw from (repeat one to weight it).
        defects: also draw unknown tools, schema errors, unparsable input and
            raising safety checks.
        permissions: also draw Deny and Reject answers.
        actions: also draw interrupt, discard, an early finish and turn
            cancellation.
        progress: also draw progress reports.
        cascades: also draw tools that cancel their siblings on error.

    Scenarios with a hanging tool always end: if no discard or turn
    cancellation would stop it, the turn is cancelled after everything else.
    """
    from hypothesis import strategies as st

    if not 0 <= min_calls <= max_calls <= _MAX_GRID_CALLS:
        raise ValueError(f"need 0 <= min_calls <= max_calls <= {_MAX_GRID_CALLS}")
    if not outcomes:
        raise ValueError("outcomes must not be empty")

    @st.composite
    def build(draw: st.DrawFn) -> ToolScenario:
        n = draw(st.integers(min_calls, max_calls))
        arrivals = sorted(draw(st.lists(st.integers(0, 8), min_size=n, max_size=n)))
        calls: list[ScenarioCall] = []
        for i, arrival in enumerate(arrivals):
            bit = 2.0 ** -(i + 2)
            whole = draw(st.integers(0, 4))
            outcome = draw(st.sampled_from(list(outcomes)))
            steps = whole if outcome != "hang" else 4
            reports: tuple[float, ...] = ()
            if progress and steps:
                ks = draw(st.sets(st.integers(0, steps - 1), max_size=2))
                reports = tuple(k + bit for k in sorted(ks))
            permission: Permission = "allow"
            delay = 0.0
            if permissions and draw(st.integers(0, 5)) == 0:
                permission = draw(st.sampled_from(["deny", "reject"]))
                delay = draw(st.integers(0, 2)) + bit
            safe: bool | Literal["raises"] = draw(st.booleans())
            kind: InputKind = "valid"
            if defects and draw(st.integers(0, 7)) == 0:
                kind = draw(st.sampled_from(["schema_error", "invalid_json", "unknown_tool"]))
            if defects and draw(st.integers(0, 9)) == 0:
                safe = "raises"
            calls.append(
                ScenarioCall(
                    arrival=float(arrival),
                    duration=whole + bit,
                    outcome=outcome,
                    safe=safe,
                    progress=reports,
                    interrupt_behavior=draw(st.sampled_from(["block", "cancel"])),
                    cascade=cascades and draw(st.booleans()),
                    permission=permission,
                    permission_delay=delay,
                    input=kind,
                )
            )
        cap = max_concurrency
        if cap is None:
            cap = draw(st.sampled_from([1, 2, 3, 4, 10]))
        half = st.integers(0, 14).map(lambda k: k + 0.5)
        finish_at = cancel_turn_at = discard_at = None
        interrupt_at: list[float] = []
        consume = True
        if actions:
            # Distinct instants: two actions at once would race the consumers.
            moments = draw(st.lists(half, min_size=5, max_size=5, unique=True))
            finish_at, cancel_turn_at, discard_at = (
                draw(st.sampled_from([None, moment])) for moment in moments[:3]
            )
            interrupt_at = draw(st.sampled_from([[], moments[3:4], moments[3:5]]))
            consume = draw(st.integers(0, 5)) != 0
        if (
            any(c.outcome == "hang" for c in calls)
            and cancel_turn_at is None
            and discard_at is None
        ):
            cancel_turn_at = 40.5  # after everything else: just makes the run end
        return ToolScenario(
            calls=calls,
            max_concurrency=cap,
            finish_at=finish_at,
            cancel_turn_at=cancel_turn_at,
            interrupt_at=tuple(sorted(interrupt_at)),
            discard_at=discard_at,
            consume_results=consume,
        )

    return build()
