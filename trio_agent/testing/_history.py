"""check_history: is a conversation history one the Messages API accepts?"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from .._messages import AssistantMessage, Message, ToolResultBlock, UserMessage
from ._trace import InvariantViolation


@attrs.define
class HistoryStatistics:
    """Counts over every :func:`check_history` of this process (for reports)."""

    histories: int = 0
    tool_uses: int = 0
    unpaired: int = 0


#: Totals of every history check run in this process.
STATISTICS = HistoryStatistics()


def _turns(messages: Sequence[Message]) -> list[tuple[int, list[Message]]]:
    """Runs of consecutive messages of one role (the API joins each run into one turn),
    with the index of each run's first message."""
    turns: list[tuple[int, list[Message]]] = []
    for i, message in enumerate(messages):
        if turns and turns[-1][1][0].role == message.role:
            turns[-1][1].append(message)
        else:
            turns.append((i, [message]))
    return turns


def _problems(messages: Sequence[Message], strict: bool) -> tuple[list[str], list[str]]:
    """(problems, unpaired tool_use/tool_result ids) of a history."""
    problems: list[str] = []
    unpaired: list[str] = []
    seen: set[str] = set()
    asked: list[str] = []  # the tool_use ids of the assistant turn just before
    turns = _turns(messages)
    if turns and turns[0][1][0].role == "assistant":
        problems.append("the history starts with an assistant message")
    for at, turn in turns:
        if isinstance(turn[0], AssistantMessage):
            if strict and len(turn) > 1:
                problems.append(
                    f"messages {at}..{at + len(turn) - 1} are assistant messages in a row"
                )
            asked = [u.id for m in turn if isinstance(m, AssistantMessage) for u in m.tool_uses]
            for tid in asked:
                if tid in seen:
                    problems.append(f"tool_use id {tid!r} is used twice")
                seen.add(tid)
            continue
        # the joined turn's content, a plain-text message counting as one text block
        kinds = [
            isinstance(b, ToolResultBlock)
            for m in turn
            for b in ((None,) if isinstance(m.content, str) else m.content)
        ]
        answered = [
            r.tool_use_id for m in turn if isinstance(m, UserMessage) for r in m.tool_results
        ]
        missing = [tid for tid in asked if answered.count(tid) != 1]
        stray = [tid for tid in answered if tid not in asked]
        if missing or stray:
            problems.append(f"message {at} answers {answered}, the tool uses before it are {asked}")
            unpaired.extend(missing + stray)
        elif strict and answered != asked:
            problems.append(f"message {at} answers {answered} out of the order {asked}")
        if kinds != sorted(kinds, reverse=True):
            problems.append(f"message {at} has content before its tool results")
        asked = []
    if asked:
        problems.append(f"the history ends with unanswered tool uses {asked}")
        unpaired.extend(asked)
    return problems, unpaired


def check_history(messages: Sequence[Message], *, strict: bool = False) -> None:
    """Raise :class:`InvariantViolation` unless the Messages API accepts ``messages``.

    The API joins consecutive messages of one role into one turn; a valid history
    starts with a user turn, never reuses a tool_use id, and answers every tool_use of
    an assistant turn with exactly one tool_result in the very next (user) turn, whose
    tool results come before any other content and answer nothing else.

    With ``strict=True`` the history must also be the way trio_agent's own loop writes
    it: one assistant message per model call (never two in a row), and the results in
    the order of the tool uses.

    Example::

        async with session.turn("fix the tests") as events:
            async for _ in events:
                ...
        check_history(session.messages)

    Every call is counted in ``trio_agent.testing._history.STATISTICS``.
    """
    problems, unpaired = _problems(messages, strict)
    STATISTICS.histories += 1
    STATISTICS.tool_uses += sum(
        len(m.tool_uses) for m in messages if isinstance(m, AssistantMessage)
    )
    STATISTICS.unpaired += len(unpaired)
    if problems:
        raise InvariantViolation("; ".join(problems) + f" in {list(messages)!r}")
