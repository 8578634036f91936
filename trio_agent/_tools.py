"""Tools: what the model may call, and what a running tool sees.

A :class:`Tool` is a value: a name, a JSON Schema for its input, an async ``run``
and the scheduling facts the executor needs (concurrency safety, interrupt
behaviour, whether its error cancels its siblings).

Example, the schema read from the type hints::

    @trio_agent.tool
    async def read(path: str, limit: int = 100) -> str:
        "Read the first lines of a file."
        return "".join(pathlib.Path(path).open().readlines()[:limit])

or given, the function then taking the input object and the context::

    @trio_agent.tool(
        input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
        concurrency_safe=True,
        timeout=30,
    )
    async def read(input, ctx):
        "Read a file."
        ctx.progress("reading")
        return pathlib.Path(input["path"]).read_text()

A plain (sync) function is run in a worker thread (``trio.to_thread.run_sync``).
Trio cannot stop a thread: when the call is cancelled (the turn is aborted, the
tool times out) the call is answered at once and the thread is *abandoned*; it
runs on until the function returns, and its result is dropped. A long sync tool
can stop early by calling ``trio.from_thread.check_cancelled()`` now and then.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import math
import re
import typing
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final, Literal, TypeAlias, cast, overload

import attrs
import jsonschema
import jsonschema.exceptions
import jsonschema.protocols
import trio

from ._exceptions import ToolDefinitionError
from ._messages import ContentBlock, json_depth
from ._tool_schema import Signature, convert, describe_parameters, read_docstring, signature_of

__all__ = ["Tool", "ToolContext", "ToolOutput", "ToolReturn", "TurnInfo", "tool"]

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


@attrs.frozen(eq=False)
class TurnInfo:
    """The turn a tool runs in (:attr:`ToolContext.turn`): what a tool that runs a
    turn of its own (:func:`trio_agent.subagent`) takes from its parent.

    Attributes:
        client: the turn's :class:`~trio_agent.ModelClient`.
        model: the model the turn was started with.
        options: the turn's :class:`~trio_agent.TurnOptions`.
        depth: 0 for a top-level turn, 1 for a subagent's, 2 for a subagent's
            subagent's...
        agent: the subagent's name when this is a subagent's turn, else None (a
            ``can_use_tool`` reads it as ``ctx.turn.agent``).
    """

    client: Any
    model: str
    options: Any
    depth: int = 0
    agent: str | None = None
    _on_subagent: Callable[[Any], None] = attrs.field(
        default=lambda _run: None, alias="on_subagent", repr=False
    )

    def record_subagent(self, run: Any) -> None:
        """Count a subagent's turn (a ``SubagentTurn``) in this turn: its usage joins
        this turn's, and its ``TurnEnd.subagents`` lists it."""
        self._on_subagent(run)


#: The turn of the running task: query() sets it in its loop's task, and Trio
#: copies it into every task started from there (the tools' tasks).
_TURN: contextvars.ContextVar[TurnInfo | None] = contextvars.ContextVar(
    "trio_agent turn", default=None
)
#: The subagent name the next query() of this task runs under (trio_agent.subagent).
_AGENT: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "trio_agent agent", default=None
)


def current_turn() -> TurnInfo | None:
    """The turn the calling task runs in, or None outside a turn."""
    return _TURN.get()


def enter_turn(info: TurnInfo) -> None:
    """Make *info* the calling task's turn (query()'s loop task: its tools inherit
    it); the subagent name it was started under is not inherited any further."""
    _TURN.set(info)
    _AGENT.set(None)


def next_agent() -> str | None:
    """The subagent name a query() started by the calling task runs under."""
    return _AGENT.get()


def run_as_agent(name: str) -> None:
    """Make a query() started by the calling task (a subagent's tool task) a turn of
    subagent *name*."""
    _AGENT.set(name)


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

    @property
    def turn(self) -> TurnInfo | None:
        """The turn this tool runs in (its client, model, options, depth), or None
        for a tool run outside :func:`~trio_agent.query` (an executor of its own)."""
        return _TURN.get()


#: Exact types that plain_json() returns as they are (a fast path: no ABC check).
_SCALARS = frozenset({str, int, float, bool, type(None)})


#: The deepest tool input the executor validates and runs (the stream refuses deeper
#: input already: ``StreamLimits.max_json_depth``, 100 by default).
MAX_INPUT_DEPTH = 200


