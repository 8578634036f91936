"""Subagents as tools: a nested turn run inside the calling tool's cancel scope.

``subagent(name, description, tools=..., system=...)`` is a :class:`~trio_agent.Tool`
the model calls with a ``prompt``. Its run is one :func:`~trio_agent.query` of its
own (its own history, tools, system prompt and options; the parent turn's client and,
by default, model), so the child is a child by structure: it lives in the call's
task and ends with it.

How the child ends when the parent's call is cut. The call's cancel scope is
cancelled (the parent turn is aborted or interrupted, a sibling failed, the
subagent's ``timeout`` passed): a watcher task sees it and aborts (or interrupts)
the child's :class:`~trio_agent.TurnControl`, while the child's turn runs on
shielded to its ``TurnEnd``. So the child ends with the loop's abort semantics
(every tool_use of its history answered, its usage counted) before the call
unwinds; the parent's executor answers the call itself ("Interrupted...",
"Cancelled: parallel tool call ... errored", "timed out after N s"). Nothing in
the child can outlive the parent's turn: an abort cancels whatever the child
awaits (the model's stream, its tools, a permission prompt).

Example::

    researcher = trio_agent.subagent(
        "researcher", "Find facts in the repository and report them briefly.",
        tools=[read, grep], system="You research. Answer in three lines.",
    )
    session = trio_agent.Session(client, [researcher, edit], model=model)
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final, final

import attrs
import trio

from ._exceptions import ToolDefinitionError, unwrap_single
from ._executor import AbortReason, ToolProgress, ToolResult, summarize_call
from ._loop import (
    BlockFinished,
    SubagentTurn,
    TextDelta,
    TurnControl,
    TurnEnd,
    TurnEndReason,
    query,
)
from ._messages import AssistantMessage, TextBlock, ToolUseBlock, UserMessage
from ._options import TurnOptions, check_max_tokens
from ._tools import (
    Tool,
    ToolContext,
    ToolOutput,
    TurnInfo,
    check_timeout,
    run_as_agent,
    tools_by_name,
)

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "SubagentText",
    "SubagentToolFinished",
    "SubagentToolProgress",
    "SubagentToolStarted",
    "subagent",
]

#: How deep subagents may nest by default (a top-level turn is depth 0).
DEFAULT_MAX_DEPTH: Final = 3

_INPUT_SCHEMA: Final[Mapping[str, Any]] = {
    "type": "object",
    "properties": {
        "prompt": {
            "type": "string",
            "description": "The task for the subagent, with everything it needs to know.",
        },
        "description": {
            "type": "string",
            "description": "A short (3-5 word) description of the task.",
        },
    },
    "required": ["prompt"],
    "additionalProperties": False,
}


# What a subagent's call reports as its ToolProgress.data. Each names the subagent and
# its depth (1 under a top-level turn): a subagent's own subagents report through it,
# unchanged, so a UI nests them by depth. Each prints as one line (what the CLI shows
# as the call's progress, indented by its depth).


@attrs.frozen
class SubagentText:
    """Text of the subagent's answer, as it streams."""

    agent: str
    depth: int
    text: str

    def __str__(self) -> str:
        return f"{self.agent}: {' '.join(self.text.split())}"


@attrs.frozen
class SubagentToolStarted:
    """The subagent's model called a tool (the call starts as its block ends)."""

    agent: str
    depth: int
    tool_use_id: str
    name: str
    input: Mapping[str, Any]

    def __str__(self) -> str:
        return f"{self.agent} → {summarize_call(self.name, self.input)}"


@attrs.frozen
class SubagentToolProgress:
    """A tool of the subagent reported progress (``ctx.progress(data)``)."""

    agent: str
    depth: int
    tool_use_id: str
    data: Any

    def __str__(self) -> str:
        lines = str(self.data).strip().splitlines()
        return f"{self.agent} │ {lines[-1] if lines else ''}"


