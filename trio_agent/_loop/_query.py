"""query(): the agent's turn loop, a state machine over streamed model calls.

Each iteration streams one model call into a fresh tool executor (tools start at
their ``content_block_stop``, while the model still streams), forwards what happens
as events, and then asks :mod:`trio_agent._loop._recovery` what comes next. The history
is only ever appended to with messages that were sent as events, so a consumer
that appends every ``AssistantMessage`` / ``UserMessage`` event to its own copy
holds exactly ``TurnEnd.messages`` (except after a :class:`Compacted` event, which
replaces the history).

Per-block messages (the client's one-block ``AssistantMessage`` at each
``content_block_stop``) are not forwarded as messages: they are sent as
:class:`BlockFinished` notices, and the complete ``AssistantMessage`` follows once
per model call, right after its stream ends (while its tools may still run). An
answer that is dropped (``max_tokens`` escalation, overloaded retry or fallback)
is never sent as a message; a ``pause_turn`` answer is held back and sent merged
with its continuation, so two assistant messages never follow each other.

Nothing received is lost when a turn ends early. After an abort, an interrupt, a
rejection, or an API / stream error that ends the turn (an ``error`` event, a
disconnect, a truncated stream, an idle timeout), the finished blocks of the cut
answer are sent as one message (``stop_reason`` None) followed by a result for each
of its tool uses (tools still queued never start; running ones are cancelled and
say they may have partly completed). A cut answer's unfinished block is not kept
(its deltas were sent). The exception is an attempt the loop *retries* (a failure
after content: a reset, a truncation, an idle timeout, a retryable in-stream error,
too many stalls; an overloaded retry; a model fallback; a ``max_tokens``
escalation): as docs/DESIGN.md ("Two levels of retry") and Claude Code do, it is
dropped whole so the retry answers the same request, and an :class:`AttemptDiscarded` tombstone (with the
tools that had started) tells a UI to drop what it showed. The streamed retries
follow the retry policy's backoff; the last resort is one non-streaming request.
If every recovery fails, the last discarded attempt's finished blocks are kept as
a cut answer's are. Either way, every tool_use announced by a
:class:`BlockFinished` gets exactly one :class:`ToolResult` event.

Example::

    async with trio_agent.query(client, [UserMessage("Fix the bug")], tools=tools,
                                model="claude-sonnet-5-5", max_tokens=8192) as events:
        async for event in events:
            if isinstance(event, TextDelta):
                print(event.text, end="")
            elif isinstance(event, TurnEnd):
                history = event.messages
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, cast

import attrs
import trio

from .._exceptions import ApprovalError, OverloadedError, PromptTooLongError, unwrap_single
from .._executor import AbortReason, summarize_call
from .._hooks import HookError, StopHook
from .._messages import AssistantMessage, Message, ToolResultBlock, Usage, UserMessage
from .._model import ModelClient, RecoverableModelClient, RetryPolicy
from .._models import check_model, cost_usd, price_provider
from .._options import StopHookResult, TurnOptions, check_max_tokens
from .._output import OutputValidationError, output_spec
from .._permissions import Allow, Defer, Deny, PermissionDecision, Reject
from .._tools import Tool, TurnInfo, current_turn, enter_turn, next_agent
from . import _recovery as rec
from ._compact import check_compacted
from ._control import TurnControl
from ._model_call import Attempt, ModelCaller, Phase
from ._outbox import Outbox, open_turn_channel
from ._output import NO_FINAL_CALL, OutputTurn
from ._state import (
    AttemptDiscarded,
    Compacted,
    ModelFallback,
    PendingApprovals,
    QueryEvent,
    State,
    SubagentTurn,
    TransitionReason,
    TurnEnd,
    TurnEndReason,
)

__all__ = ["check_approvals", "check_options", "query"]

logger = logging.getLogger("trio_agent.loop")


_DEFAULT_BLOCK_MESSAGE = "A stop hook blocked the end of the turn; continue."


@attrs.define(eq=False)
class _Loop:
    caller: ModelCaller
    options: TurnOptions
    control: TurnControl
    send: Outbox
    #: ``options.retry``, or the client's policy when that is None.
    retry: RetryPolicy
    #: Whose prices the calls cost (genai-prices' provider id; None: the model's maker).
    provider: str | None = None
    #: The last attempt discarded for a retry since the last successful call: if
    #: the retries fail, its finished blocks are kept, as a cut answer's are.
    discarded: Attempt | None = None
    #: The typed output (``options.output_type``), or None.
    output: OutputTurn | None = None
    #: ``(value,)`` the final-result tool accepted when a stop hook then blocked the
    #: end: the turn's output unless the model calls the tool again.
    held: tuple[Any] | None = None
    #: For a subagent's turn: its parent's ``hooks.subagent_stop``, bound to its name.
    subagent_stop: StopHook | None = None
    #: The subagents' turns the tools ran (TurnInfo.record_subagent), and how many of
    #: them the state's usage counts already.
    subagents: list[SubagentTurn] = attrs.field(factory=list[SubagentTurn])
    counted: int = 0
    #: What the tools see as ``ctx.turn`` (set in the loop's task, inherited by theirs).
    turn: TurnInfo | None = None

    # -- the loop -----------------------------------------------------------------

    async def run(
        self,
        state: State,
        pending: PendingApprovals | None = None,
        approvals: Mapping[str, PermissionDecision] | None = None,
    ) -> None:
        if self.turn is not None:
            enter_turn(self.turn)
        with self.send:
            if pending is not None:
                resumed = await self._approve(state, pending, approvals or {})
                end = resumed if isinstance(resumed, TurnEnd) else await self._run(resumed)
            else:
                submitted = await self._prompt_hook(state)
                end = submitted if isinstance(submitted, TurnEnd) else await self._run(submitted)
            await self.send.send(end)

    async def _prompt_hook(self, state: State) -> State | TurnEnd:
        """Run the ``user_prompt_submit`` hook on the history's last message (the
        prompt): the turn goes on (with the context it added), or ends
        ``prompt_denied`` without the prompt."""
        hook = self.options.hooks.user_prompt_submit if self.options.hooks else None
        prompt = state.messages[-1] if state.messages else None
        if (
            hook is None
            or not isinstance(prompt, UserMessage)
            or (
                not isinstance(prompt.content, str)
                and any(isinstance(b, ToolResultBlock) for b in prompt.content)
            )
        ):
            return state
        scope = trio.CancelScope()
        with self.control.cancelling(scope), scope:
            try:
                answer = await hook(prompt)
                if answer is not None and not isinstance(answer, Deny | str):  # pyright: ignore[reportUnnecessaryIsInstance]
                    raise TypeError(f"returned a {type(answer).__name__}, not None, Deny or a str")
            except Exception as exc:
                error = HookError("user_prompt_submit", _hook_failure(exc))
                error.__cause__ = exc
                return await self._end(state, TurnEndReason.ERROR, error=error)
            if isinstance(answer, Deny):
                denied = attrs.evolve(state, messages=state.messages[:-1])
                return await self._end(denied, TurnEndReason.PROMPT_DENIED, message=answer.message)
            if answer:
                context = UserMessage(answer)
                await self.send.send(context)
                state = _append(state, context)
            return state
        return await self._end(state, TurnEndReason.ABORTED_STREAMING, self._why_aborted())

    async def _approve(
        self,
        state: State,
        pending: PendingApprovals,
        approvals: Mapping[str, PermissionDecision],
    ) -> State | TurnEnd:
        """Run or answer the deferred calls of the history's last answer, as
        *approvals* say; then the model answers the answer's results (or the turn
        ends again awaiting approval, for the calls *approvals* left out)."""
        answer = state.messages[-1]
        assert isinstance(answer, AssistantMessage)
        attempt = await self.caller.run_approved(state, pending.calls, approvals)
        await self._send_unsent_results(attempt)
        state = attrs.evolve(self._count_subagents(state), context=attempt.context)
        blocks = {r.tool_use_id: r for r in pending.results}
        ran = attempt.results()
        blocks.update((i, r.to_block()) for i, r in ran.items())
        stopped = attempt.aborted or self.control.aborted or self.control.interrupted
        deferred = {i for i, r in ran.items() if r.deferred}
        if deferred and not stopped:
            return await self._await_approval(
                attrs.evolve(state, messages=state.messages[:-1]), answer, blocks, deferred
            )
        results = UserMessage(tuple(blocks[u.id] for u in answer.tool_uses))
        # The answer's final result was checked in the turn that deferred: what it
        # accepted is the output now (its result says so), as in _decide.
        output = self.output
        if stopped or output is None or output.native:
            output = None
        if output is not None:
            results = output.recall(answer, results)
        await self.send.send(results)
        if output is not None:
            before = attrs.evolve(state, messages=state.messages[:-1])
            ended = await self._tool_output(before, answer, results)
            if ended is not None:
                return ended
        state = rec.approved(state, results)
        if stopped:
            why = self._why_aborted(attempt)
            reason = (
                TurnEndReason.PERMISSION_REJECTED
                if why == AbortReason.PERMISSION_REJECTED
                else TurnEndReason.ABORTED_TOOLS
            )
            return await self._end(state, reason, why)
        if rec.exceeds_max_turns(
            state, self.options.max_turns
        ):  # pragma: no cover - max_turns >= 1
            return await self._end(state, TurnEndReason.MAX_TURNS)
        assert state.transition is not None
        await self.send.send(state.transition)
        return state

    async def _await_approval(
        self,
        state: State,
        message: AssistantMessage,
        blocks: Mapping[str, ToolResultBlock],
        deferred: set[str],
    ) -> TurnEnd:
        """End the turn with *message* in the history and its *deferred* calls
        unanswered, waiting for approval; *blocks* holds every call's result."""
        pending = PendingApprovals(
            tuple(u for u in message.tool_uses if u.id in deferred),
            tuple(blocks[u.id] for u in message.tool_uses if u.id not in deferred),
        )
        names = ", ".join(summarize_call(c.name, c.input) for c in pending.calls)
        return await self._end(
            _append(state, message),
            TurnEndReason.AWAITING_APPROVAL,
            message=f"{len(pending.calls)} tool call(s) await approval: {names}",
            pending=pending,
        )

    async def _run(self, state: State) -> TurnEnd:
        last_phase: Phase = "streaming"
        while True:
            if self.control.aborted or self.control.interrupted:
                return await self._end(state, _aborted_reason(last_phase), self._why_aborted())
            budget = self.options.max_budget_usd
            if budget is not None and rec.over_budget(state, budget):
                return await self._end(
                    state, TurnEndReason.BUDGET_EXHAUSTED, message=_budget_message(state, budget)
                )
            attempt = await self.caller.call(state)
            await self._send_unsent_results(attempt)
            state = self._count_subagents(state)
            last_phase = attempt.phase
            if attempt.result is not None:
                answer = attempt.result.message
                state = rec.succeeded(state, self._priced(answer.usage, answer.model, state))
                state = attrs.evolve(state, context=attempt.context)
                self.discarded = None
            else:  # cut short: its input was billed all the same
                start = attempt.start
                usage = self._priced(
                    attempt.start_usage(), start.model if start is not None else "", state
                )
                state = attrs.evolve(state, usage=state.usage + usage)
            if attempt.aborted or (self.control.interrupted and attempt.error is None):
                return await self._end_attempt(state, attempt)
            if attempt.error is not None:
                outcome = await self._recover_error(state, attempt)
            else:
                outcome = await self._decide(state, attempt)
            if isinstance(outcome, TurnEnd):
                return outcome
            state = outcome
            if attempt.result is not None and self._wants_auto_compact(state, attempt):
                compacted = await self._auto_compact(state)
                if isinstance(compacted, TurnEnd):
                    return compacted
                state = compacted
            if rec.exceeds_max_turns(state, self.options.max_turns):
                return await self._end(
                    state,
                    TurnEndReason.MAX_TURNS,
                    message=f"The turn used its {self.options.max_turns} model turns.",
                )
            assert state.transition is not None
            await self.send.send(state.transition)

    def _count_subagents(self, state: State) -> State:
        """*state* with the usage of the subagents' turns that ended since the last
        count (a model call's tools have all ended when it returns)."""
        new = self.subagents[self.counted :]
        if not new:
            return state
        self.counted = len(self.subagents)
        return attrs.evolve(state, usage=sum((run.end.usage for run in new), state.usage))

    def _priced(self, usage: Usage, model: str, state: State) -> Usage:
        """One call's *usage* with its cost, at the price of the *model* that answered
        (the requested one if the answer names none). Once per call, never per token."""
        return attrs.evolve(usage, cost_usd=cost_usd(usage, model or state.model, self.provider))

    async def _decide(self, state: State, attempt: Attempt) -> State | TurnEnd:
        """The next state after a complete answer (already sent unless dropped)."""
        assert attempt.result is not None
        answer = attempt.result.message
        message = rec.merge_paused(state.paused, answer)
        outcome = rec.classify_answer(state, answer)
        if outcome is rec.Outcome.TOOLS:
            ran = attempt.results()
            deferred = {i for i, r in ran.items() if r.deferred}
            if deferred and not (self.control.aborted or self.control.interrupted):
                blocks = {i: r.to_block() for i, r in ran.items()}
                return await self._await_approval(state, message, blocks, deferred)
            results = attempt.results_message(message)
            await self.send.send(results)
            if self.control.aborted or self.control.interrupted:
                # Aborted once the tools were done: the pair is complete, stop here.
                return await self._end(
                    _append(state, message, results),
                    TurnEndReason.ABORTED_TOOLS,
                    self._why_aborted(),
                )
            if self.output is not None and not self.output.native:
                ended = await self._tool_output(state, message, results)
                if ended is not None:
                    return ended
            return rec.after_tools(state, message, results)
        if outcome is rec.Outcome.ESCALATE:
            state = rec.escalate(state)
            await self._discard(attempt, state)
            return state
        if outcome is rec.Outcome.PAUSE:
            return rec.pause(state, message)
        if outcome is rec.Outcome.RECOVER:
            state = rec.recover(state, message)
            await self.send.send(state.messages[-1])
            return state
        if outcome is rec.Outcome.EXHAUSTED:
            return await self._end(
                _append(state, message),
                TurnEndReason.ERROR,
                message="The answer hit max_tokens again after every recovery.",
            )
        value = None
        if self.held is not None:  # accepted before a stop hook blocked; no new call
            (value,) = self.held
        elif self.output is not None:
            checked = await self._answer_output(state, message)
            if not isinstance(checked, tuple):
                return checked
            (value,) = checked
        blocked = await self._stop(state, message, value)
        if blocked is not None:
            return blocked
        if (
            self.output is None
            and self.options.token_budget is not None
            and rec.wants_budget_continuation(
                state, self.options.token_budget, answer.usage.output_tokens
            )
        ):
            state = rec.budget_continue(state, message, self.options.token_budget)
            await self.send.send(state.messages[-1])
            return state
        return await self._end(_append(state, message), TurnEndReason.COMPLETED, output=value)

    # -- the typed output ---------------------------------------------------------

    async def _tool_output(
        self, state: State, message: AssistantMessage, results: UserMessage
    ) -> State | TurnEnd | None:
        """After an answer's tools: the turn's end if its final-result call was
        accepted, a retry (or the end) if it was refused; None without one."""
        assert self.output is not None
        calls = self.output.final_calls(message)
        if not calls:
            return None
        for call in calls:
            if call.id in self.output.accepted:
                value = self.output.accepted[call.id]
                self.held = (value,)
                blocked = await self._stop(state, message, value, results)
                if blocked is not None:
                    return blocked
                return await self._end(
                    _append(state, message, results), TurnEndReason.COMPLETED, output=value
                )
        first = calls[0].id
        reason = self.output.refused.get(first) or _result_text(results, first)
        return await self._refused(state, message, reason, results)

    async def _answer_output(
        self, state: State, message: AssistantMessage
    ) -> tuple[Any] | State | TurnEnd:
        """The typed output of an answer that ends the turn: ``(value,)``, or the
        retry (or the end) its refusal makes."""
        output = self.output
        assert output is not None
        if not output.native:
            return await self._refused(state, message, NO_FINAL_CALL)
        scope = trio.CancelScope()
        with self.control.cancelling(scope), scope:
            try:
                found = await output.from_text(message)
            except Exception as exc:  # a validator that failed (not a refusal)
                return await self._end(_append(state, message), TurnEndReason.ERROR, error=exc)
            if isinstance(found, tuple):
                return found
            return await self._refused(
                state, message, f"{found}\n\nAnswer again with only the JSON of the final result."
            )
        return await self._end(
            _append(state, message), TurnEndReason.ABORTED_TOOLS, self._why_aborted()
        )

    async def _refused(
        self,
        state: State,
        message: AssistantMessage,
        reason: str,
        results: UserMessage | None = None,
    ) -> State | TurnEnd:
        """The typed output of *message* was refused for *reason*: the model is asked
        again (its tool *results* tell it why, else a message), or, past
        ``output_retries``, the turn ends ``output_invalid``."""
        if state.output_attempts >= self.options.output_retries:
            added = (message,) if results is None else (message, results)
            error = OutputValidationError(reason, state.output_attempts + 1)
            return await self._end(
                _append(state, *added), TurnEndReason.OUTPUT_INVALID, error=error
            )
        feedback = None if results is not None else UserMessage(reason)
        state = rec.output_retry(state, message, feedback, results)
        if feedback is not None:
            await self.send.send(feedback)
        return state

    # -- one model call -----------------------------------------------------------

    async def _keep(self, state: State, attempt: Attempt) -> State:
        """*state* with what *attempt* produced before the turn ended: its answer (or
        the finished blocks of a cut one) and a result for each of its tool uses,
        both sent as messages."""
        answer = (
            attempt.result.message if attempt.result is not None else attempt.partial(state.model)
        )
        if answer is None:
            return state
        message = rec.merge_paused(state.paused, answer)
        if not attempt.answer_sent:
            await self.send.send(message)
        added: list[Message] = [message]
        if message.tool_uses:
            results = attempt.results_message(message)
            await self.send.send(results)
            added.append(results)
        return _append(state, *added)

    async def _end_attempt(self, state: State, attempt: Attempt) -> TurnEnd:
        """The turn was aborted, rejected or interrupted during *attempt*: keep what
        the model finished, answer each of its tool uses, and end."""
        why = self._why_aborted(attempt)
        if why == AbortReason.PERMISSION_REJECTED:
            reason = TurnEndReason.PERMISSION_REJECTED
        else:
            reason = _aborted_reason(attempt.phase)
        return await self._end(await self._keep(state, attempt), reason, why)

    async def _send_unsent_results(self, attempt: Attempt) -> None:
        """Send the results of *attempt*'s tools that were cut (abort, error, dropped
        attempt) and so were not sent as they came: every tool_use the turn
        announced gets its :class:`ToolResult` event."""
        for result in attempt.results().values():
            if result.tool_use_id not in attempt.sent:
                await self.send.send(result)
                attempt.sent.add(result.tool_use_id)

    def _why_aborted(self, attempt: Attempt | None = None) -> AbortReason | None:
        if self.control.aborted:
            return self.control.abort_reason
        if attempt is not None and any(
            r.abort_reason is AbortReason.PERMISSION_REJECTED for r in attempt.results().values()
        ):
            return AbortReason.PERMISSION_REJECTED
        if self.control.interrupted:
            return AbortReason.INTERRUPT
        return None  # pragma: no cover - only TurnControl and Reject cancel a turn

    async def _recover_error(self, state: State, attempt: Attempt) -> State | TurnEnd:
        error = attempt.error
        assert error is not None
        if isinstance(error, OverloadedError):
            count = attempt.overloaded_streak(state.consecutive_overloaded)
            next_state = rec.on_overloaded(
                state, self.options.fallback_model, attempt.started_tools(), count
            )
            if next_state is not None:
                await self._discard(attempt, next_state)
                if next_state.model != state.model:
                    notice = ModelFallback(
                        state.model, next_state.model, next_state.dropped_started
                    )
                    await self.send.send(notice)
                    return next_state
                return await self._after_backoff(next_state, self.retry.delay(count - 1))
        elif (
            isinstance(error, PromptTooLongError)
            and self.options.compactor is not None
            and not state.has_attempted_compact
        ):
            return await self._compact(state, error)
        if attempt.delivered and rec.fails_mid_stream(error):
            next_state = rec.retry_call(state, self.retry.max_retries, self.caller.recoverable)
            if next_state is not None:
                await self._discard(attempt, next_state)
                delay = self.retry.delay(state.call_retries, getattr(error, "headers", None))
                return await self._after_backoff(next_state, delay)
        # The error ends the turn: what was received stays (as after an abort); if
        # this attempt showed nothing, what the last discarded one had finished.
        if not attempt.delivered and self.discarded is not None:
            attempt = self.discarded
        return await self._end(await self._keep(state, attempt), TurnEndReason.ERROR, error=error)

    async def _discard(self, attempt: Attempt, next_state: State) -> None:
        """Send the tombstone of an attempt that is dropped and retried, if it showed
        anything."""
        assert next_state.transition is not None
        if attempt.delivered:
            self.discarded = attempt
            await self.send.send(
                AttemptDiscarded(
                    next_state.transition.reason,
                    attempt.model_call,
                    attempt.error,
                    attempt.started_tools(),
                )
            )

    async def _after_backoff(self, state: State, delay: float) -> State | TurnEnd:
        """*state* after sleeping *delay* seconds (the retry's backoff); an abort
        during the sleep ends the turn."""
        scope = trio.CancelScope()
        with self.control.cancelling(scope), scope:
            await trio.sleep(delay)
            return state
        return await self._end(state, TurnEndReason.ABORTED_STREAMING, self._why_aborted())

    def _wants_auto_compact(self, state: State, attempt: Attempt) -> bool:
        assert attempt.result is not None
        assert state.transition is not None
        return (
            self.options.compactor is not None
            and not state.has_attempted_compact
            and rec.may_auto_compact(state)
            and state.paused is None
            and state.transition.reason
            in (
                TransitionReason.NEXT_TURN,
                TransitionReason.MAX_OUTPUT_TOKENS_RECOVERY,
                TransitionReason.STOP_HOOK_BLOCKING,
                TransitionReason.TOKEN_BUDGET_CONTINUATION,
            )
            and rec.needs_auto_compact(
                attempt.result.message.usage,
                self.options.auto_compact,
                rec.model_context_window(state.model, self.options.context_window),
            )
        )

    async def _auto_compact(self, state: State) -> State | TurnEnd:
        """Compact before the next call; a failure is logged and the turn goes on
        with the history as it is (the reactive compaction remains). After
        :data:`~._recovery.MAX_CONSECUTIVE_COMPACT_FAILURES` failures in a row the
        turn stops trying. A ``pre_compact`` hook that fails ends the turn (its
        :class:`HookError`)."""
        assert self.options.compactor is not None
        scope = trio.CancelScope()
        messages: tuple[Message, ...] | None = None
        try:
            with self.control.cancelling(scope), scope:
                messages = await self._run_compactor(state)
        except HookError as exc:
            return await self._end(state, TurnEndReason.ERROR, error=exc)
        except Exception as exc:
            state = rec.compact_failed(state)
            if not rec.may_auto_compact(state):
                logger.warning(
                    "auto-compaction failed %d times in a row, not trying again in this turn: %r",
                    state.consecutive_compact_failures,
                    exc,
                )
            else:
                logger.warning("auto-compaction failed, going on without it: %r", exc)
            return state
        if messages is None:  # aborted: the next iteration ends the turn
            return state
        await self.send.send(Compacted(messages))
        return rec.auto_compacted(state, messages)

    async def _run_compactor(self, state: State) -> tuple[Message, ...]:
        assert self.options.compactor is not None
        hook = self.options.hooks.pre_compact if self.options.hooks else None
        if hook is not None:
            try:
                await hook(state.messages)
            except Exception as exc:
                error = HookError("pre_compact", _hook_failure(exc))
                raise error from exc
        # A user-supplied callable: what it returns is checked like any history.
        return check_compacted(await self.options.compactor(state.messages))

    async def _compact(self, state: State, error: PromptTooLongError) -> State | TurnEnd:
        assert self.options.compactor is not None
        scope = trio.CancelScope()
        with self.control.cancelling(scope), scope:
            try:
                messages = await self._run_compactor(state)
            except Exception as exc:
                # The turn ends with the error that asked for the compaction; the
                # compactor's own failure is attached as its cause.
                error.__cause__ = exc
                error.add_note(f"the compactor failed: {type(exc).__name__}: {exc}")
                return await self._end(state, TurnEndReason.ERROR, error=error)
            await self.send.send(Compacted(messages))
            return rec.compacted(state, messages)
        return await self._end(state, TurnEndReason.ABORTED_STREAMING, self._why_aborted())

    async def _stop(
        self,
        state: State,
        message: AssistantMessage,
        value: Any,
        results: UserMessage | None = None,
    ) -> State | TurnEnd | None:
        """The stop hooks on the end by *message* (and its *results*, when the
        final-result tool ended it): None to end, else the turn going on with the
        hooks' reason, or its end (a hook failed, the turn was aborted, or past
        ``max_stop_hook_blocks``, with the output *value* it had)."""
        hooks = self._stop_hook_list()
        if not hooks:
            return None  # nothing to run: no history to build, no scope to open
        ending = _append(state, message) if results is None else _append(state, message, results)
        blocked = await self._stop_hooks(ending, hooks)
        if blocked is None or isinstance(blocked, TurnEnd):
            return blocked
        if state.stop_hook_blocks >= self.options.max_stop_hook_blocks:
            return await self._end(
                ending,
                TurnEndReason.STOP_HOOK_LIMIT,
                message=(
                    f"The stop hooks blocked the end {state.stop_hook_blocks} times"
                    f" (max_stop_hook_blocks={self.options.max_stop_hook_blocks}); the turn ends."
                ),
                output=value,
            )
        state = rec.stop_hook_block(state, message, blocked, results)
        await self.send.send(state.messages[-1])
        return state

    async def _stop_hooks(
        self, state: State, hooks: list[tuple[str, StopHook]]
    ) -> str | TurnEnd | None:
        """Run the stop *hooks* on the history; the blocking messages joined, or None."""
        blocking: list[str] = []
        scope = trio.CancelScope()
        with self.control.cancelling(scope), scope:
            for name, hook in hooks:
                try:
                    result = await hook(state.messages, stop_hook_active=state.stop_hook_active)
                    if result is not None and not isinstance(result, StopHookResult):  # pyright: ignore[reportUnnecessaryIsInstance]
                        raise TypeError(
                            f"returned a {type(result).__name__}, not a StopHookResult or None"
                        )
                except Exception as exc:
                    error = HookError(name, _hook_failure(exc))
                    error.__cause__ = exc
                    return await self._end(state, TurnEndReason.ERROR, error=error)
                if result is not None and result.block:
                    blocking.append(result.message or _DEFAULT_BLOCK_MESSAGE)
            return "\n\n".join(blocking) if blocking else None
        return await self._end(state, TurnEndReason.ABORTED_TOOLS, self._why_aborted())

    def _stop_hook_list(self) -> list[tuple[str, StopHook]]:
        """The stop hooks of this turn, named: ``hooks.stop`` (for a subagent's turn,
        its parent's ``hooks.subagent_stop``), then the deprecated ``stop_hooks``."""
        found: list[tuple[str, StopHook]] = []
        hooks = self.options.hooks
        if self.subagent_stop is not None:
            found.append(("subagent_stop", self.subagent_stop))
        elif hooks is not None and hooks.stop is not None:
            found.append(("stop", hooks.stop))
        found.extend(("stop", hook) for hook in self.options.stop_hooks)
        return found

    async def _end(
        self,
        state: State,
        reason: TurnEndReason,
        abort_reason: AbortReason | None = None,
        *,
        error: Exception | None = None,
        message: str | None = None,
        pending: PendingApprovals | None = None,
        output: Any = None,
    ) -> TurnEnd:
        """The TurnEnd for *state*; a paused answer still aside joins the history."""
        if state.paused is not None:
            await self.send.send(state.paused)
            state = _append(state, state.paused)
        if error is not None and message is None:
            message = f"{type(error).__name__}: {error}"
        state = self._count_subagents(state)
        return TurnEnd(
            reason=reason,
            usage=state.usage,
            messages=state.messages,
            turns=state.turn_count,
            error=error,
            message=message,
            abort_reason=abort_reason,
            context=state.context,
            pending=pending,
            output=output,
            subagents=tuple(self.subagents),
        )


