"""Layer 4: a conversation with history, transcript, interrupt/abort and usage totals.

Example::

    async with trio_agent.Session(client, tools, model=trio_agent.DEFAULT_MODEL,
                                  transcript_path="session.jsonl") as session:
        result = await session.run("Fix the failing test")   # raises the turn's error
        async with session.submit("And the next one") as events:   # streaming
            async for event in events:
                ...
        session.messages   # the history, valid for the API
        session.usage      # token totals over every turn (usage.cost_usd: their cost)
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, final

import attrs
import trio

from .._exceptions import ApprovalError, TranscriptError
from .._executor import ToolResult
from .._loop import (
    BlockFinished,
    Compacted,
    PendingApprovals,
    QueryEvent,
    Transition,
    TurnControl,
    TurnEnd,
    check_approvals,
    query,
)
from .._messages import AssistantMessage, ContentBlock, Message, Usage, UserMessage
from .._model import AnthropicClient, ModelClient
from .._models import cost_usd, price_provider
from .._options import TurnOptions, check_max_tokens
from .._permissions import PermissionDecision
from .._tools import Tool, tools_by_name
from ._run import RunResult, RunWatch, with_output_type
from ._timeline import TurnRecorder, instrument
from ._transcript import Transcript, TranscriptWriter, read_transcript, repair_history

__all__ = ["Session", "estimate_cost"]


def estimate_cost(model: str, usage: Usage, provider: str | None = None) -> float | None:
    """The USD cost of *usage* on *model* at genai-prices' published price (for
    *provider*; None: the model's maker), or None when no price is known.

    Kept for compatibility: ``usage.cost_usd`` (priced per call by the loop) is the
    figure to read; this prices a usage as one call's.
    """
    return cost_usd(usage, model, provider)


def _tools(value: Sequence[Tool]) -> tuple[Tool, ...]:
    if isinstance(value, str | bytes) or not isinstance(value, Sequence | tuple | list):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"tools must be a sequence of Tool values, not {value!r:.80}")
    tools = tuple(value)
    tools_by_name(tools)
    return tools


def _check_options(_inst: Any, _attr: Any, value: object) -> None:
    if not isinstance(value, TurnOptions):
        raise TypeError(f"options must be a TurnOptions, not {type(value).__name__}")


def _check_max_tokens(_inst: Any, _attr: Any, value: object) -> None:
    check_max_tokens(value)


def _check_model(_inst: Any, _attr: Any, value: object) -> None:
    if not isinstance(value, str) or not value:
        raise TypeError(f"model must be a non-empty str, not {value!r:.80}")


@final
@attrs.define(eq=False)
class Session:
    """A conversation with a model and a set of tools.

    Use it as an async context manager (``async with Session(...) as session:``):
    at the end its transcript is closed, and so is its client if the session
    made it.

    Args:
        client: an :class:`~trio_agent.AnthropicClient` (anything ``query`` accepts);
            None: an ``AnthropicClient()`` of the session's own (reading
            ``ANTHROPIC_API_KEY``), closed with the session.
        tools: the tools the model may call (none by default).
        model: the model name.
        system: the system prompt (a string or a list of blocks).
        max_tokens: output tokens per model call; unset, the default that
            ``query`` escalates on ``max_tokens`` (up to the model's output cap).
        transcript_path: a JSONL file the history is appended to as each message
            completes (fsynced at the end of each turn); ``None`` for no transcript.
            A file that already holds a conversation is refused
            (:class:`~trio_agent.TranscriptError`) unless *continue_transcript*.
        continue_transcript: go on with the conversation *transcript_path* holds:
            its history is read back (repaired, as :meth:`resume` does) and new
            messages are appended to it.
        options: every other option of each turn (permissions, limits, recovery,
            timeouts, caps, compaction, budgets, ``extra_body``), a
            :class:`~trio_agent.TurnOptions`; replace it between turns, e.g.
            ``session.options = attrs.evolve(session.options, max_turns=5)``.
        context: the tools' shared context (``ctx.context``); the session keeps
            what the context modifiers of each turn's non-safe tools make of it.
        messages: the history to start from (see :meth:`resume`).
        pending: the calls of the last message of *messages* that await approval
            (a ``TurnEnd.pending``), when starting from a turn that ended
            ``awaiting_approval``.

    Raises:
        TypeError: an unknown keyword; *options* is not a ``TurnOptions``; a tool
            is not a ``Tool``.
        ValueError: ``max_tokens`` < 1.
        ToolDefinitionError: two tools have the same name.
        TranscriptError: *transcript_path* already holds a conversation (without
            *continue_transcript*), or is not a transcript; with
            *continue_transcript*, it cannot be read back.
    """

    client: ModelClient = attrs.field(default=None)
    tools: Sequence[Tool] = attrs.field(default=(), converter=_tools)
    model: str = attrs.field(kw_only=True, validator=_check_model)
    system: Any = attrs.field(default=None, kw_only=True)
    max_tokens: int | None = attrs.field(default=None, kw_only=True, validator=_check_max_tokens)
    transcript_path: str | os.PathLike[str] | None = attrs.field(default=None, kw_only=True)
    continue_transcript: bool = attrs.field(default=False, kw_only=True)
    options: TurnOptions = attrs.field(factory=TurnOptions, kw_only=True, validator=_check_options)
    context: Any = attrs.field(default=None, kw_only=True)
    _messages: list[Message] = attrs.field(factory=list[Message], kw_only=True, alias="messages")
    _usage: Usage = attrs.field(factory=lambda: Usage(cost_usd=0.0), init=False)
    # The running turn's usage: TurnEnd's total once it came; before, the answers
    # it sent, priced only if the turn ends without its TurnEnd (the loop priced
    # them already: pricing each one here too would be per-answer work for nothing).
    _turn_usage: Usage | None = attrs.field(default=None, init=False)
    _turn_answers: list[AssistantMessage] = attrs.field(factory=list[AssistantMessage], init=False)
    _subagent_usage: dict[str, Usage] = attrs.field(factory=dict[str, Usage], init=False)
    _writer: TranscriptWriter | None = attrs.field(default=None, init=False)
    _truncate_to: int | None = attrs.field(default=None, init=False)
    _control: TurnControl | None = attrs.field(default=None, init=False)
    _busy: bool = attrs.field(default=False, init=False)
    _pending: PendingApprovals | None = attrs.field(default=None, kw_only=True, alias="pending")
    # What the running answer sent so far that the history has not recorded yet: its
    # finished blocks, and the results of its finished tools. A turn that ends
    # without its TurnEnd (the consumer left, a tool raised KeyboardInterrupt...)
    # keeps them, so a resumed session knows what happened.
    _turn_blocks: list[ContentBlock] = attrs.field(factory=list[ContentBlock], init=False)
    _turn_results: dict[str, ToolResult] = attrs.field(factory=dict[str, ToolResult], init=False)
    _turn_ended: bool = attrs.field(default=False, init=False)
    # The running turn's timeline (with a transcript): one ``timeline`` line per
    # model call, written when the next call begins or the turn ends.
    _timeline: TurnRecorder | None = attrs.field(default=None, init=False)
    _timeline_ids: dict[int, str] = attrs.field(factory=dict[int, str], init=False)
    _owns_client: bool = attrs.field(default=False, init=False)

    def __attrs_post_init__(self) -> None:
        if self.client is None:  # pyright: ignore[reportUnnecessaryComparison]
            self.client = AnthropicClient()
            self._owns_client = True
        if self.transcript_path is None:
            if self.continue_transcript:
                raise TypeError("continue_transcript=True needs a transcript_path")
            return
        path = os.fspath(self.transcript_path)
        if not os.path.exists(path) or os.path.getsize(path) == 0:
            return
        found = read_transcript(path)
        if self.continue_transcript:
            self._load(found)
        elif found.messages or found.model is None:
            what = (
                f"already holds a conversation ({len(found.messages)} messages)"
                if found.messages
                else "is not a trio-agent transcript"
            )
            raise TranscriptError(
                f"{path!r} {what}: pass continue_transcript=True (or use"
                " Session.resume) to go on with it, or choose another file"
            )

    def _load(self, transcript: Transcript) -> None:
        """Start from *transcript*'s history (the file was read back)."""
        if self._messages:
            raise TypeError("continue_transcript=True reads the history: do not pass messages=")
        self._messages = list(transcript.messages)
        self._truncate_to = transcript.valid_length
        self._pending = transcript.pending
        # A transcript keeps the API's usage (no cost): each answer is priced again.
        self._usage = sum(
            (self._priced(m) for m in transcript.messages if isinstance(m, AssistantMessage)),
            Usage(cost_usd=0.0),
        )
        # Each subagent turn as its line recorded it (its cost included).
        for run in transcript.subagents:
            self._subagent_usage[run.agent] = (
                self._subagent_usage.get(run.agent, Usage(cost_usd=0.0)) + run.end.usage
            )
            self._usage = self._usage + run.end.usage
        if transcript.repaired_tool_use_ids:
            # The file lacks the synthetic results: record the repaired history.
            self._open_writer().replace_history(transcript.messages)

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the transcript and, if the session made its client, the client."""
        self.close()
        if self._owns_client:
            self._owns_client = False
            aclose = getattr(self.client, "aclose", None)
            if aclose is not None:
                await aclose()

    @classmethod
    def resume(
        cls,
        path: str | os.PathLike[str],
        client: Any,
        tools: Sequence[Tool],
        **kwargs: Any,
    ) -> Session:
        """Continue the conversation recorded in the transcript at *path*.

        The history comes back valid for the API even after a crash: a torn last
        line is dropped, tool calls that never finished get an "interrupted"
        error result (also appended to the file on the next turn). ``model`` and
        ``system`` default to the transcript header's; new messages are appended to
        the same file.

        Raises:
            TranscriptError: the file cannot be read or a line other than the last
                is corrupt; no model in the header nor in *kwargs*.
        """
        transcript = read_transcript(path)
        kwargs.setdefault("system", transcript.system)
        if "model" not in kwargs:
            if transcript.model is None:
                raise TranscriptError(f"{os.fspath(path)!r} has no header: pass model=")
            kwargs["model"] = transcript.model
        return cls(client, tools, transcript_path=path, continue_transcript=True, **kwargs)

    @property
    def messages(self) -> tuple[Message, ...]:
        """The history: every message so far, valid for the API between turns
        (except that while calls await approval, it ends with their answer, whose
        tool uses they are)."""
        return tuple(self._messages)

    @property
    def pending_approvals(self) -> PendingApprovals | None:
        """The tool calls that await approval (the last turn ended
        ``awaiting_approval``), or None; answer them with
        ``submit(approvals={tool_use_id: decision})``."""
        return self._pending

    @property
    def usage(self) -> Usage:
        """Token usage summed over every model call of every turn, with its
        ``cost_usd`` (None once a call's price was unknown)."""
        return self._usage

    @property
    def subagent_usage(self) -> Mapping[str, Usage]:
        """The usage of each subagent (:func:`trio_agent.subagent`) over every turn,
        by name, its own subagents' included; :attr:`usage` counts it already."""
        return MappingProxyType(self._subagent_usage)

    @property
    def cost(self) -> float | None:
        """The USD cost so far (``usage.cost_usd``: each call at its model's published
        price), or None when a call's price was unknown."""
        return self._usage.cost_usd

    def _priced(self, message: AssistantMessage) -> Usage:
        """The usage of an answer the loop did not price (a transcript's, a turn left
        early), priced as the loop prices each call."""
        provider = price_provider(self.client)
        cost = cost_usd(message.usage, message.model or self.model, provider)
        return attrs.evolve(message.usage, cost_usd=cost)

    @property
    def running(self) -> bool:
        """Whether a turn is running."""
        return self._busy

    def _open_writer(self) -> TranscriptWriter:
        if self._writer is None:
            assert self.transcript_path is not None
            self._writer = TranscriptWriter.open(
                self.transcript_path,
                model=self.model,
                system=self.system,
                truncate_to=self._truncate_to,
            )
            self._truncate_to = None
        return self._writer

    def _record(self, message: Message) -> None:
        self._messages.append(message)
        if self.transcript_path is not None:
            self._open_writer().append(message)

    def _replace(self, messages: Sequence[Message]) -> None:
        self._messages = list(messages)
        if self.transcript_path is not None:
            self._open_writer().replace_history(self._messages)

    def interrupt(self) -> None:
        """A new message arrived: stop the tools declared ``interrupt_behavior="cancel"``.

        ``"block"`` tools run on; the turn ends once they finish. No-op between turns.
        """
        if self._control is not None:
            self._control.interrupt()

    def abort(self) -> None:
        """Cancel the running turn (Ctrl+C): reason ``user_interrupted``.

        Every tool call already made is answered (synthetic results where needed),
        so the history stays valid. No-op between turns.
        """
        if self._control is not None:
            self._control.abort()

    def close(self) -> None:
        """Close the transcript file (a later turn reopens it)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    @contextlib.asynccontextmanager
    async def submit(
        self,
        prompt: str | Sequence[ContentBlock] | None = None,
        *,
        approvals: Mapping[str, PermissionDecision] | None = None,
    ) -> AsyncGenerator[trio.abc.ReceiveChannel[QueryEvent]]:
        """Send *prompt* and run one turn; yields the channel of the turn's events.

        The events are those of :func:`trio_agent.query`, in order; the history
        and the transcript are updated as each message completes. Leaving the
        block early aborts the turn (the history stays valid).

        After a turn that ended ``awaiting_approval`` (see
        :attr:`pending_approvals`), submit *approvals* instead of a prompt::

            async with session.submit(approvals={call.id: Allow()}) as events:
                ...

        The approved calls run, the denied ones are answered with their message,
        and the turn goes on from there (a call left out stays pending).

        Raises:
            trio.BusyResourceError: another turn of this session is running.
            ApprovalError: a prompt while calls await approval (with or without
                approvals), approvals when none do, approvals for calls that are not
                pending, or neither.
        """
        if self._busy:
            raise trio.BusyResourceError("a turn of this session is already running")
        pending = self._pending
        if pending is not None and prompt is not None:
            raise ApprovalError(
                f"{len(pending.calls)} tool call(s) await approval"
                f" ({', '.join(pending.ids)}): submit(approvals=...) first"
            )
        if pending is None and approvals is not None:
            raise ApprovalError("no tool call is awaiting approval")
        if pending is None and prompt is None:
            raise ApprovalError("submit() needs a prompt (no tool call awaits approval)")
        if pending is not None:
            # Checked here, so bad approvals leave the session as it was.
            check_approvals(self._messages, pending, approvals)
        message = None
        if prompt is not None:
            message = UserMessage(prompt if isinstance(prompt, str) else tuple(prompt))
        self._busy = True
        self._turn_usage, self._turn_answers = None, []
        self._turn_blocks, self._turn_results, self._turn_ended = [], {}, False
        self._timeline_ids = {}
        self._timeline = None if self.transcript_path is None else TurnRecorder(trio.current_time)
        try:
            control = self._control = TurnControl()
            history = self.messages if message is None else (*self.messages, message)
            tools = self.tools if self._timeline is None else instrument(self.tools, self._timeline)
            async with query(
                self.client,
                history,
                tools=tools,
                model=self.model,
                system=self.system,
                max_tokens=self.max_tokens,
                options=self.options,
                control=control,
                context=self.context,
                pending=pending,
                approvals=approvals,
            ) as events:
                # query() accepted the turn: only now is the prompt part of the
                # history (and the transcript), so a turn refused at its start
                # leaves no prompt that nobody answered.
                if message is not None:
                    self._record(message)
                yield _Observed(events, self._on_event)
        finally:
            self._control = None
            self._busy = False
            # TurnEnd's total, or (a turn left early) what its answers reported.
            self._usage = self._usage + self._turn_spent()
            if not self._turn_ended:
                self._keep_partial()
            self._finish_turn()

    def _turn_spent(self) -> Usage:
        """The running turn's usage: TurnEnd's, else its answers' (each priced)."""
        if self._turn_usage is not None:
            return self._turn_usage
        return sum((self._priced(m) for m in self._turn_answers), Usage(cost_usd=0.0))

    async def run(
        self,
        prompt: str | Sequence[ContentBlock] | None = None,
        *,
        approvals: Mapping[str, PermissionDecision] | None = None,
        output_type: Any = None,
    ) -> RunResult:
        """Run one turn of *prompt* (or of *approvals*, as :meth:`submit` takes them)
        to its end and return its :class:`~trio_agent.RunResult`.

        *output_type* sets ``options.output_type`` for this turn only.

        Raises:
            TrioAgentError: the error that ended the turn (``TurnEnd.error``:
                ``AuthenticationError``, ``OverloadedError``,
                ``OutputValidationError``...); the history stays valid. A turn that
                ended another way (aborted, awaiting approval, a limit) is returned.
            trio.BusyResourceError, ApprovalError: as :meth:`submit`.
        """
        options = self.options
        self.options = with_output_type(options, output_type)
        watch = RunWatch()
        if prompt is not None:
            # The prompt is recorded by the session, never sent as an event.
            watch.added.append(UserMessage(prompt if isinstance(prompt, str) else tuple(prompt)))
        try:
            async with self.submit(prompt, approvals=approvals) as events:
                async for event in events:
                    watch.see(event)
        finally:
            self.options = options
        return watch.result()

    def _keep_partial(self) -> None:
        """Record what a turn cut short had finished: the blocks of its last answer
        (text, every finished tool_use) and the results of its finished tools; the
        rest of its tool uses get "interrupted" results from :meth:`_finish_turn`."""
        if self._turn_blocks:
            self._record(
                AssistantMessage(
                    id="msg_interrupted", model=self.model, content=tuple(self._turn_blocks)
                )
            )
        last = self._messages[-1] if self._messages else None
        if isinstance(last, AssistantMessage):
            done = [self._turn_results[u.id] for u in last.tool_uses if u.id in self._turn_results]
            if done:
                self._record(UserMessage(tuple(r.to_block() for r in done)))
        self._turn_blocks, self._turn_results = [], {}

    def _finish_turn(self) -> None:
        # Whatever happened (an early exit, an error), the history stays valid;
        # calls that still await approval stay unanswered.
        if (
            self._pending is not None
            and self._messages
            and self._pending.belongs_to(self._messages[-1])
        ):
            if self._writer is not None:
                self._writer.sync()
            return
        self._pending = None
        fixed, ids = repair_history(self._messages)
        if ids:
            self._replace(fixed)
        if self._writer is not None:
            self._writer.sync()

    def _on_event(self, event: QueryEvent) -> None:
        """Keep the history, the transcript and the usage up to date with *event*."""
        if self._timeline is not None:
            self._time(self._timeline, event)
        if isinstance(event, (AssistantMessage, UserMessage)):
            self._pending = None  # a new message answers (or follows) pending calls
            self._record(event)
            if isinstance(event, AssistantMessage):
                self._turn_answers.append(event)
                self._turn_blocks = []
            else:
                self._turn_results = {}
        elif isinstance(event, BlockFinished):
            self._turn_blocks.append(event.block)
        elif isinstance(event, ToolResult):
            self._turn_results[event.tool_use_id] = event
        elif isinstance(event, Transition):
            self._turn_blocks, self._turn_results = [], {}  # a new model call
        elif isinstance(event, Compacted):
            self._replace(event.messages)
        elif isinstance(event, TurnEnd):
            self._turn_ended = True
            self._turn_usage = event.usage  # every call, dropped attempts included
            self.context = event.context
            final = list(event.messages)
            if final != self._messages:  # a denied prompt is left out
                self._replace(final)
            if event.pending is not None:
                self._pending = event.pending
                if self.transcript_path is not None:
                    self._open_writer().append_pending(event.pending)
            for run in event.subagents:
                spent = self._subagent_usage.get(run.agent, Usage(cost_usd=0.0))
                self._subagent_usage[run.agent] = spent + run.end.usage
                if self.transcript_path is not None:
                    self._open_writer().append_subagent(run)

    def _time(self, timeline: TurnRecorder, event: QueryEvent) -> None:
        """Feed *event* to the turn's timeline; write a model call's ``timeline`` line
        once it is over (the next call begins, or the turn ends)."""
        if isinstance(event, Transition):
            self._write_timeline(timeline)
        timeline.feed(event)
        if isinstance(event, AssistantMessage):
            self._timeline_ids[timeline.current.index] = event.id
        elif isinstance(event, TurnEnd):
            self._write_timeline(timeline)
            self._timeline = None

    def _write_timeline(self, timeline: TurnRecorder) -> None:
        call = timeline.current
        record = timeline.call_record(call, origin=call.started_at)
        self._open_writer().append_timeline(record, self._timeline_ids.get(call.index))


@final
class _Observed(trio.abc.ReceiveChannel[QueryEvent]):
    """The turn's events, each shown to *on_event* as the consumer receives it.

    It runs in the consumer's task: no task, nursery or channel hop of its own.
    An error of *on_event* (a transcript write) is raised by ``receive()``.
    """

    def __init__(
        self, events: trio.abc.ReceiveChannel[QueryEvent], on_event: Callable[[QueryEvent], None]
    ) -> None:
        self._events = events
        self._on_event = on_event

    async def receive(self) -> QueryEvent:
        event = await self._events.receive()
        self._on_event(event)
        return event

    async def aclose(self) -> None:
        await self._events.aclose()
