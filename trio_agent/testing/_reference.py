"""The reference model: a pure simulation of the executor's semantics.

No Trio here: a discrete-event simulation of docs/DESIGN.md's scheduling rules (§2), written
as plainly as possible, that gives each call of a :class:`ToolScenario` its
start and end time, its result kind and where the result was delivered. In
virtual time the real executor must match it exactly
(:func:`~trio_agent.testing.run_scenario`); the benchmarks use it as the ideal
schedule.

Events at the same instant are taken in the order they were caused (FIFO), the
script's actions at an instant before the tools' reactions to them, as in the
real executor. Two *independent* events at one instant (a tool ending exactly
when another fails, say) may happen in either order in the real executor; the
:func:`~trio_agent.testing.scenarios` grid never produces them.
"""

from __future__ import annotations

import heapq
from typing import Literal, TypeAlias

import attrs

from .._executor import AbortReason
from ._scenario import ScenarioError, ToolScenario

__all__ = ["CallOutcome", "ResultKind", "Schedule", "reference_schedule"]

#: ``"ok"``, ``"error"`` (any error result not made by an abort), or an
#: :class:`~trio_agent.AbortReason` value.
ResultKind: TypeAlias = str


@attrs.frozen
class CallOutcome:
    """What happened to one call of a scenario.

    Attributes:
        added: whether ``add_tool`` accepted it (False: refused after
            ``finish()``/``discard()``, or the turn was over before it arrived).
        start: when the tool's ``run`` was called, or None.
        end: when its result became final (``ToolFinished``), or None.
        kind: ``"ok"``, ``"error"`` or an abort reason's value; None if not added.
        started: ``ToolResult.started``.
        via: ``"results"`` or ``"drain"``: where the result was collected.
        progress: when each progress report was delivered.
    """

    added: bool
    start: float | None = None
    end: float | None = None
    kind: ResultKind | None = None
    started: bool = False
    via: Literal["results", "drain"] | None = None
    progress: tuple[float, ...] = ()


@attrs.frozen
class Schedule:
    """The reference's answer for a scenario.

    Attributes:
        calls: one :class:`CallOutcome` per scenario call.
        peak_concurrency: ``ExecutorStatistics.peak_concurrency`` at the end.
        turn_cancelled: whether the turn scope ends up cancelled.
    """

    calls: tuple[CallOutcome, ...]
    peak_concurrency: int
    turn_cancelled: bool


_Event: TypeAlias = tuple[float, int, str, int]