def check_options(options: object) -> TurnOptions:
    """*options*, or the defaults for None; a TypeError for anything else."""
    if options is None:
        return _DEFAULT_OPTIONS
    if not isinstance(options, TurnOptions):
        raise TypeError(f"options must be a TurnOptions, not {type(options).__name__}")
    return options


_DEFAULT_OPTIONS = TurnOptions()


def check_approvals(
    messages: Sequence[Message],
    pending: PendingApprovals | None,
    approvals: Mapping[str, PermissionDecision] | None,
) -> None:
    """Raise :class:`ApprovalError` unless *approvals* answer calls of *pending*, and
    *pending* is what the last message of *messages* left unanswered."""
    if pending is None:
        if approvals:
            raise ApprovalError("no tool call is awaiting approval")
        return
    if not pending.belongs_to(messages[-1] if messages else None):
        raise ApprovalError(
            "the pending calls and results are not those of the last message's tool uses"
        )
    for key, decision in (approvals or {}).items():
        if key not in pending.ids:
            raise ApprovalError(f"tool call {key!r:.80} is not awaiting approval")
        if not isinstance(decision, Allow | Deny | Reject | Defer):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ApprovalError(
                f"the approval of {key!r:.80} is a {type(decision).__name__},"
                " not Allow, Deny, Reject or Defer"
            )


