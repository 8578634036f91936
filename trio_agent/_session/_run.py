"""One call that returns or raises: :func:`run` and :class:`RunResult`.

``await trio_agent.run(client, prompt, ...)`` (and ``await session.run(prompt)``)
runs one whole turn and gives back its :class:`RunResult`; a turn that ended with
an error (``TurnEnd.error``: ``AuthenticationError``, ``OverloadedError``, an
invalid typed output past its retries...) raises that error instead. A turn that
ended any other way (completed, aborted, awaiting approval, a limit) is returned:
its ``reason`` says how. The streaming ``query()`` / ``Session.submit()`` stay for
programs that show the turn as it happens.

Example::

    result = await trio_agent.run(client, "Name three primes", model=model)
    print(result.text, result.usage.cost_usd)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from .._loop import QueryEvent, TurnControl, TurnEnd, TurnEndReason, query
from .._messages import AssistantMessage, ContentBlock, Message, Usage, UserMessage
from .._model import ModelClient
from .._models import DEFAULT_MODEL
from .._options import TurnOptions
from .._tools import Tool

__all__ = ["RunResult", "RunWatch", "run", "with_output_type"]


@attrs.frozen
class RunResult:
    """What one turn gave back (see :func:`run`).

    Attributes:
        end: the turn's :class:`~trio_agent.TurnEnd` (its reason, whole history,
            pending approvals, context...).
        new_messages: the messages this turn added to the history, the prompt
            first (a compaction's replacement history is not among them).
    """

    end: TurnEnd
    new_messages: tuple[Message, ...]

    @property
    def text(self) -> str:
        """The text of the turn's last answer ("" when it had none)."""
        for message in reversed(self.new_messages):
            if isinstance(message, AssistantMessage):
                return message.text
        return ""

    @property
    def output(self) -> Any:
        """The validated typed output (``TurnOptions.output_type``), or None."""
        return self.end.output

    @property
    def reason(self) -> TurnEndReason:
        """Why the turn ended."""
        return self.end.reason

    @property
    def usage(self) -> Usage:
        """The usage of every model call of the turn, with its ``cost_usd``."""
        return self.end.usage

    @property
    def cost_usd(self) -> float | None:
        """The turn's cost in USD (None when a call's price is unknown)."""
        return self.end.usage.cost_usd

    @property
    def messages(self) -> tuple[Message, ...]:
        """The whole history after the turn (``end.messages``)."""
        return self.end.messages


@attrs.define(eq=False)
class RunWatch:
    """Collects what :class:`RunResult` needs from a turn's events."""

    added: list[Message] = attrs.field(factory=list[Message])
    end: TurnEnd | None = None

    def see(self, event: QueryEvent) -> None:
        if isinstance(event, AssistantMessage | UserMessage):
            self.added.append(event)
        elif isinstance(event, TurnEnd):
            self.end = event

    def result(self) -> RunResult:
        """The turn's result, or its error raised."""
        end = self.end
        if end is None:  # pragma: no cover - query() always ends with a TurnEnd
            raise RuntimeError("the turn ended without a TurnEnd")
        if end.error is not None:
            raise end.error
        if end.reason is TurnEndReason.PROMPT_DENIED:
            return RunResult(end, ())  # the prompt is not in the history
        return RunResult(end, tuple(self.added))


def with_output_type(options: TurnOptions, output_type: Any) -> TurnOptions:
    """*options* with ``output_type`` set, when the keyword was given."""
    if output_type is None:
        return options
    return attrs.evolve(options, output_type=output_type)


async def run(
    client: ModelClient,
    prompt: str | Sequence[ContentBlock],
    *,
    tools: Sequence[Tool] = (),
    model: str = DEFAULT_MODEL,
    system: Any = None,
    max_tokens: int | None = None,
    options: TurnOptions | None = None,
    output_type: Any = None,
    messages: Sequence[Message] = (),
    control: TurnControl | None = None,
    context: Any = None,
) -> RunResult:
    """Run one turn of *prompt* (after *messages*) and return its result.

    The arguments are :func:`trio_agent.query`'s; *output_type* sets
    ``options.output_type`` (the typed result, in ``RunResult.output``).

    Raises:
        TrioAgentError: the error that ended the turn (``TurnEnd.error``):
            ``AuthenticationError``, ``RateLimitError``, ``OverloadedError``,
            ``OutputValidationError``...; a turn that ended another way (aborted,
            awaiting approval, a limit) is returned, its ``reason`` saying how.
        TypeError, ValueError: bad arguments (as ``query`` raises them).
    """
    base = options if options is not None else TurnOptions()
    options = with_output_type(base, output_type)
    message = UserMessage(prompt if isinstance(prompt, str) else tuple(prompt))
    watch = RunWatch(added=[message])
    async with query(
        client,
        (*messages, message),
        tools=tools,
        model=model,
        system=system,
        max_tokens=max_tokens,
        options=options,
        control=control,
        context=context,
    ) as events:
        async for event in events:
            watch.see(event)
    return watch.result()