class _Simulation:
    def __init__(self, scenario: ToolScenario) -> None:
        self.sc = scenario
        n = len(scenario.calls)
        self.state = ["pending"] * n  # pending → queued → slot → done; or refused
        self.start: list[float | None] = [None] * n
        self.end: list[float | None] = [None] * n
        self.kind: list[str | None] = [None] * n
        self.started = [False] * n
        self.progress: list[list[float]] = [[] for _ in range(n)]
        self.order: list[int] = []
        self.queue: list[int] = []
        self.slots = 0
        self.unsafe_slots = 0
        self.peak = 0
        self.abort: str | None = None  # sticky abort for calls added later
        self.interrupted = False
        self.adding_closed = False
        self.turn_over = False
        self.turn_cancelled = False
        self.stop: float | None = None  # from then on, results go to drain()
        self.events: list[_Event] = []
        self.seq = 0
        self.now = 0.0

    def push(self, time: float, what: str, index: int = -1) -> None:
        heapq.heappush(self.events, (time, self.seq, what, index))
        self.seq += 1

    def run(self) -> Schedule:
        for time, what, index in self.sc.script():
            self.push(time, what, index)
        while self.events:
            time, _, what, index = heapq.heappop(self.events)
            self.now = time
            if self.turn_over:
                break
            getattr(self, f"on_{what}")(index)
        return self.result()

    # -- the script ------------------------------------------------------------------

    def on_add(self, i: int) -> None:
        if self.adding_closed:
            self.state[i] = "refused"
            return
        call = self.sc.calls[i]
        self.order.append(i)
        self.state[i] = "queued"
        if call.input == "unknown_tool":
            self.finish(i, "error")
        elif self.abort is not None:
            self.finish(i, self.abort)
        elif self.interrupted and call.interrupt_behavior == "cancel":
            self.finish(i, AbortReason.INTERRUPT.value)
        else:
            self.queue.append(i)
            self.pump()

    def on_interrupt(self, _: int) -> None:
        self.interrupted = True
        for i in self.unfinished():
            if self.sc.calls[i].interrupt_behavior == "cancel":
                self.abort_call(i, AbortReason.INTERRUPT.value)
        self.pump()

    def on_discard(self, _: int) -> None:
        self.stop = self.now
        self.adding_closed = True
        for i in self.unfinished():
            self.abort_call(i, AbortReason.STREAMING_FALLBACK.value)

    def on_finish(self, _: int) -> None:
        self.adding_closed = True

    def on_cancel_turn(self, _: int) -> None:
        self.end_turn(AbortReason.USER_INTERRUPTED.value)

    # -- the calls ---------------------------------------------------------------------

    def pump(self) -> None:
        for i in list(self.queue):
            safe = self.sc.calls[i].effectively_safe
            if self.slots < self.sc.max_concurrency and (
                self.slots == 0 or (safe and self.unsafe_slots == 0)
            ):
                self.queue.remove(i)
                self.state[i] = "slot"
                self.slots += 1
                self.unsafe_slots += not safe
                self.peak = max(self.peak, self.slots)
                self.push(self.now, "slot", i)
            elif not safe:
                break

    def on_slot(self, i: int) -> None:
        """The call's task runs: validation, then the permission check."""
        if self.state[i] == "done":
            return
        call = self.sc.calls[i]
        if call.input != "valid":
            self.finish(i, "error")
            self.release(i)
            return
        self.push(self.now + call.permission_delay, "decide", i)

    def on_decide(self, i: int) -> None:
        if self.state[i] == "done":
            return
        call = self.sc.calls[i]
        if call.permission == "deny":
            self.finish(i, "error")
            self.release(i)
        elif call.permission == "reject":
            self.finish(i, AbortReason.PERMISSION_REJECTED.value)
            self.end_turn(AbortReason.PERMISSION_REJECTED.value)
        else:
            self.started[i] = True
            self.start[i] = self.now
            reach = float("inf") if call.outcome == "hang" else call.duration
            for offset in sorted(call.progress):
                if offset <= reach:
                    self.push(self.now + offset, "progress", i)
            if call.outcome != "hang":
                self.push(self.now + call.duration, "end", i)

    def on_progress(self, i: int) -> None:
        if self.state[i] != "done":
            self.progress[i].append(self.now)

    def on_end(self, i: int) -> None:
        if self.state[i] == "done":
            return
        call = self.sc.calls[i]
        if call.fails and call.cascade and self.abort is None:
            self.abort = AbortReason.SIBLING_ERROR.value
            for j in self.unfinished():
                if j != i:
                    self.abort_call(j, AbortReason.SIBLING_ERROR.value)
        self.finish(i, "error" if call.fails else "ok")
        self.release(i)

    def on_release(self, i: int) -> None:
        self.release(i)

    def release(self, i: int) -> None:
        self.slots -= 1
        self.unsafe_slots -= not self.sc.calls[i].effectively_safe
        self.pump()

    # -- results -----------------------------------------------------------------------

    def unfinished(self) -> list[int]:
        return [i for i in self.order if self.state[i] in ("queued", "slot")]

    def finish(self, i: int, kind: str) -> None:
        self.state[i] = "done"
        self.kind[i] = kind
        self.end[i] = self.now

    def abort_call(self, i: int, reason: str) -> None:
        held = self.state[i] == "slot"
        if i in self.queue:
            self.queue.remove(i)
        self.finish(i, reason)
        if held:  # its task leaves the slot when it has unwound
            self.push(self.now, "release", i)

    def end_turn(self, reason: str) -> None:
        if self.stop is None:
            self.stop = self.now
        self.turn_cancelled = True
        self.turn_over = True
        for i in self.unfinished():
            self.abort_call(i, reason)

    def result(self) -> Schedule:
        outcomes: list[CallOutcome] = []
        ready = 0.0
        deliverable: dict[int, float] = {}
        for i in self.order:
            end = self.end[i]
            if end is None:
                raise ScenarioError(
                    f"call {i} ({self.sc.tool_name(i)}) never ends: nothing cancels it"
                )
            ready = max(ready, end)
            deliverable[i] = ready
        for i in range(len(self.sc.calls)):
            if i not in deliverable:
                outcomes.append(CallOutcome(added=False))
                continue
            in_time = self.stop is None or deliverable[i] < self.stop
            outcomes.append(
                CallOutcome(
                    added=True,
                    start=self.start[i],
                    end=self.end[i],
                    kind=self.kind[i],
                    started=self.started[i],
                    via="results" if self.sc.consume_results and in_time else "drain",
                    progress=tuple(self.progress[i]),
                )
            )
        return Schedule(tuple(outcomes), self.peak, self.turn_cancelled)


def reference_schedule(scenario: ToolScenario) -> Schedule:
    """What the executor must do with *scenario*: a pure simulation, no Trio.

    Raises:
        ScenarioError: a tool would hang forever (nothing cancels it).
    """
    return _Simulation(scenario).run()
