"""A turn's timeline: what streamed and what ran when, and what overlapping saved.

:class:`TurnRecorder` is fed the events of a turn (``recorder.feed(event)``) and is
told by :func:`instrument`-ed tools when each tool really starts and ends. It keeps
the state of every tool call (streaming, while its input streams; queued / executing
/ done / error / cancelled; its latest progress line) for a live view, and per model call the times each block finished
streaming, each tool started and ended, and the stream ended. Everything here is
synchronous; times come from the ``clock`` it is given (``trio.current_time``).
The CLI (live view, ``--json``, the demo) and the session's transcript (a
``timeline`` line per model call, :meth:`TurnRecorder.call_record`) both use it.

Savings: for one model call, the tools were running (one or more at once) for
``busy`` seconds, the length of the union of their runs. Started only once the
stream ended (the way a non-streaming agent runs them), they would have kept the
call going until ``stream_end + busy``; overlapped, it was done at
``max(stream_end, last_end)``. The difference is the time overlapping saved. (The
estimate assumes the tools take as long either way, and credits nothing for
safe tools that ran one after the other only because their blocks streamed one
after the other.) A cancelled tool (Ctrl+C, a sibling's failure) saved nothing:
its run is left out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypeAlias

import attrs

from .._executor import ToolFinished, ToolProgress, ToolResult, summarize_call
from .._loop import (
    AttemptDiscarded,
    BlockFinished,
    ModelFallback,
    TextDelta,
    ToolInputDelta,
    Transition,
    TurnEnd,
)
from .._messages import AssistantMessage, ContentBlock, TextBlock, ThinkingBlock, ToolUseBlock
from .._subagent import (
    SubagentText,
    SubagentToolFinished,
    SubagentToolProgress,
    SubagentToolStarted,
)
from .._tools import Tool, ToolContext, ToolReturn

__all__ = ["ModelCall", "ToolRow", "ToolState", "TurnRecorder", "instrument", "printable"]

ToolState: TypeAlias = Literal["streaming", "queued", "executing", "done", "error", "cancelled"]

_SUMMARY = 48
# ANSI escape sequences (CSI such as colours, OSC such as titles, and lone ESCs).
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|.?)", re.DOTALL)
# Every control character but the newline, which splits lines.
_CONTROLS = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """*text* as a terminal shows it in one cell per column: escape sequences
    dropped, tabs and other control characters turned into spaces (a program's
    coloured output must not move the live view's columns)."""
    return _CONTROLS.sub(" ", _ANSI.sub("", text))


def _describe_block(block: ContentBlock) -> str:
    if isinstance(block, ToolUseBlock):
        return summarize_call(block.name, block.input, limit=_SUMMARY)
    if isinstance(block, TextBlock):
        return f"text ({len(block.text)} chars)"
    if isinstance(block, ThinkingBlock):
        return f"thinking ({len(block.thinking)} chars)"
    return type(block).__name__


@attrs.define
class ToolRow:
    """One tool call as the live view shows it; times are seconds since the turn began."""

    tool_use_id: str
    name: str
    summary: str
    call: int
    queued_at: float
    state: ToolState = "queued"
    progress: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    #: A subagent's calls: its tool's, and its subagents' (``depth`` 1 and deeper),
    #: in the order they started, from the call's typed progress.
    children: list[ToolRow] = attrs.field(factory=list["ToolRow"])
    #: 0 for the turn's own calls; a subagent's call is one deeper than its caller.
    depth: int = 0

    def child(
        self, step: SubagentToolStarted | SubagentToolProgress | SubagentToolFinished
    ) -> ToolRow | None:
        """The row of the subagent call *step* names (None: it never started here)."""
        for row in self.children:
            if row.tool_use_id == step.tool_use_id and row.depth == step.depth:
                return row
        return None


@attrs.define
class ModelCall:
    """One model call of the turn: when it began, its blocks, when its stream ended."""

    index: int
    started_at: float
    reason: str = "prompt"
    blocks: list[tuple[float, int, str]] = attrs.field(factory=list[tuple[float, int, str]])
    stream_ended_at: float | None = None
    tool_ids: list[str] = attrs.field(factory=list[str])
    #: Where this call's text starts in the recorder's text (a tombstone cuts it).
    text_from: int = 0


@attrs.define(eq=False)
class TurnRecorder:
    """Records a turn's events and tool runs (see the module docstring).

    Args:
        clock: returns the current time in seconds (``trio.current_time``).
        on_tool_start: called with each tool row the moment its tool starts.
    """

    clock: Callable[[], float]
    on_tool_start: Callable[[ToolRow], None] | None = None
    origin: float = attrs.field(init=False)
    text: list[str] = attrs.field(factory=list[str], init=False)
    tools: dict[str, ToolRow] = attrs.field(factory=dict[str, ToolRow], init=False)
    calls: list[ModelCall] = attrs.field(factory=list[ModelCall], init=False)
    end: TurnEnd | None = attrs.field(default=None, init=False)

    def __attrs_post_init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Forget everything: a new turn begins now (``chat`` records turn after turn)."""
        self.origin = self.clock()
        self.text.clear()
        self.tools.clear()
        self.calls[:] = [ModelCall(1, 0.0)]
        self.end = None

    def now(self) -> float:
        """Seconds since the turn began."""
        return self.clock() - self.origin

    @property
    def current(self) -> ModelCall:
        """The model call streaming now (or the last one)."""
        return self.calls[-1]

    def _row(
        self, tool_use_id: str, name: str, input: Mapping[str, Any], state: ToolState = "queued"
    ) -> ToolRow:
        row = self.tools.get(tool_use_id)
        if row is None:
            row = self.tools[tool_use_id] = ToolRow(
                tool_use_id,
                name,
                summarize_call(name, input, limit=_SUMMARY),
                self.current.index,
                self.now(),
                state,
            )
            self.current.tool_ids.append(tool_use_id)
        elif row.state == "streaming":  # its whole input now
            row.summary = summarize_call(name, input, limit=_SUMMARY)
            row.state = state
        return row

    # -- what instrumented tools report ------------------------------------------------

    def tool_started(self, tool_use_id: str, name: str, input: Mapping[str, Any]) -> None:
        """A tool's ``run`` was called."""
        row = self._row(tool_use_id, name, input)
        row.state = "executing"
        row.started_at = self.now()
        if self.on_tool_start is not None:
            self.on_tool_start(row)

    def tool_ended(self, tool_use_id: str) -> None:
        """A tool's ``run`` returned, raised or was cancelled."""
        row = self.tools.get(tool_use_id)
        if row is not None and row.ended_at is None:
            row.ended_at = self.now()

    # -- the turn's events -------------------------------------------------------------

    def feed(self, event: object) -> None:
        """Update the record with one event of the turn."""
        if isinstance(event, TextDelta):
            self.text.append(event.text)
        elif isinstance(event, ToolInputDelta):  # a row while its input streams
            self._row(event.tool_use_id, event.name, event.partial_input, "streaming")
        elif isinstance(event, BlockFinished):
            self.current.blocks.append((self.now(), event.index, _describe_block(event.block)))
            if isinstance(event.block, ToolUseBlock):
                self._row(event.block.id, event.block.name, event.block.input)
        elif isinstance(event, AssistantMessage):
            if self.current.stream_ended_at is None:
                self.current.stream_ended_at = self.now()
            if self.text and not "".join(self.text).endswith("\n"):
                self.text.append("\n")
        elif isinstance(event, ToolProgress):
            row = self.tools.get(event.tool_use_id)
            if row is not None:
                self._progress(row, event.data)
        elif isinstance(event, ToolFinished | ToolResult):
            row = self.tools.get(event.tool_use_id)
            if row is not None and row.state in ("streaming", "queued", "executing"):
                if event.abort_reason is not None:
                    row.state = "cancelled"
                else:
                    row.state = "error" if event.is_error else "done"
                if row.ended_at is None:
                    row.ended_at = self.now()
        elif isinstance(event, TurnEnd):
            self.end = event
            for row in self.tools.values():  # cut while its input streamed (Ctrl+C)
                if row.state == "streaming":
                    row.state = "cancelled"
                for child in row.children:  # its subagent ended before saying so
                    if child.ended_at is None:
                        child.state, child.ended_at = "cancelled", self.now()
        elif isinstance(event, Transition):
            call = ModelCall(event.turn, self.now(), str(event.reason), text_from=len(self.text))
            self.calls.append(call)
        elif isinstance(event, AttemptDiscarded):
            # The call is retried: what it streamed disappears; say why, once.
            del self.text[self.current.text_from :]
            for tool_use_id in [i for i in self.current.tool_ids if self._streaming(i)]:
                self.current.tool_ids.remove(tool_use_id)  # it streams again, or not
                del self.tools[tool_use_id]
            why = f" after {type(event.error).__name__}" if event.error is not None else ""
            self.text.append(f"[model call {event.model_call} discarded{why}: {event.reason}]\n")
        elif isinstance(event, ModelFallback):
            self.text.append(
                f"[overloaded: falling back from {event.from_model} to {event.to_model}]\n"
            )

    def _progress(self, row: ToolRow, data: object) -> None:
        if isinstance(data, SubagentText):
            return  # a subagent's text: its calls and its result are what the row shows
        if isinstance(data, SubagentToolStarted):
            if row.child(data) is None:
                now = self.now()
                summary = summarize_call(data.name, data.input, limit=_SUMMARY)
                row.children.append(
                    ToolRow(
                        data.tool_use_id,
                        data.name,
                        summary,
                        row.call,
                        now,
                        "executing",
                        started_at=now,
                        depth=data.depth,
                    )
                )
            return
        if isinstance(data, SubagentToolFinished):
            child = row.child(data)
            if child is not None and child.ended_at is None:
                child.state = (
                    "cancelled"
                    if data.abort_reason is not None
                    else "error"
                    if data.is_error
                    else "done"
                )
                child.ended_at = self.now()
            return
        if isinstance(data, SubagentToolProgress):
            child = row.child(data)
            if child is None:
                return
            row, data = child, data.data
        lines = printable(str(data)).strip().splitlines()
        row.progress = lines[-1] if lines else row.progress

    def _streaming(self, tool_use_id: str) -> bool:
        return self.tools[tool_use_id].state == "streaming"

    # -- the timeline --------------------------------------------------------------------

    def call_tools(self, call: ModelCall) -> list[ToolRow]:
        """The tool rows of *call*, in the order the model asked for them."""
        return [self.tools[i] for i in call.tool_ids]

    def saved(self, call: ModelCall) -> float:
        """Seconds overlapping saved in *call* (0 without tools or a finished stream;
        a cancelled tool's run counts for nothing)."""
        if call.stream_ended_at is None:
            return 0.0
        runs = sorted(
            (r.started_at, r.ended_at if r.ended_at is not None else self.now())
            for r in self.call_tools(call)
            if r.started_at is not None and r.state != "cancelled"
        )
        if not runs:
            return 0.0
        busy = 0.0
        reached = runs[0][0]
        for start, end in runs:
            start = max(start, reached)
            if end > start:
                busy += end - start
                reached = end
        stream_end = call.stream_ended_at
        last = max(end for _, end in runs)
        return max(0.0, stream_end + busy - max(stream_end, last))

    def total_saved(self) -> float:
        """Seconds overlapping saved over every model call of the turn."""
        return sum(self.saved(c) for c in self.calls)

    def timeline(self, call: ModelCall) -> list[tuple[float, str]]:
        """*call*'s moments, in time order: blocks finished, tools started and ended."""
        moments: list[tuple[float, str]] = [(call.started_at, f"model call {call.index} began")]
        for t, index, what in call.blocks:
            moments.append((t, f"block {index} finished streaming: {what}"))
        for row in self.call_tools(call):
            if row.started_at is not None:
                moments.append((row.started_at, f"{row.summary} started"))
            if row.ended_at is not None:
                moments.append((row.ended_at, f"{row.summary} {row.state}"))
        if call.stream_ended_at is not None:
            moments.append((call.stream_ended_at, "stream ended"))
        moments.sort(key=lambda m: m[0])
        return moments

    def call_record(self, call: ModelCall, origin: float = 0.0) -> dict[str, Any]:
        """*call*'s timeline as plain data, its times in seconds since *origin*
        (seconds since the turn began; ``call.started_at`` makes them relative to
        the call's start), rounded to the millisecond."""

        def t(value: float | None) -> float | None:
            return None if value is None else _r(value - origin)

        return {
            "index": call.index,
            "reason": call.reason,
            "started_at": t(call.started_at),
            "stream_ended_at": t(call.stream_ended_at),
            "blocks": [{"t": t(at), "index": i, "block": w} for at, i, w in call.blocks],
            "tools": [
                {
                    "tool_use_id": r.tool_use_id,
                    "call": r.summary,
                    "state": r.state,
                    "started_at": t(r.started_at),
                    "ended_at": t(r.ended_at),
                }
                for r in self.call_tools(call)
            ],
            "saved": _r(self.saved(call)),
        }

    def summary(self) -> dict[str, Any]:
        """The whole timeline as plain data (for ``--json``)."""
        return {
            "calls": [self.call_record(c) for c in self.calls],
            "saved": _r(self.total_saved()),
        }


def _r(t: float) -> float:
    return round(t, 3)


def instrument(tools: Sequence[Tool], recorder: TurnRecorder) -> list[Tool]:
    """*tools* whose ``run`` tells *recorder* when it starts and ends."""

    def wrap(tool: Tool) -> Tool:
        inner = tool.run

        async def run(input: Mapping[str, Any], ctx: ToolContext) -> ToolReturn:
            recorder.tool_started(ctx.tool_use_id, ctx.tool_name, input)
            try:
                return await inner(input, ctx)
            finally:
                recorder.tool_ended(ctx.tool_use_id)

        return attrs.evolve(tool, run=run)

    return [wrap(t) for t in tools]