def _append(state: State, *messages: Message) -> State:
    """*state* with *messages* in the history and no answer kept aside (a paused
    answer is always merged into the message that follows it)."""
    return attrs.evolve(state, messages=(*state.messages, *messages), paused=None)


def _hook_failure(exc: Exception) -> str:
    """How a hook failed, for its HookError (a TypeError of ours says what it returned)."""
    text = str(exc)
    if isinstance(exc, TypeError) and text.startswith("returned "):
        return text
    return f"raised {type(exc).__name__}: {text}" if text else f"raised {type(exc).__name__}"


def _subagent_stop(parent: TurnInfo | None, agent: str | None) -> StopHook | None:
    """A subagent's stop hook: its parent turn's ``hooks.subagent_stop`` for *agent*."""
    options = parent.options if parent is not None else None
    hooks = options.hooks if isinstance(options, TurnOptions) else None
    hook = hooks.subagent_stop if hooks is not None else None
    if hook is None or agent is None:
        return None

    async def stop(messages: tuple[Message, ...], *, stop_hook_active: bool) -> Any:
        return await hook(agent, messages, stop_hook_active=stop_hook_active)

    return stop


def _result_text(results: UserMessage, tool_use_id: str) -> str:
    """The text of *results*' answer to *tool_use_id* (why a final call was refused)."""
    for block in results.content:
        if isinstance(block, ToolResultBlock) and block.tool_use_id == tool_use_id:
            content = block.content
            if isinstance(content, str):
                return content
            return " ".join(getattr(b, "text", "") for b in content)
    return "the final result was not accepted"  # pragma: no cover - every call has its result


