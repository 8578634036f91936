"""AnthropicClient: the Messages API over httpx + httpx-sse, streamed safely under Trio.

Example::

    # reads ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) / ANTHROPIC_BASE_URL
    async with trio_agent.AnthropicClient() as client:  # one connection pool
        async with client.stream(model="claude-sonnet-5-5", max_tokens=1024,
                                 messages=[trio_agent.UserMessage("Hi")]) as items:
            async for item in items:
                if isinstance(item, trio_agent.lowlevel.StreamEvent) and item.text_delta:
                    print(item.text_delta, end="")
                elif isinstance(item, trio_agent.lowlevel.StreamResult):
                    print(item.message.stop_reason, item.ttft)

``stream()`` and ``create()`` are those of every provider (:class:`ProviderClient`:
the request, retries, reads, idle watchdog and limits); this module says only what is
Anthropic's: the body (:class:`MessagesProvider`), that the events need no
translation, the path, the typed errors, and the credentials' headers.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import Any, cast, final

import attrs
import httpx

from .._exceptions import APIStatusError, AuthenticationError, StreamProtocolError
from .._messages import AssistantMessage, ContentBlock, OpaqueBlock, UserMessage
from .._retry import RetryPolicy
from .._tools import Tool
from ._accumulate import MessageAccumulator, StreamLimits
from ._client import ProviderClient
from ._errors_http import RETRYABLE_ERROR_TYPES
from ._protocol import CacheTTL, MessageLike
from ._provider import ModelRequest, Provider

__all__ = [
    "DEFAULT_BASE_URL",
    "MAX_CACHE_BREAKPOINTS",
    "AnthropicClient",
    "MessagesProvider",
    "mark_cache_breakpoints",
]

DEFAULT_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"


#: Block types another provider wrote that mean nothing to Anthropic, left out of a
#: request: an OpenAI ``reasoning`` item (an :class:`OpaqueBlock`) is state only OpenAI
#: can read, as a ``ThinkingBlock``'s signature only Anthropic can check (OpenAIClient
#: leaves those out). The Messages API has no block of these types.
_FOREIGN_BLOCK_TYPES = frozenset({"reasoning"})


def _foreign(block: ContentBlock) -> bool:
    return isinstance(block, OpaqueBlock) and block.type in _FOREIGN_BLOCK_TYPES


def _message_params(messages: Sequence[MessageLike]) -> list[dict[str, Any]]:
    """The wire form of *messages*; an assistant message's foreign blocks left out (and
    the message itself, if nothing else was in it: the API joins the turns around it)."""
    params: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, AssistantMessage) and any(_foreign(b) for b in message.content):
            kept = tuple(b for b in message.content if not _foreign(b))
            if not kept:
                continue
            message = attrs.evolve(message, content=kept)
        params.append(_message_param(message))
    return params


def _message_param(message: Any) -> dict[str, Any]:
    if isinstance(message, (UserMessage, AssistantMessage)):
        return message.to_param()
    if isinstance(message, Mapping):
        return dict(message)
    raise TypeError(f"a message must be a UserMessage, AssistantMessage or dict, not {message!r}")


def _tool_param(tool: Any) -> dict[str, Any]:
    if isinstance(tool, Tool):
        return tool.to_api()
    if isinstance(tool, Mapping):
        return dict(tool)
    raise TypeError(f"a tool must be a Tool or dict, not {tool!r}")


# -- prompt caching ---------------------------------------------------------------------

#: The Messages API's limit of ``cache_control`` breakpoints in one request.
MAX_CACHE_BREAKPOINTS = 4
#: Blocks the API refuses a ``cache_control`` on (a thinking block is cached with
#: the message around it, never marked itself).
_UNMARKABLE = frozenset({"thinking", "redacted_thinking"})
_TTL_RANK = {"5m": 0, "1h": 1}

#: A breakpoint's place in the prompt's order (tools, then system, then messages):
#: (part, item, block), compared as a tuple.
_Place = tuple[int, int, int]


def _ttl(mark: Any) -> str:
    ttl: object = cast("Mapping[str, Any]", mark).get("ttl") if isinstance(mark, Mapping) else None
    return "1h" if ttl == "1h" else "5m"


def _user_marks(body: Mapping[str, Any]) -> list[tuple[_Place, str]]:
    """The breakpoints the caller set themselves, in prompt order, with their TTLs."""
    marks: list[tuple[_Place, str]] = []
    for i, tool in enumerate(body.get("tools", ())):
        if "cache_control" in tool:
            marks.append(((0, i, 0), _ttl(tool["cache_control"])))
    system = body.get("system")
    if isinstance(system, list):
        for i, block in enumerate(cast("list[Mapping[str, Any]]", system)):
            if "cache_control" in block:
                marks.append(((1, i, 0), _ttl(block["cache_control"])))
    for m, message in enumerate(body["messages"]):
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for b, block in enumerate(cast("list[Any]", content)):
            if not isinstance(block, Mapping):
                continue
            block_ = cast("Mapping[str, Any]", block)
            inner = block_.get("content")
            if isinstance(inner, list):  # a tool_result's own blocks
                for item in cast("list[Any]", inner):
                    if isinstance(item, Mapping) and "cache_control" in item:
                        marks.append(
                            ((2, m, b), _ttl(cast("Mapping[str, Any]", item)["cache_control"]))
                        )
            if "cache_control" in block_:
                marks.append(((2, m, b), _ttl(block_["cache_control"])))
    return marks


def _markable_block(content: list[Any]) -> int | None:
    """The index of the last block of *content* a breakpoint may go on."""
    for b in range(len(content) - 1, -1, -1):
        block = content[b]
        if not isinstance(block, Mapping):
            continue
        block_ = cast("Mapping[str, Any]", block)
        kind = block_.get("type")
        if kind in _UNMARKABLE or (kind == "text" and not block_.get("text")):
            continue
        return b
    return None


def _last_markable(messages: Sequence[Mapping[str, Any]], index: int) -> _Place | None:
    """The last block a breakpoint may go on in ``messages[: index + 1]``.

    A message whose content is a string is passed over rather than rewritten as a
    block: every message keeps its wire form, and its text is cached from the next
    call on (the next breakpoint is after it).
    """
    for m in range(index, -1, -1):
        content = messages[m].get("content")
        if isinstance(content, list):
            b = _markable_block(cast("list[Any]", content))
            if b is not None:
                return (2, m, b)
    return None


def _read_point(messages: Sequence[Mapping[str, Any]]) -> int | None:
    """The last message of the request before this one, as it went in a tool loop or
    a new turn: the last user message followed by an assistant message."""
    for i in range(len(messages) - 2, -1, -1):
        if messages[i].get("role") == "user" and messages[i + 1].get("role") == "assistant":
            return i
    return None


def _candidates(body: Mapping[str, Any]) -> list[_Place]:
    """Where trio_agent would put breakpoints, the most valuable first."""
    places: list[_Place] = []
    messages: list[Mapping[str, Any]] = body["messages"]
    # The end of the conversation: this call writes the whole prefix, and the next
    # call, whose prefix this one is, reads it (the API's top-level cache_control
    # puts its own breakpoint there).
    last = _last_markable(messages, len(messages) - 1)
    if last is not None and "cache_control" not in body:
        places.append(last)
    tools: list[Any] = body.get("tools", [])
    system = body.get("system")
    # The end of the system prompt (after the tools): what every turn of a session,
    # and every session with the same prompt and tools, shares; after a compaction it
    # is still cached.
    end = _markable_block(cast("list[Any]", system)) if isinstance(system, list) else None
    if end is not None:
        places.append((1, end, 0))
    elif tools:
        places.append((0, len(tools) - 1, 0))
    # Where the previous call's prefix ended: read exactly, however many blocks the
    # last answer and its results added (the API looks only ~20 blocks back from a
    # breakpoint for a cached prefix).
    read = _read_point(messages)
    if read is not None and (place := _last_markable(messages, read)) is not None:
        places.append(place)
    if tools and end is not None:
        places.append((0, len(tools) - 1, 0))
    return places


def _fitting_ttl(place: _Place, ttl: str, user: list[tuple[_Place, str]]) -> str:
    """*ttl*, or the TTL it must be for the API's rule that a longer-lived breakpoint
    never follows a shorter-lived one (the caller's breakpoints stay as they are)."""
    rank = _TTL_RANK[ttl]
    before = [_TTL_RANK[t] for p, t in user if p < place]
    after = [_TTL_RANK[t] for p, t in user if p > place]
    if before:
        rank = min(rank, min(before))
    if after:
        rank = max(rank, max(after))
    return "1h" if rank else "5m"


def _marked(block: Any, mark: dict[str, str]) -> dict[str, Any]:
    return {**cast("Mapping[str, Any]", block), "cache_control": mark}


def mark_cache_breakpoints(body: dict[str, Any], ttl: CacheTTL) -> None:
    """Put prompt-cache breakpoints into a Messages API *body*, as Claude Code does.

    In order of value, within the API's limit of :data:`MAX_CACHE_BREAKPOINTS` once
    the caller's own ``cache_control`` breakpoints are counted (theirs are never moved
    or dropped; a block they marked is not marked twice): the last message (the API
    reads the longest prefix cached before it, and writes the rest), the end of the
    system prompt (else of the tools), the previous call's last message, the end of
    the tools. A string system prompt or message becomes one text block to carry the
    mark; the caller's values are never changed (marked items are copies).

    The marks are left out of the cache's key by the API, so moving the last one
    forward each call keeps every earlier byte of the prefix the same.
    """
    user = _user_marks(body)
    free = MAX_CACHE_BREAKPOINTS - len(user) - ("cache_control" in body)
    taken = {p for p, _ in user}
    for place in _candidates(body):
        if free <= 0:
            return
        if place in taken:
            continue
        taken.add(place)
        free -= 1
        fitting = _fitting_ttl(place, ttl, user)
        mark = {"type": "ephemeral", "ttl": "1h"} if fitting == "1h" else {"type": "ephemeral"}
        part, item, block = place
        if part == 0:
            body["tools"][item] = _marked(body["tools"][item], mark)
        elif part == 1:
            body["system"][item] = _marked(body["system"][item], mark)
        else:
            message = dict(body["messages"][item])
            content = list(message["content"])
            content[block] = _marked(content[block], mark)
            message["content"] = content
            body["messages"][item] = message


@final
class _MessagesDecoder:
    """Messages API events are already canonical: decoded, never translated.

    A Messages API stream begins with ``message_start`` (after pings, or an
    ``error``); anything else first is some other API's stream (an OpenAI server's
    ``response.created`` or ``chat.completion.chunk``), a
    :class:`StreamProtocolError` saying "not a Messages API stream" at once, not a
    truncation found at its end and retried.
    """

    def __init__(self, accumulator: MessageAccumulator) -> None:
        self._accumulator = accumulator
        self._decode = accumulator.decode
        self._started = False

    def translate(self, data: str) -> tuple[dict[str, Any]]:
        if self._started:
            return (self._decode(data),)
        try:
            event = self._decode(data)
        except StreamProtocolError as exc:
            raise StreamProtocolError(f"not a Messages API stream: {exc}") from exc
        etype = event["type"]
        if etype == "message_start":
            self._started = True
        elif etype not in ("ping", "error"):
            raise StreamProtocolError(
                f"not a Messages API stream: its first event is {etype!r}, not message_start "
                "(is the base URL another API's, e.g. OpenAI's?)"
            )
        return (event,)

    def events(self) -> int:
        return self._accumulator.statistics().events

    def statistics(self) -> tuple[int, int, int]:
        stats = self._accumulator.statistics()
        return stats.events, stats.pings, stats.ignored


#: The Claude models without structured output (``output_config.format``).
_NO_STRUCTURED_OUTPUT = re.compile(
    r"^claude-(?:instant|[12]|3|(?:opus|sonnet)-4(?:-0)?(?:-\d{8})?$|(?:opus|sonnet)-4-2025)"
)


@final
class MessagesProvider(Provider):
    """The Anthropic Messages API (``POST /v1/messages``) as a :class:`Provider`."""

    path = "/v1/messages"

    def supports_output_schema(self, model: str) -> bool:
        """Structured output came with the Claude 4.5 models (and Opus 4.1): the
        models before them are refused."""
        return _NO_STRUCTURED_OUTPUT.match(model) is None

    def request_body(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        """The JSON body of a Messages API request.

        Blocks another provider wrote that the Messages API has no form for are left
        out (an OpenAI ``reasoning`` item), so a history can move from
        :class:`OpenAIClient` to this client mid-conversation. With
        ``request.cache``, prompt-cache breakpoints are marked
        (:func:`mark_cache_breakpoints`).
        """
        body: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens,
            "messages": _message_params(request.messages),
        }
        system = request.system
        if system is not None:
            if isinstance(system, str):
                # As one text block when caching, so it can carry a breakpoint (the
                # same bytes every call, marked or not).
                body["system"] = (
                    [{"type": "text", "text": system}] if request.cache and system else system
                )
            else:
                body["system"] = [dict(s) for s in system]
        if request.tools:
            body["tools"] = [_tool_param(t) for t in request.tools]
        if request.output_schema is not None:
            # Structured output (GA): the final answer's text is JSON of the schema.
            body["output_config"] = {
                "format": {"type": "json_schema", "schema": dict(request.output_schema)}
            }
        if request.extra_body:
            body.update(request.extra_body)
        if request.cache is not None:
            mark_cache_breakpoints(body, request.cache)
        body["stream"] = stream
        return body

    def decoder(self, accumulator: MessageAccumulator) -> _MessagesDecoder:
        return _MessagesDecoder(accumulator)

    def answer(self, data: Any, limits: StreamLimits) -> AssistantMessage:
        """A Messages API message object → the canonical message."""
        if not isinstance(data, dict) or data.get("type") != "message":
            raise ValueError("not a message object")
        return AssistantMessage.from_api(cast("dict[str, Any]", data))

    def retryable_in_stream(self, exc: APIStatusError) -> bool:
        return exc.error_type in RETRYABLE_ERROR_TYPES


@final
class AnthropicClient(ProviderClient):
    """A streaming client for the Anthropic Messages API (a :class:`ProviderClient`
    over :class:`MessagesProvider`: ``stream()``, ``create()``, ``build_request_body()``).

    ``async with AnthropicClient() as client:`` shares one connection pool across
    every stream and :meth:`create` until the block ends (then the client is closed);
    without it, each request opens and closes its own connections. :meth:`aclose`
    closes the client; a closed client refuses requests with
    :class:`ClientClosedError`.

    Without credentials (no *api_key*, *auth_token*, ``$ANTHROPIC_API_KEY`` nor
    ``$ANTHROPIC_AUTH_TOKEN``, and no ``x-api-key``/``authorization`` in
    *default_headers*), each request raises :class:`AuthenticationError` before
    anything is sent, as the official SDK does.

    Args:
        api_key: sent as ``x-api-key``; defaults to ``$ANTHROPIC_API_KEY``. Never shown
            in a repr, log line or exception.
        auth_token: sent as ``Authorization: Bearer``; defaults to
            ``$ANTHROPIC_AUTH_TOKEN`` (both are sent when both are set, as the SDK
            does). Never shown either.
        base_url: defaults to ``$ANTHROPIC_BASE_URL``, else ``https://api.anthropic.com``.
        http_client: an ``httpx.AsyncClient`` to use for every request and never
            close, e.g. for a custom transport; by default the client opens its own
            (one shared pool while entered, else one per request).
        retry: when and how long to wait before retrying.
        idle_timeout: seconds without any byte (pings included) before an attempt is
            abandoned with :class:`StreamIdleTimeoutError` (or :class:`APITimeoutError`
            while waiting for the response headers).
        stall_timeout: gaps longer than this between non-ping events are counted and
            timed as stalls in :class:`StreamStatistics`.
        connect_timeout: the TCP/TLS connect timeout of the client this class opens.
        limits: bounds on event size, tool input size and block count.
        default_headers: extra request headers (e.g. ``anthropic-beta``).
    """

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        http_client: httpx.AsyncClient | None = None,
        *,
        retry: RetryPolicy | None = None,
        idle_timeout: float = 90.0,
        stall_timeout: float = 30.0,
        connect_timeout: float = 10.0,
        limits: StreamLimits | None = None,
        default_headers: Mapping[str, str] | None = None,
        auth_token: str | None = None,
    ) -> None:
        super().__init__(
            MessagesProvider(),
            base_url=base_url or os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL,
            http_client=http_client,
            retry=retry,
            idle_timeout=idle_timeout,
            stall_timeout=stall_timeout,
            connect_timeout=connect_timeout,
            limits=limits,
            default_headers=default_headers,
        )
        self._api_key = api_key if api_key is not None else os.environ.get("ANTHROPIC_API_KEY")
        self._auth_token = (
            auth_token if auth_token is not None else os.environ.get("ANTHROPIC_AUTH_TOKEN")
        )

    def __repr__(self) -> str:
        key = "None" if self._api_key is None else "'<redacted>'"
        token = "" if self._auth_token is None else ", auth_token='<redacted>'"
        return f"AnthropicClient(base_url={self.base_url!r}, api_key={key}{token})"

    @property
    def has_api_key(self) -> bool:
        """Whether an API key is configured (the key itself is never exposed)."""
        return bool(self._api_key)

    @property
    def has_credentials(self) -> bool:
        """Whether a request would carry credentials: an API key, an auth token, or
        an ``x-api-key``/``authorization`` header of *default_headers*."""
        given = {name.lower() for name in self.default_headers}
        return bool(self._api_key or self._auth_token or given & {"x-api-key", "authorization"})

    def _headers(self) -> dict[str, str]:
        """The request headers.

        Raises:
            AuthenticationError: no credentials at all; nothing was sent.
        """
        if not self.has_credentials:
            raise AuthenticationError(
                "no Anthropic credentials: pass api_key= (or auth_token=), or set"
                " ANTHROPIC_API_KEY (sent as x-api-key) or ANTHROPIC_AUTH_TOKEN (sent as"
                " Authorization: Bearer); both were looked at and neither is set."
                " Nothing was sent.",
                status_code=None,
                error_type="authentication_error",
            )
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        # As in the SDK, a header of default_headers wins over the key or token
        # (names compared case-insensitively: one header is sent, never two).
        if self._api_key:
            headers["x-api-key"] = self._api_key
        if self._auth_token:
            headers["authorization"] = f"Bearer {self._auth_token}"
        for name, value in self.default_headers.items():
            headers.pop(name.lower(), None)
            headers[name] = value
        return headers
