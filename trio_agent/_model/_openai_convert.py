"""Canonical history and tools out to OpenAI: the request body of one stream (pure).

The history stays canonical (Anthropic-shaped) everywhere else; this module is the
one place it becomes OpenAI's, for either API:

========================  ====================================  ===============================
canonical                 Responses API (``input`` items)       Chat Completions (``messages``)
========================  ====================================  ===============================
system prompt             ``instructions``                      a ``system`` message first
user text                 a ``user`` message                    a ``user`` message
``TextBlock`` (answer)    an ``assistant`` message              ``assistant.content``
``ToolUseBlock``          a ``function_call`` item              ``assistant.tool_calls[]``
``ToolResultBlock``       a ``function_call_output`` item       a ``role: tool`` message
``OpaqueBlock`` (an       the item, verbatim (reasoning         dropped (Chat has no place
OpenAI output item)       round-trips)                          for it)
``ThinkingBlock``,        dropped: their signatures only        dropped
``RedactedThinkingBlock`` mean something to Anthropic
========================  ====================================  ===============================

Anything else (an image, a server tool use, an unknown block) cannot be said in
OpenAI's terms: :class:`InvalidRequestError` says so before any request is sent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeAlias

from .._exceptions import InvalidRequestError
from .._messages import (
    AssistantMessage,
    OpaqueBlock,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
    _plain,  # pyright: ignore[reportPrivateUsage]
    message_from_api,
)
from .._tools import Tool

__all__ = ["OpenAIAPI", "chat_body", "responses_body"]

OpenAIAPI: TypeAlias = Literal["responses", "chat"]
MessageLike: TypeAlias = UserMessage | AssistantMessage | Mapping[str, Any]
ToolLike: TypeAlias = Tool | Mapping[str, Any]
SystemLike: TypeAlias = str | Sequence[Mapping[str, Any]] | None

#: Blocks whose meaning is bound to Anthropic (signed thinking): never sent to OpenAI.
_DROPPED = (ThinkingBlock, RedactedThinkingBlock)


def _refuse(what: str, api: OpenAIAPI) -> InvalidRequestError:
    name = "Responses" if api == "responses" else "Chat Completions"
    return InvalidRequestError(
        f"{what} cannot be sent to the OpenAI {name} API", status_code=None, error_type=None
    )


def _message(value: Any) -> UserMessage | AssistantMessage:
    if isinstance(value, UserMessage | AssistantMessage):
        return value
    if isinstance(value, Mapping):
        return message_from_api(value)
    raise TypeError(f"a message must be a UserMessage, AssistantMessage or dict, not {value!r}")


def _system_text(system: SystemLike, api: OpenAIAPI) -> str | None:
    if system is None or isinstance(system, str):
        return system
    parts: list[str] = []
    for block in system:
        if block.get("type") != "text" or not isinstance(block.get("text"), str):
            raise _refuse(f"a system block of type {block.get('type')!r}", api)
        parts.append(block["text"])
    return "\n\n".join(parts)


def _result_text(block: ToolResultBlock, api: OpenAIAPI) -> str:
    if isinstance(block.content, str):
        return block.content
    parts: list[str] = []
    for part in block.content:
        if not isinstance(part, TextBlock):
            raise _refuse(f"a tool result holding a {part.type!r} block", api)
        parts.append(part.text)
    return "\n".join(parts)


def _arguments(block: ToolUseBlock) -> str:
    # An invalid input is sent back as the model wrote it: that is what it said.
    if block.invalid_input is not None:
        return block.invalid_input
    return json.dumps(_plain(block.input), ensure_ascii=False, separators=(",", ":"))


def _tool_schema(tool: ToolLike) -> tuple[str, str | None, Any] | None:
    """(name, description, parameters) of a canonical tool; None for an OpenAI-shaped
    dict (one with a ``type`` and no ``input_schema``), which is sent verbatim."""
    if isinstance(tool, Tool):
        return tool.name, tool.description, dict(tool.input_schema)
    if isinstance(tool, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
        if "input_schema" not in tool and "type" in tool:
            return None
        return tool["name"], tool.get("description"), _plain(tool.get("input_schema", {}))
    raise TypeError(f"a tool must be a Tool or dict, not {tool!r}")


# -- Responses API -----------------------------------------------------------------------


def _user_items(message: UserMessage) -> list[dict[str, Any]]:
    if isinstance(message.content, str):
        return [{"role": "user", "content": message.content}]
    items: list[dict[str, Any]] = []
    texts: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, ToolResultBlock):
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": block.tool_use_id,
                    "output": _result_text(block, "responses"),
                }
            )
        elif isinstance(block, TextBlock):
            texts.append({"type": "input_text", "text": block.text})
        else:
            raise _refuse(f"a user {block.type!r} block", "responses")
    if texts:  # after the outputs: they answer the previous assistant message
        items.append({"role": "user", "content": texts})
    return items


def _assistant_items(message: AssistantMessage) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            items.append({"role": "assistant", "content": block.text})
        elif isinstance(block, ToolUseBlock):
            items.append(
                {
                    "type": "function_call",
                    "call_id": block.id,
                    "name": block.name,
                    "arguments": _arguments(block),
                }
            )
        elif isinstance(block, OpaqueBlock):
            items.append(block.to_api())
        elif not isinstance(block, _DROPPED):
            raise _refuse(f"an assistant {block.type!r} block", "responses")
    return items


def _responses_tool(tool: ToolLike) -> dict[str, Any]:
    schema = _tool_schema(tool)
    if schema is None:
        return _plain(tool)
    name, description, parameters = schema
    # strict defaults to true in the Responses API, which rejects most schemas.
    out: dict[str, Any] = {"type": "function", "name": name, "parameters": parameters}
    if description:
        out["description"] = description
    out["strict"] = False
    return out


def responses_body(
    *,
    model: str,
    messages: Sequence[MessageLike],
    max_tokens: int,
    system: SystemLike = None,
    tools: Sequence[ToolLike] | None = None,
    **params: Any,
) -> dict[str, Any]:
    """The JSON body of a streaming ``POST /responses`` for a canonical request."""
    items: list[dict[str, Any]] = []
    for value in messages:
        message = _message(value)
        if isinstance(message, UserMessage):
            items.extend(_user_items(message))
        else:
            items.extend(_assistant_items(message))
    body: dict[str, Any] = {"model": model, "input": items, "max_output_tokens": max_tokens}
    instructions = _system_text(system, "responses")
    if instructions is not None:
        body["instructions"] = instructions
    if tools:
        body["tools"] = [_responses_tool(t) for t in tools]
    body.update(params)
    body["stream"] = True
    return body


# -- Chat Completions --------------------------------------------------------------------


def _user_messages(message: UserMessage) -> list[dict[str, Any]]:
    if isinstance(message.content, str):
        return [{"role": "user", "content": message.content}]
    out: list[dict[str, Any]] = []
    texts: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, ToolResultBlock):
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": block.tool_use_id,
                    "content": _result_text(block, "chat"),
                }
            )
        elif isinstance(block, TextBlock):
            texts.append({"type": "text", "text": block.text})
        else:
            raise _refuse(f"a user {block.type!r} block", "chat")
    if texts:  # tool messages must directly follow the assistant's tool_calls
        out.append({"role": "user", "content": texts})
    return out


def _assistant_message(message: AssistantMessage) -> dict[str, Any] | None:
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            texts.append(block.text)
        elif isinstance(block, ToolUseBlock):
            calls.append(
                {
                    "id": block.id,
                    "type": "function",
                    "function": {"name": block.name, "arguments": _arguments(block)},
                }
            )
        elif not isinstance(block, (*_DROPPED, OpaqueBlock)):
            raise _refuse(f"an assistant {block.type!r} block", "chat")
    if not texts and not calls:
        return None  # e.g. only reasoning: Chat has nothing to say for it
    out: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    if calls:
        out["tool_calls"] = calls
    return out


def _chat_tool(tool: ToolLike) -> dict[str, Any]:
    schema = _tool_schema(tool)
    if schema is None:
        return _plain(tool)
    name, description, parameters = schema
    function: dict[str, Any] = {"name": name, "parameters": parameters}
    if description:
        function["description"] = description
    return {"type": "function", "function": function}


def chat_body(
    *,
    model: str,
    messages: Sequence[MessageLike],
    max_tokens: int,
    system: SystemLike = None,
    tools: Sequence[ToolLike] | None = None,
    max_tokens_field: str = "max_completion_tokens",
    **params: Any,
) -> dict[str, Any]:
    """The JSON body of a streaming ``POST /chat/completions`` for a canonical request
    (usage is asked for: ``stream_options.include_usage``)."""
    out: list[dict[str, Any]] = []
    system_text = _system_text(system, "chat")
    if system_text is not None:
        out.append({"role": "system", "content": system_text})
    for value in messages:
        message = _message(value)
        if isinstance(message, UserMessage):
            out.extend(_user_messages(message))
        elif (assistant := _assistant_message(message)) is not None:
            out.append(assistant)
    body: dict[str, Any] = {"model": model, "messages": out, max_tokens_field: max_tokens}
    if tools:
        body["tools"] = [_chat_tool(t) for t in tools]
    body.update(params)
    body["stream"] = True
    options = body.get("stream_options")
    body["stream_options"] = {
        **(options if isinstance(options, Mapping) else {}),
        "include_usage": True,
    }
    return body