def _native_output(client: ModelClient, model: str, mode: str) -> bool:
    """Whether the turn's typed output uses the provider's structured output."""
    if mode == "tool":
        return False
    supports = getattr(client, "supports_output_schema", None)
    if supports is None:
        if mode == "native":
            raise ValueError(
                f"output_mode='native': the client {type(client).__name__} has no structured"
                " output (no supports_output_schema); use output_mode='tool' or 'auto'"
            )
        return False
    return mode == "native" or bool(supports(model))


def _budget_message(state: State, budget: float) -> str:
    cost = state.usage.cost_usd
    if cost is None:
        return (
            f"The cost of a call of this turn is unknown (no price for {state.model!r} in"
            f" genai-prices), so max_budget_usd={budget} cannot be enforced: the turn ends."
        )
    return f"The turn cost ${cost:.4f}, which reaches max_budget_usd={budget}: the turn ends."


def _check_budget(options: TurnOptions, model: str, provider: str | None) -> None:
    """Refuse a budget that cannot be enforced: *model* has no known price."""
    if options.max_budget_usd is not None and cost_usd(Usage(), model, provider) is None:
        where = f" at {provider!r}" if provider is not None else ""
        raise ValueError(
            f"max_budget_usd={options.max_budget_usd} cannot be enforced: genai-prices knows"
            f" no price for the model {model!r}{where}; use a priced model or leave"
            " max_budget_usd unset"
        )


