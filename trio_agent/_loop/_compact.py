"""The built-in compactor: the model itself summarises the earlier history.

:func:`summarizing_compactor` returns a :data:`~trio_agent.Compactor` for ``query()``
and ``Session``: it keeps the last messages from an assistant message on (so every
tool_use stays with its tool_result, and the history still alternates), and replaces
everything before with one user message holding the model's summary of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

from .._exceptions import CompactionError
from .._messages import (
    AssistantMessage,
    ContentBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    UserMessage,
)
from .._model import ModelClient, StreamResult
from .._options import Compactor

__all__ = ["check_compacted", "split_for_compaction", "summarizing_compactor"]

SUMMARY_PROMPT = (
    "Summarise the conversation so far for yourself, to continue the work from the summary "
    "alone: the user's requests, what was done (files, commands, results), decisions, open "
    "problems and the next steps. Be complete but concise; answer with the summary only."
)
SUMMARY_PREFIX = "This conversation was compacted. Summary of the earlier part:\n\n"


def check_compacted(messages: object) -> tuple[Message, ...]:
    """What a compactor returned, as the history the turn goes on with, if the API
    would take it: messages only, not empty, starting with a user message and ending
    with one (the next request answers it), every tool_use answered by the next
    message and every tool_result answering a tool_use of the message before.

    Raises:
        CompactionError: it would not be a valid history; nothing is kept or sent.
    """
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Iterable):
        raise CompactionError(
            f"the compactor returned a {type(messages).__name__}, not a list of messages"
        )
    history = tuple(cast("Iterable[object]", messages))
    for message in history:
        if not isinstance(message, AssistantMessage | UserMessage):
            raise CompactionError(
                f"the compactor returned a {type(message).__name__},"
                " not an AssistantMessage or UserMessage"
            )
    checked = cast("tuple[Message, ...]", history)
    if not checked:
        raise CompactionError("the compactor returned an empty history")
    if not isinstance(checked[0], UserMessage):
        raise CompactionError("the compacted history starts with an assistant message")
    if not isinstance(checked[-1], UserMessage):
        raise CompactionError("the compacted history does not end with a user message")
    asked: set[str] = set()
    seen: set[str] = set()
    for message in checked:
        if isinstance(message, AssistantMessage):
            if asked:
                raise CompactionError(f"tool_use {sorted(asked)[0]!r} has no tool_result")
            asked = {u.id for u in message.tool_uses}
            if len(asked) < len(message.tool_uses) or asked & seen:
                raise CompactionError("the compacted history uses a tool_use id twice")
            seen |= asked
            continue
        results = message.tool_results
        answered = {r.tool_use_id for r in results}
        if len(answered) < len(results):
            raise CompactionError("the compacted history answers a tool_use twice")
        first = () if isinstance(message.content, str) else message.content[: len(results)]
        if any(not isinstance(b, ToolResultBlock) for b in first):
            raise CompactionError("tool results must come before the other content")
        if answered - asked:
            raise CompactionError(
                f"tool_result {sorted(answered - asked)[0]!r} answers no tool_use before it"
            )
        if asked - answered:
            raise CompactionError(f"tool_use {sorted(asked - answered)[0]!r} has no tool_result")
        asked = set()
    return checked


def split_for_compaction(
    messages: Sequence[Message], keep_last: int
) -> tuple[tuple[Message, ...], tuple[Message, ...]]:
    """*messages* as (earlier, kept): *kept* starts at the first assistant message
    among the last *keep_last* messages (or the last assistant message, if none is
    among them), so no tool_use is parted from its tool_result.

    Raises:
        CompactionError: no assistant message after the first message.
    """
    starts = [
        i
        for i, m in enumerate(messages)
        if i > 0 and isinstance(m, AssistantMessage) and isinstance(messages[i - 1], UserMessage)
    ]
    if not starts:
        raise CompactionError("nothing to compact: no assistant message after the first message")
    tail = [i for i in starts if i >= len(messages) - keep_last]
    cut = tail[0] if tail else starts[-1]
    return tuple(messages[:cut]), tuple(messages[cut:])


def _blocks(message: UserMessage) -> tuple[ContentBlock, ...]:
    if isinstance(message.content, str):
        return (TextBlock(message.content),)
    return message.content


def summarizing_compactor(
    client: ModelClient,
    *,
    model: str,
    max_tokens: int = 8192,
    keep_last: int = 4,
    system: Any = None,
) -> Compactor:
    """A compactor that asks *model* (through *client*) to summarise the history
    before the last *keep_last* messages.

    Example::

        compactor = summarizing_compactor(client, model="claude-haiku-4-5")
        options = TurnOptions(compactor=compactor, auto_compact=0.8)
        async with query(client, history, tools=tools, model=m, options=options) as events:
            ...

    The summary call streams without tools; its failure (an API error, or an empty
    summary: :class:`CompactionError`) is the compactor's failure, which ``query``
    attaches to the error that asked for the compaction.
    """
    if keep_last < 1:
        raise ValueError(f"keep_last must be at least 1, not {keep_last}")
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be at least 1, not {max_tokens}")

    async def compact(messages: tuple[Message, ...]) -> list[Message]:
        earlier, kept = split_for_compaction(messages, keep_last)
        last = earlier[-1]
        # The request must end with one user message: the instruction joins the last.
        if isinstance(last, UserMessage):
            ask = UserMessage((*_blocks(last), TextBlock(SUMMARY_PROMPT)))
            request = [*earlier[:-1], ask]
        else:  # pragma: no cover - split_for_compaction cuts after a user message
            request = [*earlier, UserMessage(SUMMARY_PROMPT)]
        result: StreamResult | None = None
        async with client.stream(
            model=model, messages=request, max_tokens=max_tokens, system=system
        ) as items:
            async for item in items:
                if isinstance(item, StreamResult):
                    result = item
        summary = result.message.text.strip() if result is not None else ""
        if not summary:
            raise CompactionError("the summary call gave no text")
        return [UserMessage(SUMMARY_PREFIX + summary), *kept]

    return compact