def depth_error(input: Mapping[str, Any]) -> str | None:
    """The error for an input nested deeper than :data:`MAX_INPUT_DEPTH`, else None
    (validation and :func:`plain_json` recurse: refuse what would exhaust the stack)."""
    if json_depth(input, MAX_INPUT_DEPTH) > MAX_INPUT_DEPTH:
        return f"the input is nested deeper than {MAX_INPUT_DEPTH} levels"
    return None


def plain_json(value: Any) -> Any:
    """*value* with every mapping turned into a ``dict`` and tuple into a ``list``.

    JSON Schema validators and ``json.dumps`` only know ``dict`` and ``list``; wire
    values keep their input as read-only mappings.
    """
    cls: type[object] = type(value)  # pyright: ignore[reportUnknownVariableType]
    if cls in _SCALARS:
        return value
    if cls is dict or cls is MappingProxyType or isinstance(value, Mapping):
        return {str(k): plain_json(v) for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, (list, tuple)):
        return [plain_json(v) for v in value]  # pyright: ignore[reportUnknownVariableType]
    return value


#: The schemas that passed their metaschema check, by :func:`_schema_key`: the check
#: takes about a millisecond a tool, and an agent that builds its tools for each
#: session (a durable worker's factory, a server's handler) checks the same ones
#: again and again. Bounded: past the limit it starts over.
_CHECKED: set[tuple[type, str]] = set()
_CHECKED_MAX: Final = 1024
_KEY_MAX: Final = 65_536
_JSON_LEAVES: Final = frozenset({str, int, float, bool, type(None)})


def _schema_key(cls: type, schema: object) -> tuple[type, str] | None:
    """A key naming *schema* exactly, for the validator class *cls*: its ``repr``,
    when it is made of JSON's own types only (``dict`` with ``str`` keys, ``list``,
    ``str``, ``int``, ``float``, ``bool``, None: there ``repr`` tells every value
    apart); None (the check is not remembered) for anything else, a tuple, a
    mapping proxy, a schema nested deeper than :data:`MAX_INPUT_DEPTH` or one whose
    text is longer than :data:`_KEY_MAX` (the set stays small)."""
    stack: list[tuple[object, int]] = [(schema, 0)]
    while stack:
        value, depth = stack.pop()
        kind = type(value)
        if kind in _JSON_LEAVES:
            continue
        if depth >= MAX_INPUT_DEPTH:
            return None
        if kind is dict:
            items = cast(dict[object, object], value)
            if any(type(k) is not str for k in items):
                return None
            stack.extend((v, depth + 1) for v in items.values())
        elif kind is list:
            stack.extend((v, depth + 1) for v in cast(list[object], value))
        else:
            return None
    text = repr(schema)
    return None if len(text) > _KEY_MAX else (cls, text)


def _check_behavior(_inst: Any, _attr: Any, value: str) -> None:
    if value not in ("block", "cancel"):
        raise ToolDefinitionError(f"interrupt_behavior must be 'block' or 'cancel', not {value!r}")