def _aborted_reason(phase: Phase) -> TurnEndReason:
    return TurnEndReason.ABORTED_STREAMING if phase == "streaming" else TurnEndReason.ABORTED_TOOLS


@asynccontextmanager
async def query(
    client: ModelClient,
    messages: Sequence[Message],
    *,
    tools: Sequence[Tool],
    model: str,
    system: Any = None,
    max_tokens: int | None = None,
    options: TurnOptions | None = None,
    control: TurnControl | None = None,
    context: Any = None,
    pending: PendingApprovals | None = None,
    approvals: Mapping[str, PermissionDecision] | None = None,
    output_type: Any = None,
) -> AsyncGenerator[trio.abc.ReceiveChannel[QueryEvent]]:
    """Run one user turn: stream the model, run its tools, recover, until it ends.

    Use it like a ``@trio.as_safe_channel`` function::

        async with query(client, messages, tools=tools, model=m, max_tokens=8192) as events:
            async for event in events:
                ...

    The loop runs in a background task that owns the tools; leaving the ``async
    with`` block early cancels it (the turn then sends no ``TurnEnd``, and the
    messages received so far may end with tool uses whose results never came:
    :func:`~trio_agent.repair_history` answers them, as :class:`~trio_agent.Session`
    does).

    Args:
        client: a :class:`~trio_agent.ModelClient`, e.g. an
            :class:`~trio_agent.AnthropicClient`.
        messages: the history, ending with the user's message; not modified.
        tools: the tools the model may call.
        model: the model to use.
        system: the system prompt (a string or a list of blocks).
        max_tokens: output tokens per call. Left unset, it is 8192 (or the model's
            output cap, if lower) and escalated once on ``max_tokens``, to 64k or
            the model's cap; set, it is kept, and a cut answer goes straight to the
            "continue" recovery.
        options: every other option of the turn (limits, recovery, permissions,
            concurrency, timeouts, caps, compaction, budgets, ``extra_body``): a
            :class:`~trio_agent.TurnOptions`; None: its defaults.
        control: a :class:`~trio_agent.TurnControl` to abort or interrupt the turn.
        context: the tools' shared context (``ctx.context``); what the non-safe
            tools of one model call make of it is what the next call's tools see,
            and :attr:`TurnEnd.context` holds it after the turn.
        pending: the calls a previous turn deferred (its ``TurnEnd.pending``);
            *messages* then ends with their answer. The turn first runs or answers
            them as *approvals* says, then calls the model.
        approvals: ``{tool_use_id: Allow() | Deny(...) | Reject(...) | Defer()}`` for
            the *pending* calls; a pending call left out is deferred again.
        output_type: sets ``options.output_type`` (the turn's typed result, in
            ``TurnEnd.output``).

    Yields:
        A channel of events: :class:`TextDelta`, :class:`ThinkingDelta`,
        :class:`ToolInputDelta`, :class:`BlockFinished`,
        :class:`~trio_agent.AssistantMessage` (complete
        answers, each appended to the history), :class:`ToolResult`,
        :class:`ToolProgress`, :class:`ToolFinished`,
        :class:`~trio_agent.UserMessage` (tool results, "continue" and stop-hook
        messages, each appended to the history), :class:`Compacted`,
        :class:`AttemptDiscarded` (drop what a call showed: it is retried),
        :class:`Stall`, :class:`ModelFallback`, :class:`Transition`, and a last
        :class:`TurnEnd`.

    Raises:
        TypeError: an unknown keyword; *options* is not a ``TurnOptions``;
            ``max_tokens`` is not an int.
        ValueError: ``max_tokens`` < 1; ``options.max_budget_usd`` is set but *model*
            has no known price (the budget could not be enforced).
        ApprovalError: *approvals* without *pending*, for a call that is not
            pending, or not a permission decision; *pending* calls that are not
            the unanswered tool uses of the last message.

    Warns:
        ModelDeprecationWarning: *model* (or ``options.fallback_model``) is deprecated
            or retired; once per model per process, before the first request.
    """
    options = check_options(options)
    if output_type is not None:
        options = attrs.evolve(options, output_type=output_type)
    check_max_tokens(max_tokens)
    check_approvals(messages, pending, approvals)
    provider = price_provider(client)
    _check_budget(options, model, provider)
    for name in (model, options.fallback_model):
        if name is not None:
            check_model(name, provider)
    outbox, receive = open_turn_channel()
    control = control if control is not None else TurnControl()
    spec = output_spec(options.output_type)
    output = None
    call_options = options
    if spec is not None:
        native = _native_output(client, model, options.output_mode)
        output = OutputTurn(spec, options.output_validators, native)
        if not native:
            final = output.tool()
            tools = (*tools, final)
            call_options = output.exempt(options, final)
    caller = ModelCaller(
        client=client,
        tools=tuple(tools),
        system=system,
        options=call_options,
        control=control,
        send=outbox,
        output=output,
    )
    retry = options.retry
    if retry is None:
        # caller.recoverable is the isinstance() check, done once.
        retry = cast(RecoverableModelClient, client).retry if caller.recoverable else RetryPolicy()
    loop = _Loop(
        caller=caller,
        options=options,
        control=control,
        send=outbox,
        retry=retry,
        provider=provider,
        output=output,
    )
    parent = current_turn()
    loop.turn = TurnInfo(
        client,
        model,
        options,
        depth=0 if parent is None else parent.depth + 1,
        agent=next_agent(),
        on_subagent=loop.subagents.append,
    )
    loop.subagent_stop = _subagent_stop(parent, loop.turn.agent)
    state = rec.initial_state(
        messages,
        model,
        max_tokens=max_tokens,
        output_token_cap=options.output_token_cap,
        context=context,
    )
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(loop.run, state, pending, approvals)
            try:
                yield receive
            finally:
                # Cancel the loop before closing its channel: a send in flight is
                # then cancelled (abort semantics), never a BrokenResourceError.
                nursery.cancel_scope.cancel(reason="left the query() block")
                receive.close()
    except BaseExceptionGroup as group:
        # The nurseries are an implementation detail: one error (the loop's or the
        # consumer's), however deeply nested, is raised as itself.
        leaf = unwrap_single(group)
        if leaf is None:
            raise
        raise leaf from None
