"""Wire values: frozen mirrors of the Messages API JSON.

Every value has ``from_api(data)`` (the API's JSON, as a dict) and ``to_api()`` (the
same JSON back). Block types this library does not know are kept as an
:class:`OpaqueBlock` and round-trip unchanged, never dropped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, ClassVar, Literal, TypeAlias, cast

import attrs

from ._exceptions import StreamProtocolError, excerpt

__all__ = [
    "AssistantMessage",
    "ContentBlock",
    "Message",
    "OpaqueBlock",
    "RedactedThinkingBlock",
    "ServerToolUseBlock",
    "TextBlock",
    "ThinkingBlock",
    "ToolResultBlock",
    "ToolUseBlock",
    "Usage",
    "UserMessage",
    "block_from_api",
    "json_depth",
    "message_from_api",
]

JSON: TypeAlias = Any
_EMPTY: Mapping[str, Any] = MappingProxyType({})


def _frozen_mapping(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    if not value:
        return _EMPTY
    return MappingProxyType(dict(value))


def _what(data: Mapping[str, Any]) -> str:
    kind = data.get("type")
    return kind if isinstance(kind, str) else "value"


def _wrong(data: Mapping[str, Any], key: str, expected: str) -> StreamProtocolError:
    return StreamProtocolError(
        f"{_what(data)} {key} must be {expected}, not "
        f"{type(data.get(key)).__name__} (wrong type): {excerpt(repr(data))}"
    )


def _require(data: Mapping[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    try:
        value = data[key]
    except KeyError:
        raise StreamProtocolError(
            f"{_what(data)} is missing {key!r}: {excerpt(repr(data))}"
        ) from None
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        name = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise _wrong(data, key, f"a {name}")
    return value


def _optional(data: Mapping[str, Any], key: str, kind: type) -> Any:
    """``data[key]`` when it is a *kind*; None when absent or null; else an error."""
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise _wrong(data, key, f"a {kind.__name__} or null")
    return value


def _mappings(data: Mapping[str, Any], key: str) -> list[Mapping[str, Any]] | None:
    """``data[key]`` as a list of objects (citations...); None when absent or null."""
    value = _optional(data, key, list)
    if value is None:
        return None
    items: list[Any] = value
    if not all(isinstance(item, Mapping) for item in items):
        raise _wrong(data, key, "a list of objects")
    return items


def _content(data: Mapping[str, Any], key: str, default: Any) -> Any:
    """A ``content`` field: a string, or a list of content blocks."""
    value = data.get(key, default)
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise _wrong(data, key, "a string or a list of blocks")
    items = cast("list[Any]", value)
    return tuple(block_from_api(b) for b in items)


def clean_text(value: str) -> str:
    """*value* as text UTF-8 can carry: each lone surrogate (a file name decoded with
    ``surrogateescape``, a JSON ``"\\ud800"`` escape, a tool's bad string) becomes
    U+FFFD; a surrogate pair becomes the character it encodes. Text that encodes
    already is returned as it is (the common case costs one ``isascii``)."""
    if value.isascii():
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return value


def clean_json(value: Any) -> Any:
    """*value* with :func:`clean_text` applied to every string in it, keys too
    (iteratively: a deeply nested value cannot exhaust the stack); *value* itself
    when nothing needed cleaning."""
    if isinstance(value, str):
        return clean_text(value)
    if not isinstance(value, Mapping | list | tuple) or _all_clean(value):
        return cast(Any, value)
    return _cleaned(value)


def _all_clean(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if clean_text(item) is not item:
                return False
        elif isinstance(item, Mapping):
            mapping = cast("Mapping[Any, Any]", item)
            stack.extend(mapping.keys())
            stack.extend(mapping.values())
        elif isinstance(item, list | tuple):
            stack.extend(cast("Sequence[Any]", item))
    return True


def _cleaned(value: Any) -> Any:
    """A copy of *value* (mappings as dicts, sequences as lists) with clean strings;
    iterative, so depth costs no recursion."""
    root: list[Any] = [None]
    work: list[tuple[Any, Any, Any]] = [(value, root, 0)]
    while work:
        item, parent, key = work.pop()
        if isinstance(item, str):
            parent[key] = clean_text(item)
        elif isinstance(item, Mapping):
            mapping = cast("Mapping[Any, Any]", item)
            out: dict[Any, Any] = {}
            parent[key] = out
            for k, v in mapping.items():
                k = clean_text(k) if isinstance(k, str) else k
                out[k] = None
                work.append((v, out, k))
        elif isinstance(item, list | tuple):
            items = list(cast("Sequence[Any]", item))
            parent[key] = items
            work.extend((v, items, i) for i, v in enumerate(items))
        else:
            parent[key] = item
    return root[0]


def _clean_mapping(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return _frozen_mapping(clean_json(value) if value else value)


def _content_value(
    content: str | Sequence[ContentBlock],
) -> str | tuple[ContentBlock, ...]:
    return clean_text(content) if isinstance(content, str) else tuple(content)


def _extra(data: Mapping[str, Any], known: frozenset[str]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k not in known}


def json_depth(value: Any, limit: int) -> int:
    """The nesting depth of parsed JSON *value* (a scalar is 0), counted without
    recursion; once past *limit* it stops and answers ``limit + 1``."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        children: Iterable[Any]
        kind: type[Any] = type(item)  # pyright: ignore[reportUnknownVariableType]
        # Exact types first: an isinstance() against the Mapping ABC missed its cache
        # for every read-only input (a mappingproxy), at ~1 us a call.
        if kind is dict or kind is MappingProxyType:
            children = cast("Mapping[str, Any]", item).values()
        elif kind is list or kind is tuple:
            children = cast("Sequence[Any]", item)
        elif kind is str or kind is int or kind is float or kind is bool or item is None:
            continue
        elif isinstance(item, Mapping):
            children = cast("Mapping[str, Any]", item).values()
        elif isinstance(item, list | tuple):
            children = cast("Sequence[Any]", item)
        else:
            continue
        depth += 1
        if depth > limit:
            return limit + 1
        deepest = max(deepest, depth)
        stack.extend((child, depth) for child in children)
    return deepest


def _plain(value: Any) -> Any:
    """A deep copy of *value* as plain dicts and lists (for to_api())."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]  # pyright: ignore[reportUnknownVariableType]
    return value


@attrs.frozen
class TextBlock:
    """A text block; ``citations`` is ``None`` unless the API sent citations."""

    text: str = attrs.field(converter=clean_text)
    citations: tuple[Mapping[str, Any], ...] | None = None
    #: Every other key the API sent, verbatim.
    extra: Mapping[str, Any] = attrs.field(default=_EMPTY, converter=_frozen_mapping, kw_only=True)

    type: Literal["text"] = attrs.field(default="text", init=False)

    _KNOWN: ClassVar[frozenset[str]] = frozenset({"type", "text", "citations"})

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> TextBlock:
        citations = _mappings(data, "citations")
        return cls(
            text=_require(data, "text", str),
            citations=None if citations is None else tuple(_frozen_mapping(c) for c in citations),
            extra=_extra(data, cls._KNOWN),
        )

    def to_api(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "text", "text": self.text}
        if self.citations is not None:
            out["citations"] = [_plain(c) for c in self.citations]
        out.update(_plain(self.extra))
        return out


@attrs.frozen
class ThinkingBlock:
    """Extended thinking, with the signature that lets it be sent back."""

    thinking: str = attrs.field(converter=clean_text)
    signature: str
    #: Every other key the API sent, verbatim.
    extra: Mapping[str, Any] = attrs.field(default=_EMPTY, converter=_frozen_mapping, kw_only=True)

    type: Literal["thinking"] = attrs.field(default="thinking", init=False)

    _KNOWN: ClassVar[frozenset[str]] = frozenset({"type", "thinking", "signature"})

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> ThinkingBlock:
        return cls(
            thinking=_require(data, "thinking", str),
            signature=_optional(data, "signature", str) or "",
            extra=_extra(data, cls._KNOWN),
        )

    def to_api(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": "thinking",
            "thinking": self.thinking,
            "signature": self.signature,
        }
        out.update(_plain(self.extra))
        return out


@attrs.frozen
class RedactedThinkingBlock:
    """Thinking the API encrypted; it is sent back as is."""

    data: str
    #: Every other key the API sent, verbatim.
    extra: Mapping[str, Any] = attrs.field(default=_EMPTY, converter=_frozen_mapping, kw_only=True)

    type: Literal["redacted_thinking"] = attrs.field(default="redacted_thinking", init=False)

    _KNOWN: ClassVar[frozenset[str]] = frozenset({"type", "data"})

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> RedactedThinkingBlock:
        return cls(data=_require(data, "data", str), extra=_extra(data, cls._KNOWN))

    def to_api(self) -> dict[str, Any]:
        return {"type": "redacted_thinking", "data": self.data, **_plain(self.extra)}


@attrs.frozen
class ToolUseBlock:
    """The model asks to run tool *name* with *input*.

    When the streamed input was not valid JSON, ``input`` is ``{}`` and
    ``invalid_input`` keeps the raw text; the executor answers such a block with an
    error result instead of running the tool.
    """

    id: str
    name: str
    input: Mapping[str, Any] = attrs.field(default=_EMPTY, converter=_clean_mapping)
    invalid_input: str | None = attrs.field(default=None, kw_only=True)
    #: Who called the tool (the API's ``caller``: direct, or code execution), if sent.
    caller: Mapping[str, Any] | None = attrs.field(
        default=None, kw_only=True, converter=attrs.converters.optional(_frozen_mapping)
    )
    #: Every other key the API sent, verbatim.
    extra: Mapping[str, Any] = attrs.field(default=_EMPTY, converter=_frozen_mapping, kw_only=True)

    type: Literal["tool_use"] = attrs.field(default="tool_use", init=False)

    _KNOWN: ClassVar[frozenset[str]] = frozenset({"type", "id", "name", "input", "caller"})

    @property
    def is_valid(self) -> bool:
        """False when the streamed input JSON did not parse to an object."""
        return self.invalid_input is None

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> ToolUseBlock:
        return cls(
            id=_require(data, "id", str),
            name=_require(data, "name", str),
            input=_require(data, "input", Mapping),
            caller=_optional(data, "caller", Mapping),
            extra=_extra(data, cls._KNOWN),
        )

    def to_api(self) -> dict[str, Any]:
        return _tool_use_api(self, "tool_use")


@attrs.frozen
class ServerToolUseBlock:
    """A tool the API runs itself (web search, code execution, ...)."""

    id: str
    name: str
    input: Mapping[str, Any] = attrs.field(default=_EMPTY, converter=_frozen_mapping)
    #: Who called the tool (the API's ``caller``), if sent.
    caller: Mapping[str, Any] | None = attrs.field(
        default=None, kw_only=True, converter=attrs.converters.optional(_frozen_mapping)
    )
    #: Every other key the API sent, verbatim.
    extra: Mapping[str, Any] = attrs.field(default=_EMPTY, converter=_frozen_mapping, kw_only=True)

    type: Literal["server_tool_use"] = attrs.field(default="server_tool_use", init=False)

    _KNOWN: ClassVar[frozenset[str]] = frozenset({"type", "id", "name", "input", "caller"})

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> ServerToolUseBlock:
        return cls(
            id=_require(data, "id", str),
            name=_require(data, "name", str),
            input=_require(data, "input", Mapping),
            caller=_optional(data, "caller", Mapping),
            extra=_extra(data, cls._KNOWN),
        )

    def to_api(self) -> dict[str, Any]:
        return _tool_use_api(self, "server_tool_use")


def _tool_use_api(block: ToolUseBlock | ServerToolUseBlock, kind: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "type": kind,
        "id": block.id,
        "name": block.name,
        "input": _plain(block.input),
    }
    if block.caller is not None:
        out["caller"] = _plain(block.caller)
    out.update(_plain(block.extra))
    return out


@attrs.frozen
class ToolResultBlock:
    """The answer to one ``tool_use``: text, or a list of content blocks."""

    tool_use_id: str
    content: str | tuple[ContentBlock, ...] = attrs.field(converter=_content_value)
    is_error: bool = False
    #: Every other key (``cache_control``...), verbatim.
    extra: Mapping[str, Any] = attrs.field(default=_EMPTY, converter=_frozen_mapping, kw_only=True)

    type: Literal["tool_result"] = attrs.field(default="tool_result", init=False)

    _KNOWN: ClassVar[frozenset[str]] = frozenset({"type", "tool_use_id", "content", "is_error"})

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> ToolResultBlock:
        return cls(
            tool_use_id=_require(data, "tool_use_id", str),
            content=_content(data, "content", ""),
            is_error=bool(_optional(data, "is_error", bool)),
            extra=_extra(data, cls._KNOWN),
        )

    def to_api(self) -> dict[str, Any]:
        content: Any = (
            self.content if isinstance(self.content, str) else [b.to_api() for b in self.content]
        )
        return {
            "type": "tool_result",
            "tool_use_id": self.tool_use_id,
            "content": content,
            "is_error": self.is_error,
            **_plain(self.extra),
        }


@attrs.frozen
class OpaqueBlock:
    """A block of a type this library does not know, kept verbatim."""

    data: Mapping[str, Any] = attrs.field(converter=_frozen_mapping)

    @property
    def type(self) -> str:
        return str(self.data.get("type", ""))

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> OpaqueBlock:
        return cls(data=data)

    def to_api(self) -> dict[str, Any]:
        return _plain(self.data)


ContentBlock: TypeAlias = (
    TextBlock
    | ThinkingBlock
    | RedactedThinkingBlock
    | ToolUseBlock
    | ServerToolUseBlock
    | ToolResultBlock
    | OpaqueBlock
)

_BLOCK_TYPES: dict[str, Any] = {
    "text": TextBlock,
    "thinking": ThinkingBlock,
    "redacted_thinking": RedactedThinkingBlock,
    "tool_use": ToolUseBlock,
    "server_tool_use": ServerToolUseBlock,
    "tool_result": ToolResultBlock,
}


def block_from_api(data: Mapping[str, Any]) -> ContentBlock:
    """Build the wire value for one content block's JSON; unknown types stay opaque."""
    if not isinstance(data, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise StreamProtocolError(f"a content block must be an object: {excerpt(repr(data))}")
    kind = data.get("type")
    if not isinstance(kind, str):
        raise StreamProtocolError(f"a content block needs a string type: {excerpt(repr(data))}")
    cls = _BLOCK_TYPES.get(kind)
    if cls is None:
        return OpaqueBlock(data)
    result: ContentBlock = cls.from_api(data)
    return result


_USAGE_INTS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)


def _usage_counts(data: Mapping[str, Any]) -> dict[str, int]:
    """The token counts of a usage object: ints (not bools) >= 0, or absent / null."""
    counts: dict[str, int] = {}
    for key in _USAGE_INTS:
        value = _optional(data, key, int)
        if value is not None:
            if value < 0:
                raise _wrong(data, key, "a count >= 0")
            counts[key] = value
    return counts


@attrs.frozen
class Usage:
    """Token counts. ``extra`` keeps every other usage key the API sent, verbatim.

    ``cost_usd`` is the cost in US dollars, or None when it is unknown: the API
    does not send it (``from_api`` leaves it None, ``to_api`` never writes it); the
    loop prices each model call's usage at the published price of its model and
    provider (genai-prices), so ``TurnEnd.usage`` and ``Session.usage`` carry the
    sum. A sum with an unknown cost is unknown (``None + x`` is None): a total is
    never a guess. Start a sum at ``Usage(cost_usd=0.0)``.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    extra: Mapping[str, Any] = attrs.field(default=_EMPTY, converter=_frozen_mapping)
    cost_usd: float | None = attrs.field(default=None, kw_only=True)

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> Usage:
        known = _usage_counts(data)
        # A known key the API sent as null stays in `extra`, so to_api() is exact.
        extra = {k: v for k, v in data.items() if k not in known}
        return cls(**known, extra=extra)

    def to_api(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
        }
        for key in _USAGE_INTS[2:]:
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        out.update(_plain(self.extra))
        return out

    def merge_delta(self, data: Mapping[str, Any]) -> Usage:
        """Apply a ``message_delta`` usage object (cumulative counts overwrite)."""
        changes: dict[str, Any] = _usage_counts(data)
        extra = {k: v for k, v in data.items() if k not in _USAGE_INTS and v is not None}
        if extra:
            changes["extra"] = {**self.extra, **extra}
        return attrs.evolve(self, **changes) if changes else self

    def __add__(self, other: Usage) -> Usage:
        """Sum two usages (for turn and session totals); the costs add up when both
        are known, else the sum's is None."""

        def add(a: int | None, b: int | None) -> int | None:
            return None if a is None and b is None else (a or 0) + (b or 0)

        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_creation_input_tokens=add(
                self.cache_creation_input_tokens, other.cache_creation_input_tokens
            ),
            cache_read_input_tokens=add(
                self.cache_read_input_tokens, other.cache_read_input_tokens
            ),
            cost_usd=(
                None
                if self.cost_usd is None or other.cost_usd is None
                else self.cost_usd + other.cost_usd
            ),
        )