def check_timeout(value: float | None, what: str = "timeout") -> None:
    """Raise ToolDefinitionError unless *value* is None or a number of seconds > 0."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ToolDefinitionError(f"{what} must be a number of seconds or None, not {value!r}")
    if math.isnan(value) or value <= 0:
        raise ToolDefinitionError(f"{what} must be more than 0 seconds, not {value!r}")


def _check_timeout(_inst: Any, _attr: Any, value: float | None) -> None:
    check_timeout(value)


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
        timeout: seconds the tool may run (after its permission check); past it
            the run is cancelled and the call answered with an error result
            ("timed out after N s"). None: the executor's ``tool_timeout``, if any.
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
    timeout: float | None = attrs.field(default=None, kw_only=True, validator=_check_timeout)
    max_result_chars: int | None = attrs.field(default=None, kw_only=True, validator=_check_cap)
    _validator: jsonschema.protocols.Validator = attrs.field(init=False, repr=False)

    @_validator.default  # pyright: ignore[reportAttributeAccessIssue,reportUntypedFunctionDecorator]
    def _compile(self) -> jsonschema.protocols.Validator:
        # Compiled once per tool: validation is on the hot path of add_tool().
        if not isinstance(self.input_schema, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ToolDefinitionError(
                f"tool {self.name!r}: invalid input_schema: a JSON Schema object is"
                f" needed, not {type(self.input_schema).__name__}"
            )
        cls = jsonschema.validators.validator_for(self.input_schema)  # pyright: ignore
        key = _schema_key(cls, self.input_schema)
        if key not in _CHECKED:
            try:
                cls.check_schema(self.input_schema)
            except jsonschema.exceptions.SchemaError as exc:
                raise ToolDefinitionError(
                    f"tool {self.name!r}: invalid input_schema: {exc.message}"
                ) from exc
            if key is not None:
                if len(_CHECKED) >= _CHECKED_MAX:
                    _CHECKED.clear()
                _CHECKED.add(key)
        return cls(self.input_schema)  # pyright: ignore[reportUnknownVariableType]

    def validate(self, input: Mapping[str, Any]) -> str | None:
        """The first schema error for *input* as a readable message, or None.

        Any mapping is accepted (``ToolUseBlock.input`` is a read-only proxy); it is
        checked as the JSON object it stands for.
        """
        return depth_error(input) or schema_error(self, plain_json(input))

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


def schema_error(tool: Tool, value: Any) -> str | None:
    """:meth:`Tool.validate` of *value* that is plain JSON already (see
    :func:`plain_json`): the executor converts a call's input once and reuses it.
    """
    schema = tool.input_schema
    if len(schema) == 1 and schema.get("type") == "object" and type(value) is dict:
        # Provably valid: {"type": "object"} accepts every dict.
        return None
    validator = tool._validator  # pyright: ignore[reportPrivateUsage]  (this module's class)
    error = cast(
        "jsonschema.exceptions.ValidationError | None",
        jsonschema.exceptions.best_match(validator.iter_errors(value)),
    )
    if error is None:
        return None
    path = cast("Iterable[object]", error.absolute_path)
    where = "/".join(str(p) for p in path)
    message = str(error.message)
    return f"{where}: {message}" if where else message


ToolFunction: TypeAlias = Callable[..., Any]


@overload
def tool(fn: ToolFunction, /) -> Tool: ...


@overload
def tool(
    *,
    input_schema: Mapping[str, Any] | None = None,
    name: str | None = None,
    description: str | None = None,
    concurrency_safe: bool | Callable[[Mapping[str, Any]], bool] = False,
    interrupt_behavior: InterruptBehavior = "block",
    cancels_siblings_on_error: bool = False,
    max_result_chars: int | None = None,
    timeout: float | None = None,
) -> Callable[[ToolFunction], Tool]: ...


def tool(
    fn: ToolFunction | None = None,
    /,
    *,
    input_schema: Mapping[str, Any] | None = None,
    name: str | None = None,
    description: str | None = None,
    concurrency_safe: bool | Callable[[Mapping[str, Any]], bool] = False,
    interrupt_behavior: InterruptBehavior = "block",
    cancels_siblings_on_error: bool = False,
    max_result_chars: int | None = None,
    timeout: float | None = None,
) -> Tool | Callable[[ToolFunction], Tool]:
    """Build a :class:`Tool` from a function, as ``@tool`` or ``@tool(...)``.

    Name and description default to the function's name and docstring (dedented;
    a Google ``Args:``, NumPy ``Parameters`` or Sphinx ``:param x:`` section
    describes the parameters in the schema instead). With
    ``input_schema``, the function is called as ``fn(input, ctx)``; without, the
    schema is derived from its type hints (see :mod:`trio_agent._tool_schema`) and
    it is called with the input's fields as keyword arguments, plus the
    :class:`ToolContext` to a parameter annotated with it. An ``async def`` runs
    in the call's task; a plain function in a worker thread (see the module
    docstring for what cancelling it means).

    Raises:
        ToolDefinitionError: no description, a bad name or schema, or a type hint
            that has no JSON Schema (give ``input_schema=`` then).
    """

    def decorate(fn: ToolFunction) -> Tool:
        label = getattr(fn, "__name__", None)
        if not callable(fn) or label is None:
            raise ToolDefinitionError(f"@tool needs a function, not {fn!r}")
        documented, described = read_docstring(fn.__doc__ or "")
        doc = description if description is not None else documented
        if not doc:
            raise ToolDefinitionError(f"tool {label!r} needs a description or docstring")
        _check_return_hint(fn, name or label)
        if input_schema is None:
            signature = signature_of(fn, ToolContext)
            schema: Mapping[str, Any] = describe_parameters(signature.input_schema, described)
            run = _keyword_runner(fn, signature)
        else:
            schema = input_schema
            run = fn if inspect.iscoroutinefunction(fn) else _threaded(fn)
        return Tool(
            name=name or label,
            description=doc,
            input_schema=schema,
            run=run,
            concurrency_safe=concurrency_safe,
            interrupt_behavior=interrupt_behavior,
            cancels_siblings_on_error=cancels_siblings_on_error,
            timeout=timeout,
            max_result_chars=max_result_chars,
        )

    return decorate if fn is None else decorate(fn)


RunFunction: TypeAlias = Callable[[Mapping[str, Any], ToolContext], Awaitable[ToolReturn]]

#: Return hints no call of a tool can survive: the result must be text, content
#: blocks or a ToolOutput, and these are none of them.
_NOT_A_RESULT: Final = (int, float, complex, bool, bytes, bytearray, dict, set, frozenset)


def _check_return_hint(fn: Any, label: str) -> None:
    """Refuse at definition a function annotated to return what no result can be
    (``-> int``, ``-> dict[str, Any]``, ``-> None``): every call would fail at run
    time. A hint that cannot be resolved is not judged."""
    try:
        hint = typing.get_type_hints(fn).get("return", inspect.Signature.empty)
    except Exception:  # a forward reference that does not resolve: not ours to judge
        return
    if hint is inspect.Signature.empty:
        return
    origin = typing.get_origin(hint) or hint
    bad = hint is type(None) or (
        isinstance(origin, type)
        and (issubclass(origin, _NOT_A_RESULT) or issubclass(origin, Mapping))
    )
    if bad:
        shown = "None" if hint is type(None) else getattr(origin, "__name__", repr(hint))
        raise ToolDefinitionError(
            f"tool {label!r} is annotated to return {shown}, which is no tool result: "
            "return str (e.g. json.dumps(value)), a list of content blocks or a ToolOutput"
        )


def _keyword_runner(fn: ToolFunction, signature: Signature) -> RunFunction:
    """``run(input, ctx)`` calling *fn* with the input's fields as arguments."""
    hints, context_param = signature.hints, signature.context_param

    def arguments(input: Mapping[str, Any], ctx: ToolContext) -> dict[str, Any]:
        kwargs = {key: convert(hints[key], value) for key, value in input.items()}
        if context_param is not None:
            kwargs[context_param] = ctx
        return kwargs

    if inspect.iscoroutinefunction(fn):

        async def run_with_keywords(input: Mapping[str, Any], ctx: ToolContext) -> ToolReturn:
            return await fn(**arguments(input, ctx))

        return run_with_keywords
    # In the thread, ctx is the thread's own context (see _threaded).
    return _threaded(lambda input, ctx: fn(**arguments(input, ctx)))