@attrs.frozen
class SubagentToolFinished:
    """A tool call of the subagent has its result."""

    agent: str
    depth: int
    tool_use_id: str
    is_error: bool
    abort_reason: AbortReason | None = None

    def __str__(self) -> str:
        mark = "cancelled" if self.abort_reason is not None else "✗" if self.is_error else "✓"
        return f"{self.agent} {mark} {self.tool_use_id}"


_DEFAULT_OPTIONS: Final = TurnOptions()

_NESTED = (SubagentText, SubagentToolStarted, SubagentToolProgress, SubagentToolFinished)


def _check_depth(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ToolDefinitionError(f"max_depth must be an int >= 1, not {value!r:.80}")
    return value


def subagent(
    name: str,
    description: str,
    *,
    tools: Sequence[Tool],
    system: Any,
    model: str | None = None,
    options: TurnOptions | None = None,
    max_tokens: int | None = None,
    timeout: float | None = None,
    max_depth: int = DEFAULT_MAX_DEPTH,
    cancels_siblings_on_error: bool = False,
) -> Tool:
    """A tool that hands a task to a subagent: one nested turn of its own.

    The model calls it with ``{"prompt": ..., "description": ...}``; the subagent's
    turn starts from the prompt alone (its own history) and the tool's result is its
    final text (with ``options.output_type``: its typed output, as JSON). A turn that
    does not complete (an error, ``max_turns``, a rejected tool call, a call awaiting
    approval, the budget) is an error result saying so, with what the subagent had
    written; it never raises into the parent.

    Args:
        name: the tool's name, as the model sees it (and ``TurnInfo.agent`` in the
            subagent's turn).
        description: what the subagent does, for the parent's model.
        tools: the subagent's tools (a subset of the parent's, or others; another
            subagent too, down to *max_depth*).
        system: the subagent's system prompt.
        model: the subagent's model; None: the parent turn's.
        options: the subagent's :class:`~trio_agent.TurnOptions` (None: the
            defaults). Its ``can_use_tool`` left None, the subagent asks the parent
            turn's, whose ``ctx.turn.agent`` is then *name*.
        max_tokens: output tokens per model call of the subagent (None: the default).
        timeout: seconds the whole subagent may run; past it its turn is aborted and
            the call answered "timed out after N s". None: the parent's
            ``tool_timeout``, if any.
        max_depth: the deepest nesting at which this subagent runs (a top-level
            turn's subagent is at depth 1); deeper, the call is an error result and
            nothing runs.
        cancels_siblings_on_error: the tool flag of the same name.

    The tool is concurrency-safe when each of *tools* is (``concurrency_safe=True``;
    a per-input check counts as unsafe), so independent subagents run side by side
    under the parent's ``max_tool_concurrency``. Its ``interrupt_behavior`` is
    ``"cancel"``: an interrupt of the parent interrupts the subagent.

    Raises:
        ToolDefinitionError: a bad name, timeout or depth, two tools of one name.
        TypeError: *options* is not a ``TurnOptions``, a tool is not a ``Tool``,
            *model* is not a non-empty str, *max_tokens* not an int.
        ValueError: *max_tokens* < 1.
    """
    if options is not None and not isinstance(options, TurnOptions):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"options must be a TurnOptions, not {type(options).__name__}")
    if model is not None and (not isinstance(model, str) or not model):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"model must be a non-empty str or None, not {model!r:.80}")
    check_max_tokens(max_tokens)
    check_timeout(timeout)
    runner = SubagentRunner(
        name=name,
        tools=_checked_tools(tools),
        system=system,
        model=model,
        options=options,
        max_tokens=max_tokens,
        max_depth=_check_depth(max_depth),
    )
    return Tool(
        name=name,
        description=description,
        input_schema=_INPUT_SCHEMA,
        run=runner,
        concurrency_safe=all(t.concurrency_safe is True for t in runner.tools),
        interrupt_behavior="cancel",
        cancels_siblings_on_error=cancels_siblings_on_error,
        timeout=timeout,
    )


def _checked_tools(tools: Sequence[Tool]) -> tuple[Tool, ...]:
    if isinstance(tools, str | bytes) or not isinstance(tools, Sequence):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"tools must be a sequence of Tool values, not {tools!r:.80}")
    return tuple(tools_by_name(tools).values())


