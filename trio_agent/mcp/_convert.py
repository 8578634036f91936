"""MCP values as trio_agent values: tool names, annotations, call results.

Pure and synchronous; everything here reads the MCP wire JSON (camelCase keys),
not the SDK's model classes.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any, cast

import attrs

from .._messages import ContentBlock, OpaqueBlock, TextBlock
from .._options import DEFAULT_MAX_RESULT_CHARS
from .._tools import ToolOutput

__all__ = [
    "DEFAULT_MAX_RESULT_CHARS",
    "MCPToolInfo",
    "input_schema",
    "mcp_tool_name",
    "tool_info",
    "tool_output",
]

#: Longest tool name the Messages API accepts.
MAX_NAME = 64

_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")
_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})


def mcp_tool_name(server: str, tool: str) -> str:
    """``mcp__<server>__<tool>`` with every character the Messages API refuses made ``_``.

    A name longer than the API allows is cut and given a hash of the full name, so
    two long names stay apart.
    """
    name = _UNSAFE.sub("_", f"mcp__{server}__{tool}")
    if len(name) <= MAX_NAME:
        return name
    # surrogatepass: a name that is not valid Unicode still hashes (never raises).
    digest = hashlib.sha256(f"{server}\0{tool}".encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{name[: MAX_NAME - 9]}_{digest}"


@attrs.frozen
class MCPToolInfo:
    """What the MCP server said about one tool (``mcp_tool_info(tool)`` returns it).

    The hints are the server's ``annotations``; ``None`` means the server did not say.
    Permission rules can use them, e.g. ask before any ``destructive`` tool.
    """

    server: str
    #: The tool's name on its server (the trio_agent name is ``mcp__<server>__<tool>``).
    tool: str
    title: str | None = None
    read_only: bool | None = None
    destructive: bool | None = None
    idempotent: bool | None = None
    open_world: bool | None = None

    @property
    def is_destructive(self) -> bool:
        """The MCP default: a tool that is not read-only may be destructive."""
        if self.read_only:
            return False
        return self.destructive is not False


def _hint(annotations: Mapping[str, Any], key: str) -> bool | None:
    value = annotations.get(key)
    return value if isinstance(value, bool) else None


def tool_info(server: str, listed: Mapping[str, Any]) -> MCPToolInfo:
    """The :class:`MCPToolInfo` of one ``tools/list`` entry."""
    raw = listed.get("annotations")
    annotations: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}  # pyright: ignore[reportUnknownVariableType]
    title = listed.get("title", annotations.get("title"))
    return MCPToolInfo(
        server=server,
        tool=str(listed["name"]),
        title=title if isinstance(title, str) else None,
        read_only=_hint(annotations, "readOnlyHint"),
        destructive=_hint(annotations, "destructiveHint"),
        idempotent=_hint(annotations, "idempotentHint"),
        open_world=_hint(annotations, "openWorldHint"),
    )


def input_schema(listed: Mapping[str, Any]) -> dict[str, Any]:
    """The tool's ``inputSchema`` as given (an object schema if it gave none)."""
    schema = listed.get("inputSchema")
    if not isinstance(schema, Mapping):
        return {"type": "object"}
    return dict(schema)


def _block(item: Any) -> ContentBlock | str:
    """One MCP content item as a content block, or as text when the API has no match."""
    if not isinstance(item, Mapping):
        return json.dumps(item)
    item = cast("dict[str, Any]", dict(item))
    kind = item.get("type")
    if kind == "text":
        return str(item.get("text", ""))
    if kind == "image" and item.get("mimeType") in _IMAGE_TYPES:
        source = {"type": "base64", "media_type": item["mimeType"], "data": item.get("data", "")}
        return OpaqueBlock({"type": "image", "source": source})
    if kind == "resource":
        resource: Any = item.get("resource")
        if isinstance(resource, Mapping) and isinstance(resource.get("text"), str):
            return str(resource["text"])
        uri = resource.get("uri") if isinstance(resource, Mapping) else None  # pyright: ignore[reportUnknownVariableType]
        return f"[binary resource {uri}]"
    if kind == "resource_link":
        return f"[resource {item.get('name', '')}: {item.get('uri', '')}]"
    return f"[{kind} content not shown]"


def _cap(blocks: list[ContentBlock], limit: int) -> list[ContentBlock]:
    """The blocks with their text cut to *limit* characters in all, saying so."""
    total = sum(len(b.text) for b in blocks if isinstance(b, TextBlock))
    if total <= limit:
        return blocks
    out: list[ContentBlock] = []
    left = limit
    for block in blocks:
        if isinstance(block, TextBlock):
            if left <= 0:
                continue
            block = TextBlock(block.text[:left])
            left -= len(block.text)
        out.append(block)
    out.append(TextBlock(f"[output truncated: {total - limit} of {total} characters dropped]"))
    return out


def tool_output(
    result: Mapping[str, Any], *, max_chars: int = DEFAULT_MAX_RESULT_CHARS
) -> ToolOutput:
    """A ``tools/call`` result as a :class:`~trio_agent.ToolOutput`.

    Text stays text (several text items are joined with a newline, as the SDK keeps
    them apart), images become image blocks, ``isError`` becomes ``is_error``;
    structured content is shown as JSON when there is no other content. The text is
    capped at *max_chars* characters.
    """
    raw: Any = result.get("content")
    items: list[Any] = list(raw) if isinstance(raw, list) else []
    blocks: list[ContentBlock] = []
    for item in items:
        block = _block(item)
        blocks.append(TextBlock(block) if isinstance(block, str) else block)
    if not blocks and result.get("structuredContent") is not None:
        blocks.append(TextBlock(json.dumps(result["structuredContent"])))
    blocks = _cap(blocks, max_chars)
    is_error = result.get("isError") is True
    if all(isinstance(b, TextBlock) for b in blocks):
        # One item per line: run together, "a" and "b" would read as "ab".
        text = "\n".join(b.text for b in blocks if isinstance(b, TextBlock))
        return ToolOutput(text, is_error=is_error)
    return ToolOutput(blocks, is_error=is_error)
