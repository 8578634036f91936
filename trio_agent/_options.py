"""TurnOptions: every option of a turn, each defined once.

``query(..., options=TurnOptions(...))``, ``Session(..., options=...)`` and the tool
executor all read this one frozen value; a new option is one field here, with its
default, its validator and its line of documentation. Bad values raise
``TypeError`` or ``ValueError`` when the value is built, naming the option.

Example::

    options = trio_agent.TurnOptions(max_turns=20, tool_timeout=120,
                                     can_use_tool=trio_agent.PermissionRules.default())
    session = trio_agent.Session(client, tools, model=model, options=options)
    session.options = attrs.evolve(session.options, max_turns=5)   # between turns
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Literal, TypeAlias, cast, final

import attrs

from ._hooks import Hooks, StopHook, StopHookResult
from ._messages import Message
from ._output import OutputValidator, output_spec
from ._permissions import CanUseTool
from ._retry import RetryPolicy

__all__ = [
    "DEFAULT_MAX_RESULT_CHARS",
    "DEFAULT_MAX_STOP_HOOK_BLOCKS",
    "RESERVED_REQUEST_FIELDS",
    "Compactor",
    "StopHook",
    "StopHookResult",
    "TurnOptions",
    "check_max_tokens",
]

#: The most characters of text a tool result keeps by default (a tool's own
#: ``max_result_chars`` wins); the rest is cut, with a note of how much.
DEFAULT_MAX_RESULT_CHARS = 100_000
#: How many times the stop hooks may block one turn by default.
DEFAULT_MAX_STOP_HOOK_BLOCKS = 8
#: The request fields trio_agent writes itself: ``extra_body`` may not set them.
RESERVED_REQUEST_FIELDS = frozenset(
    {"model", "messages", "max_tokens", "system", "tools", "stream"}
)


#: ``async (history) -> new history``: what the loop calls to compact a history.
Compactor: TypeAlias = Callable[[tuple[Message, ...]], Awaitable[Sequence[Message]]]


# -- validators: each names the option it checks ------------------------------------


def _name(attribute: attrs.Attribute[Any]) -> str:
    return attribute.alias or attribute.name


def _int_at_least(low: int, *, optional: bool) -> Callable[[Any, attrs.Attribute[Any], Any], None]:
    def check(_inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value is None and optional:
            return
        if isinstance(value, bool) or not isinstance(value, int):
            kind = "an int or None" if optional else "an int"
            raise TypeError(f"{_name(attribute)} must be {kind}, not {value!r:.80}")
        if value < low:
            raise ValueError(f"{_name(attribute)} must be at least {low}, not {value}")

    return check


def _number(value: Any, attribute: attrs.Attribute[Any], *, optional: bool) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        kind = "a number or None" if optional else "a number"
        raise TypeError(f"{_name(attribute)} must be {kind}, not {value!r:.80}")
    if math.isnan(value):
        raise ValueError(f"{_name(attribute)} must be a number, not nan")
    return float(value)


def _check_seconds(_inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    seconds = _number(value, attribute, optional=True)
    if seconds is not None and seconds <= 0:
        raise ValueError(f"{_name(attribute)} must be more than 0 seconds, not {value!r}")


def _check_positive(_inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    number = _number(value, attribute, optional=False)
    if number is not None and (number <= 0 or math.isinf(number)):
        raise ValueError(f"{_name(attribute)} must be a positive number, not {value!r}")


def _check_fraction(_inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    number = _number(value, attribute, optional=True)
    if number is not None and not 0 < number <= 1:
        raise ValueError(f"{_name(attribute)} must be in (0, 1], not {value!r}")


def _check_callable(_inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not callable(value):
        raise TypeError(f"{_name(attribute)} must be callable or None, not {value!r:.80}")


def _check_str(_inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and (not isinstance(value, str) or not value):
        raise TypeError(f"{_name(attribute)} must be a non-empty str or None, not {value!r:.80}")


def _check_bool(_inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"{_name(attribute)} must be a bool, not {value!r:.80}")


def _check_retry(_inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not isinstance(value, RetryPolicy):
        raise TypeError(f"{_name(attribute)} must be a RetryPolicy or None, not {value!r:.80}")


def _hooks(value: Any) -> tuple[StopHook, ...]:
    if isinstance(value, str | bytes) or not isinstance(value, Sequence | tuple | list):
        raise TypeError(f"stop_hooks must be a sequence of hooks, not {value!r:.80}")
    hooks = tuple(cast("Sequence[object]", value))
    for hook in hooks:
        if not callable(hook):
            raise TypeError(f"stop_hooks must hold callables, not {hook!r:.80}")
    if hooks:
        warnings.warn(
            "TurnOptions(stop_hooks=...) is deprecated: use TurnOptions(hooks=Hooks(stop=...))",
            DeprecationWarning,
            stacklevel=3,
        )
    return cast("tuple[StopHook, ...]", hooks)


def _check_hooks(_inst: Any, _attr: Any, value: Any) -> None:
    if value is not None and not isinstance(value, Hooks):
        raise TypeError(f"hooks must be a Hooks or None, not {value!r:.80}")


def _check_output_type(_inst: Any, _attr: Any, value: Any) -> None:
    output_spec(value)  # TypeError / ValueError naming output_type


def _validators(value: Any) -> tuple[OutputValidator, ...]:
    if isinstance(value, str | bytes) or not isinstance(value, Sequence | tuple | list):
        raise TypeError(f"output_validators must be a sequence of callables, not {value!r:.80}")
    validators = tuple(cast("Sequence[object]", value))
    for validator in validators:
        if not callable(validator):
            raise TypeError(f"output_validators must hold callables, not {validator!r:.80}")
    return cast("tuple[OutputValidator, ...]", validators)


def _body(value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise TypeError(f"extra_body must be a mapping, not {value!r:.80}")
    body: dict[str, Any] = {}
    for key, item in value.items():  # pyright: ignore[reportUnknownVariableType]
        if not isinstance(key, str):
            raise TypeError(f"extra_body keys must be str, not {key!r:.80}")
        if key in RESERVED_REQUEST_FIELDS:
            raise ValueError(
                f"extra_body may not set {key!r}: trio_agent writes it"
                " (pass it as its own argument)"
            )
        body[key] = item
    return MappingProxyType(body)


def check_max_tokens(value: object) -> None:
    """Raise TypeError/ValueError unless *value* is None or an int >= 1."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"max_tokens must be an int or None, not {value!r:.80}")
    if value < 1:
        raise ValueError(f"max_tokens must be at least 1, not {value}")