@final
@attrs.frozen(eq=False)
class SubagentRunner:
    """The ``run`` of a subagent's tool (what :func:`subagent` builds; the durable
    and OpenTelemetry layers recognise a subagent by it)."""

    name: str
    tools: tuple[Tool, ...]
    system: Any
    model: str | None
    options: TurnOptions | None
    max_tokens: int | None
    max_depth: int
    #: The child's options for each parent ``can_use_tool`` seen (by id, kept with it).
    _inherited: dict[int, tuple[Any, TurnOptions]] = attrs.field(
        factory=dict[int, tuple[Any, TurnOptions]], init=False, repr=False
    )

    async def __call__(self, input: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        output, _end = await self.call(input, ctx)
        return output

    async def call(
        self,
        input: Mapping[str, Any],
        ctx: ToolContext,
        *,
        tools: Sequence[Tool] | None = None,
        client: Any = None,
    ) -> tuple[ToolOutput, TurnEnd | None]:
        """The call's result, and the subagent's ``TurnEnd`` (None: it did not run).
        *tools* (None: the subagent's) and *client* (None: the parent turn's) are
        for the layers that wrap them (tracing)."""
        parent = ctx.turn
        if parent is None:
            return ToolOutput(
                f"Error: {self.name} runs only inside a turn (query() or a Session).",
                is_error=True,
            ), None
        depth = parent.depth + 1
        if depth > self.max_depth:
            return ToolOutput(
                f"Error: {self.name} was not run: subagents nest at most {self.max_depth}"
                " deep. Do the task without delegating it.",
                is_error=True,
            ), None
        end = await self.run_turn(
            parent,
            str(input["prompt"]),
            ctx,
            tools=self.tools if tools is None else tools,
            client=client,
        )
        return self.result(end), end

    async def run_turn(
        self,
        parent: TurnInfo,
        prompt: str,
        ctx: ToolContext,
        *,
        tools: Sequence[Tool],
        client: Any = None,
    ) -> TurnEnd:
        """Run the subagent's turn for *prompt* to its ``TurnEnd`` (recorded in
        *parent*), its events reported as the call's progress."""
        control = TurnControl()
        done = False
        end: TurnEnd | None = None

        async def abort_when_cut() -> None:
            # The call's scope was cancelled: end the child's turn as an abort would,
            # while it runs on shielded below.
            try:
                await trio.sleep_forever()
            except trio.Cancelled as exc:
                if not done:
                    _stop(control, exc.reason)
                raise

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(abort_when_cut)
                with trio.CancelScope(shield=True):
                    try:
                        end = await self._drive(parent, prompt, ctx, control, tools, client)
                    finally:
                        done = True
                        nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            # The watcher's nursery is an implementation detail: a single error
            # (the child's, or the call's Cancelled) is raised as itself.
            leaf = unwrap_single(group)
            if leaf is None:
                raise
            raise leaf from None
        assert end is not None
        return end

    async def _drive(
        self,
        parent: TurnInfo,
        prompt: str,
        ctx: ToolContext,
        control: TurnControl,
        tools: Sequence[Tool],
        client: Any,
    ) -> TurnEnd:
        options = self._options_under(parent)
        depth = parent.depth + 1
        report = ctx.progress
        name = self.name
        run_as_agent(name)
        end: TurnEnd | None = None
        async with query(
            parent.client if client is None else client,
            [UserMessage(prompt)],
            tools=tools,
            model=self.model if self.model is not None else parent.model,
            system=self.system,
            max_tokens=self.max_tokens,
            options=options,
            control=control,
        ) as events:
            async for event in events:
                if isinstance(event, TextDelta):
                    report(SubagentText(name, depth, event.text))
                elif isinstance(event, BlockFinished) and isinstance(event.block, ToolUseBlock):
                    block = event.block
                    report(SubagentToolStarted(name, depth, block.id, block.name, block.input))
                elif isinstance(event, ToolResult):
                    report(
                        SubagentToolFinished(
                            name, depth, event.tool_use_id, event.is_error, event.abort_reason
                        )
                    )
                elif isinstance(event, ToolProgress):
                    data = event.data
                    if isinstance(data, _NESTED):
                        report(data)  # a subagent of the subagent: it names itself
                    else:
                        report(SubagentToolProgress(name, depth, event.tool_use_id, data))
                elif isinstance(event, TurnEnd):
                    end = event
        assert end is not None, "query() ends with a TurnEnd unless its block is left"
        parent.record_subagent(SubagentTurn(name, ctx.tool_use_id, end))
        return end

    def _options_under(self, parent: TurnInfo) -> TurnOptions:
        """The child's options under *parent*: its own, asking the parent's
        ``can_use_tool`` unless they name one. Made once per parent check (building a
        TurnOptions runs every validator: a quarter of a millisecond)."""
        options = self.options if self.options is not None else _DEFAULT_OPTIONS
        inherited = parent.options.can_use_tool if isinstance(parent.options, TurnOptions) else None
        if options.can_use_tool is not None or inherited is None:
            return options
        cached = self._inherited.get(id(inherited))
        if cached is None or cached[0] is not inherited:
            if len(self._inherited) >= 64:  # a program making checks on the fly
                self._inherited.clear()
            cached = self._inherited[id(inherited)] = (
                inherited,
                attrs.evolve(options, can_use_tool=inherited),
            )
        return cached[1]

    def result(self, end: TurnEnd) -> ToolOutput:
        """The call's result for the subagent's *end*: its final text, or an error
        saying how it ended (with what it had written)."""
        text = _final_text(end)
        if end.reason is TurnEndReason.COMPLETED:
            if end.output is not None:  # options.output_type: the value, as JSON
                return ToolOutput(_typed(end.output))
            return ToolOutput(text or f"({self.name} finished without text.)")
        why = _ENDINGS.get(end.reason, "ended early")
        detail = f" {end.message}" if end.message else ""
        written = f"\n\nWhat it had written:\n{text}" if text else ""
        return ToolOutput(
            f"Error: subagent {self.name} {why} ({end.reason}).{detail}{written}", is_error=True
        )


_ENDINGS: Final[Mapping[str, str]] = {
    TurnEndReason.MAX_TURNS: "used all its model turns without finishing",
    TurnEndReason.PERMISSION_REJECTED: "stopped: the user rejected one of its tool calls",
    TurnEndReason.ERROR: "failed",
    TurnEndReason.AWAITING_APPROVAL: (
        "stopped: some of its tool calls need approval, which a subagent cannot wait for"
    ),
    TurnEndReason.BUDGET_EXHAUSTED: "stopped: its budget is spent",
    TurnEndReason.STOP_HOOK_LIMIT: "stopped: its stop hooks kept blocking its end",
    TurnEndReason.ABORTED_STREAMING: "was aborted",
    TurnEndReason.ABORTED_TOOLS: "was aborted",
}


def _stop(control: TurnControl, reason: str | None) -> None:
    """End the child's turn as the parent's call was cut: an interrupt interrupts it
    (its ``"block"`` tools finish), anything else aborts it with the same reason."""
    if reason == AbortReason.INTERRUPT:
        control.interrupt()
        return
    try:
        why = AbortReason(reason)
    except ValueError:  # a deadline, or a scope cancelled without an AbortReason
        why = AbortReason.USER_INTERRUPTED
    control.abort(why)


def _final_text(end: TurnEnd) -> str:
    """The text of the turn's last answer (what the subagent reports)."""
    for message in reversed(end.messages):
        if isinstance(message, AssistantMessage):
            return "".join(b.text for b in message.content if isinstance(b, TextBlock)).strip()
    return ""


def _typed(output: Any) -> str:
    """A typed output as the text the parent's model reads: JSON where it can be."""
    dump = getattr(output, "model_dump", None)
    value = dump(mode="json") if callable(dump) else output
    if attrs.has(type(value)):
        value = attrs.asdict(value)
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(output)