def _blocks(value: Sequence[ContentBlock]) -> tuple[ContentBlock, ...]:
    return tuple(value)


@attrs.frozen
class AssistantMessage:
    """One answer of the model, as the Messages API (and the SDK's
    ``Message.to_dict()``) gives it. ``extra`` keeps unknown top-level keys."""

    id: str
    model: str
    content: tuple[ContentBlock, ...] = attrs.field(factory=tuple, converter=_blocks)
    stop_reason: str | None = None
    stop_sequence: str | None = None
    usage: Usage = attrs.field(factory=Usage)
    extra: Mapping[str, Any] = attrs.field(default=_EMPTY, converter=_frozen_mapping)

    role: Literal["assistant"] = attrs.field(default="assistant", init=False)

    @property
    def tool_uses(self) -> tuple[ToolUseBlock, ...]:
        return tuple(b for b in self.content if isinstance(b, ToolUseBlock))

    @property
    def text(self) -> str:
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))

    _KNOWN = frozenset(
        {"id", "type", "role", "model", "content", "stop_reason", "stop_sequence", "usage"}
    )

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> AssistantMessage:
        content = _optional(data, "content", list) or ()
        usage = _optional(data, "usage", Mapping)
        return cls(
            id=_require(data, "id", str),
            model=_require(data, "model", str),
            content=tuple(block_from_api(b) for b in content),
            stop_reason=_optional(data, "stop_reason", str),
            stop_sequence=_optional(data, "stop_sequence", str),
            usage=Usage() if usage is None else Usage.from_api(usage),
            extra=_extra(data, cls._KNOWN),
        )

    def to_api(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [b.to_api() for b in self.content],
            "stop_reason": self.stop_reason,
            "stop_sequence": self.stop_sequence,
            "usage": self.usage.to_api(),
        }
        out.update(_plain(self.extra))
        return out

    def to_param(self) -> dict[str, Any]:
        """This message as a request ``messages`` entry."""
        return {"role": "assistant", "content": [b.to_api() for b in self.content]}