@final
@attrs.frozen(kw_only=True)
class TurnOptions:
    """Every option of a turn: limits, recovery, permissions, concurrency, timeouts,
    caps, compaction and budgets. Frozen; change one with ``attrs.evolve``.

    Each attribute's documentation is the one line after it (shown by ``help()``
    and the API reference).
    """

    # -- permissions ------------------------------------------------------------------
    can_use_tool: CanUseTool | None = attrs.field(default=None, validator=_check_callable)
    """``async (tool, input, ctx) -> Allow | Deny | Reject | Defer``, asked before each tool runs (e.g. ``PermissionRules``); None: every call runs."""

    # -- limits -----------------------------------------------------------------------
    max_turns: int | None = attrs.field(default=None, validator=_int_at_least(1, optional=True))
    """At most this many model calls per turn that follow new messages (None: no limit)."""
    max_tool_concurrency: int = attrs.field(default=10, validator=_int_at_least(1, optional=False))
    """At most this many tools run at once."""
    tool_timeout: float | None = attrs.field(default=None, validator=_check_seconds)
    """Seconds a tool without a ``timeout`` of its own may run; past it the call is answered "timed out after N s" (None: no limit)."""
    max_result_chars: int = attrs.field(
        default=DEFAULT_MAX_RESULT_CHARS, validator=_int_at_least(1, optional=False)
    )
    """The most characters of text a tool result keeps (a tool's own ``max_result_chars`` wins); the rest is cut with a note."""

    # -- recovery ---------------------------------------------------------------------
    fallback_model: str | None = attrs.field(default=None, validator=_check_str)
    """The model to switch to after 3 overloaded errors in a row (None: none)."""
    retry: RetryPolicy | None = attrs.field(default=None, validator=_check_retry)
    """The loop's own retries of a call that failed after content; None: the client's ``retry``, else ``RetryPolicy()``."""
    output_token_cap: int | None = attrs.field(
        default=None, validator=_int_at_least(1, optional=True)
    )
    """The model's output-token cap, overriding the known models' table; ``max_tokens`` escalation never goes above it."""
    stall_threshold: float = attrs.field(default=30.0, validator=_check_positive)
    """A gap longer than this (seconds) between content events is a ``Stall`` event and a log line."""
    max_stalls: int | None = attrs.field(default=None, validator=_int_at_least(1, optional=True))
    """Abort and retry a model call after this many stalls (None: never)."""

    # -- hooks --------------------------------------------------------------------------
    hooks: Hooks | None = attrs.field(default=None, validator=_check_hooks)
    """A ``Hooks``: async callables around each tool call (pre/post tool use, failure), the prompt, compaction and the end of the turn."""
    stop_hooks: tuple[StopHook, ...] = attrs.field(default=(), converter=_hooks)
    """Deprecated (use ``hooks=Hooks(stop=...)``): run after ``hooks.stop`` when the model ends its answer; one that blocks makes the model go on."""
    max_stop_hook_blocks: int = attrs.field(
        default=DEFAULT_MAX_STOP_HOOK_BLOCKS, validator=_int_at_least(0, optional=False)
    )
    """The turn ends (``stop_hook_limit``) when the stop hooks would block it more often than this."""

    # -- typed output -------------------------------------------------------------------
    output_type: Any = attrs.field(default=None, validator=_check_output_type, hash=False)
    """The type of the turn's final result (an attrs class, dataclass, TypedDict, Literal, enum, list of those) or a JSON Schema mapping; ``TurnEnd.output`` holds the validated value (None: free text)."""
    output_validators: tuple[OutputValidator, ...] = attrs.field(default=(), converter=_validators)
    """``(value) -> None`` (or async) run on each typed output; raising ``OutputRejected(reason)`` sends the reason back for another answer."""
    output_retries: int = attrs.field(default=1, validator=_int_at_least(0, optional=False))
    """How many invalid or rejected outputs are sent back for another answer before the turn ends ``output_invalid``."""
    output_mode: Literal["auto", "native", "tool"] = attrs.field(
        default="auto", validator=attrs.validators.in_(("auto", "native", "tool"))
    )
    """How the model is given ``output_type``: ``"native"`` the provider's structured output, ``"tool"`` a final-result tool it must call, ``"auto"`` native where the client supports it."""

    # -- compaction -------------------------------------------------------------------
    compactor: Compactor | None = attrs.field(default=None, validator=_check_callable)
    """``async (history) -> new history``: run when the prompt is too long (and at ``auto_compact``)."""
    auto_compact: float | None = attrs.field(default=None, validator=_check_fraction)
    """With a ``compactor``, compact before the next call once a request's input passed this fraction of the context window (e.g. 0.8)."""
    context_window: int | None = attrs.field(
        default=None, validator=_int_at_least(1, optional=True)
    )
    """The model's context window in tokens (None: the known models' value, else no auto-compaction)."""

    # -- budgets ----------------------------------------------------------------------
    token_budget: int | None = attrs.field(default=None, validator=_int_at_least(1, optional=True))
    """An output-token budget per turn: an answer that ends under 90% of it is asked to go on."""
    max_budget_usd: float | None = attrs.field(
        default=None, validator=attrs.validators.optional(_check_positive)
    )
    """USD per turn: once the turn's calls cost this much, it ends ``budget_exhausted`` before the next call (None: no limit)."""

    # -- events and the request -------------------------------------------------------
    tool_input_deltas: bool = attrs.field(default=True, validator=_check_bool)
    """Send ``ToolInputDelta`` events (each streaming tool input, partially parsed); False: none."""
    extra_body: Mapping[str, Any] = attrs.field(
        default=MappingProxyType({}), converter=_body, hash=False
    )
    """Request fields trio_agent does not model (``temperature``, ``thinking``...), sent as they are."""
    cache: Literal["5m", "1h"] | None = attrs.field(
        default="5m", validator=attrs.validators.optional(attrs.validators.in_(("5m", "1h")))
    )
    """Prompt caching: breakpoints at the end of the tools, the system prompt and the conversation, entries living ``"5m"`` or ``"1h"`` (None: none; OpenAI caches on its own)."""