def _threaded(fn: Callable[[Mapping[str, Any], ToolContext], Any]) -> RunFunction:
    """Run a sync ``fn(input, ctx)`` in a worker thread, abandoned on cancel.

    The thread gets a context whose ``progress`` hops back to Trio, and is
    silent once the call is over (an abandoned thread may report on).
    """

    async def run_in_thread(input: Mapping[str, Any], ctx: ToolContext) -> ToolReturn:
        live = True

        def report_if_live(data: Any) -> None:
            if live:
                ctx.progress(data)

        def report_from_thread(data: Any) -> None:
            # The call (or the whole run) may be over: then nobody is told.
            with contextlib.suppress(trio.RunFinishedError, trio.Cancelled):
                trio.from_thread.run_sync(report_if_live, data)

        thread_ctx = ToolContext(
            ctx.tool_use_id, ctx.tool_name, context=ctx.context, report=report_from_thread
        )
        try:
            return await trio.to_thread.run_sync(
                functools.partial(fn, input, thread_ctx), abandon_on_cancel=True
            )
        finally:
            live = False

    return run_in_thread


def tools_by_name(tools: Iterable[Tool]) -> dict[str, Tool]:
    """*tools* by name; TypeError for a value that is not a Tool, ToolDefinitionError
    for two tools of the same name."""
    by_name: dict[str, Tool] = {}
    for t in tools:
        if not isinstance(t, Tool):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"tools must be Tool values, not {type(t).__name__}")
        if t.name in by_name:
            raise ToolDefinitionError(f"two tools are named {t.name!r}")
        by_name[t.name] = t
    return by_name