@attrs.frozen
class UserMessage:
    """A user turn: a prompt, or the tool results of the previous answer."""

    content: str | tuple[ContentBlock, ...] = attrs.field(converter=_content_value)

    role: Literal["user"] = attrs.field(default="user", init=False)

    @property
    def tool_results(self) -> tuple[ToolResultBlock, ...]:
        if isinstance(self.content, str):
            return ()
        return tuple(b for b in self.content if isinstance(b, ToolResultBlock))

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> UserMessage:
        return cls(content=_content(data, "content", ""))

    def to_api(self) -> dict[str, Any]:
        content: Any = (
            self.content if isinstance(self.content, str) else [b.to_api() for b in self.content]
        )
        return {"role": "user", "content": content}

    def to_param(self) -> dict[str, Any]:
        """This message as a request ``messages`` entry (same as ``to_api()``)."""
        return self.to_api()


Message: TypeAlias = AssistantMessage | UserMessage


def message_from_api(data: Mapping[str, Any]) -> Message:
    """A user or assistant message from its JSON (request param or API response)."""
    if not isinstance(data, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise StreamProtocolError(f"a message must be an object: {excerpt(repr(data))}")
    if data.get("role") == "user":
        return UserMessage.from_api(data)
    if "id" in data:
        return AssistantMessage.from_api(data)
    # A request-param assistant message has no id or model.
    content = _content(data, "content", ())
    if isinstance(content, str):  # the request-param shorthand for one text block
        content = (TextBlock(content),)
    return AssistantMessage(id="", model="", content=content)
