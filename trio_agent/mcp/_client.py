"""What the client side of an MCP session answers: elicitation, sampling, roots, logs.

The SDK's ``ClientSession`` calls back into these when a server asks something of
the client. Each callback here is told which server asks; none raises into the
SDK (a failure is an MCP error answer). What the client announces follows what the
user gave: no ``elicit=``, no elicitation capability; no ``sampling=``, none for
sampling; roots are always announced (the workspace by default).
"""

from __future__ import annotations

import builtins
import logging
import os
import warnings
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, cast

import attrs
import mcp
import trio
from mcp.shared.exceptions import MCPDeprecationWarning

from .._messages import AssistantMessage, TextBlock, UserMessage
from .._model import ModelClient, StreamResult

__all__ = [
    "Elicit",
    "ElicitationAnswer",
    "ElicitationRequest",
    "MCPRoots",
    "MCPSampling",
    "SamplingRequest",
    "client_info",
    "log_message",
    "route_sdk_logs",
]

logger = logging.getLogger("trio_agent.mcp")

#: The SDK's log levels as ``logging`` levels (RFC 5424's eight, folded).
_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}


class _ToOurLogger(logging.Handler):
    """The SDK's log records, handed to ``trio_agent.mcp.sdk`` (so to ``trio_agent.mcp``'s
    handlers) when that logger takes their level."""

    def emit(self, record: logging.LogRecord) -> None:
        target = logging.getLogger("trio_agent.mcp.sdk")
        if target.isEnabledFor(record.levelno):
            record.msg = f"[{record.name}] {record.msg}"
            record.name = target.name
            target.handle(record)


def route_sdk_logs() -> None:
    """Send the SDK's ``mcp`` logger to ``trio_agent.mcp.sdk`` (once)."""
    sdk = logging.getLogger("mcp")
    if not any(isinstance(h, _ToOurLogger) for h in sdk.handlers):
        sdk.addHandler(_ToOurLogger())
        sdk.setLevel(logging.DEBUG)  # the records exist; ours decides what is kept
        sdk.propagate = False


def client_info() -> mcp.types.Implementation:
    """What trio-agent says it is in ``initialize``."""
    from .. import __version__

    return mcp.types.Implementation(name="trio-agent", title="trio-agent", version=__version__)


async def log_message(server: str, params: mcp.types.LoggingMessageNotificationParams) -> None:
    """A server's ``notifications/message``, to the ``trio_agent.mcp`` logger at its level."""
    await trio.lowlevel.checkpoint()
    data = params.data if isinstance(params.data, str) else repr(params.data)
    source = f"{server}/{params.logger}" if params.logger else server
    logger.log(_LEVELS.get(params.level, logging.INFO), "[%s log] %s", source, data[:10_000])


# --- elicitation ------------------------------------------------------------------


@attrs.frozen
class ElicitationRequest:
    """A server asks the user for something (MCP elicitation).

    In ``"form"`` mode *schema* is the flat JSON Schema of what to give (its
    properties' ``default`` are filled in for an accepted answer that leaves them
    out); in ``"url"`` mode *url* is a page for the user to visit (accepting means
    the user agreed to open it).
    """

    server: str
    message: str
    mode: Literal["form", "url"] = "form"
    schema: Mapping[str, Any] | None = None
    url: str | None = None
    elicitation_id: str | None = None


@attrs.frozen
class ElicitationAnswer:
    """The user's answer: ``accept`` (with *content* in form mode), ``decline`` or ``cancel``."""

    action: Literal["accept", "decline", "cancel"]
    content: Mapping[str, Any] | None = None

    def __attrs_post_init__(self) -> None:
        if self.action not in ("accept", "decline", "cancel"):
            raise ValueError(f"action must be accept, decline or cancel, not {self.action!r}")


#: ``elicit=``: an async callable answering each elicitation.
Elicit = Callable[[ElicitationRequest], Awaitable[ElicitationAnswer]]

_VALUE_TYPES = (str, int, float, bool, type(None))


def with_defaults(schema: Mapping[str, Any] | None, content: Mapping[str, Any]) -> dict[str, Any]:
    """*content* with every property *schema* gives a ``default`` for and *content*
    leaves out filled with that default (SEP-1034)."""
    out = dict(content)
    properties: Any = (schema or {}).get("properties")
    if isinstance(properties, Mapping):
        for name, prop in cast("Mapping[str, Any]", properties).items():
            if name not in out and isinstance(prop, Mapping) and "default" in prop:
                out[name] = cast("Mapping[str, Any]", prop)["default"]
    return out


def _checked_content(content: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in content.items():
        if not isinstance(key, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"an elicitation answer's keys are strings, not {key!r}")
        if isinstance(value, list):
            items = cast("list[Any]", value)
            if not all(isinstance(v, str) for v in items):
                raise TypeError(f"{key!r}: a list answer holds strings only")
        elif not isinstance(value, _VALUE_TYPES):
            raise TypeError(
                f"{key!r}: an answer is a string, number, boolean, list of strings or null, "
                f"not {type(value).__name__}"
            )
        out[key] = value
    return out


def elicitation_callback(server: str, elicit: Elicit) -> Any:
    """The SDK's ``elicitation_callback`` for *server*, answering through *elicit*."""

    async def callback(
        _context: Any, params: mcp.types.ElicitRequestParams
    ) -> mcp.types.ElicitResult | mcp.types.ErrorData:
        if isinstance(params, mcp.types.ElicitRequestURLParams):
            request = ElicitationRequest(
                server,
                params.message,
                mode="url",
                url=params.url,
                elicitation_id=params.elicitation_id,
            )
        else:
            request = ElicitationRequest(server, params.message, schema=params.requested_schema)
        try:
            answer = await elicit(request)
            if not isinstance(answer, ElicitationAnswer):  # pyright: ignore[reportUnnecessaryIsInstance]
                raise TypeError(f"elicit returned {answer!r}, not an ElicitationAnswer")
            if answer.action != "accept":
                return mcp.types.ElicitResult(action=answer.action)
            if request.mode == "url":
                return mcp.types.ElicitResult(action="accept")
            content = _checked_content(with_defaults(request.schema, answer.content or {}))
        except Exception as exc:
            logger.warning("MCP elicitation from %r failed: %s", server, exc)
            return mcp.types.ErrorData(
                code=mcp.types.INTERNAL_ERROR, message=f"the client's elicitation failed: {exc}"
            )
        return mcp.types.ElicitResult(action="accept", content=content)

    return callback


# --- sampling -----------------------------------------------------------------------


@attrs.frozen
class SamplingRequest:
    """A server asks for a model answer (``sampling/createMessage``), as text."""

    server: str
    #: ``("user" | "assistant", text)`` pairs, oldest first.
    messages: tuple[tuple[Literal["user", "assistant"], str], ...]
    system: str | None
    max_tokens: int
    #: The model names the server hinted at, most preferred first (advisory).
    model_hints: tuple[str, ...] = ()


@attrs.define(eq=False)
class MCPSampling:
    """Answer servers' ``sampling/createMessage`` with *client* and *model*.

    Off unless given to :func:`~trio_agent.mcp.open_mcp_tools` as ``sampling=``.
    *approve* decides each request (the user sees what the server asks); a refused
    request gets an MCP error. ``max_tokens`` caps what a server may ask for.

    Example::

        async def approve(request: SamplingRequest) -> bool:
            return await ask_the_user(f"{request.server} asks the model: ...")

        sampling = MCPSampling(client, "claude-haiku-4-5", approve=approve)
        async with open_mcp_tools(servers, sampling=sampling) as tools: ...
    """

    client: ModelClient
    model: str
    approve: Callable[[SamplingRequest], Awaitable[bool]]
    max_tokens: int = 4096

    async def answer(self, request: SamplingRequest) -> AssistantMessage:
        """The model's answer to *request* (once approved)."""
        messages = [
            UserMessage(text) if role == "user" else _assistant(text)
            for role, text in request.messages
        ]
        final: AssistantMessage | None = None
        async with self.client.stream(
            model=self.model,
            messages=messages,
            max_tokens=min(request.max_tokens, self.max_tokens),
            system=request.system,
        ) as items:
            async for item in items:
                if isinstance(item, StreamResult):
                    final = item.message
        if final is None:
            raise RuntimeError("the model's stream ended without a result")
        return final

    def callback(self, server: str) -> Any:
        """The SDK's ``sampling_callback`` for *server*."""

        async def callback(
            _context: Any, params: mcp.types.CreateMessageRequestParams
        ) -> mcp.types.CreateMessageResult | mcp.types.ErrorData:
            try:
                request = _sampling_request(server, params)
            except ValueError as exc:
                await trio.lowlevel.checkpoint()
                return mcp.types.ErrorData(code=mcp.types.INVALID_PARAMS, message=str(exc))
            try:
                if not await self.approve(request):
                    return mcp.types.ErrorData(
                        code=mcp.types.INVALID_REQUEST,
                        message="the user declined the sampling request",
                    )
                message = await self.answer(request)
            except Exception as exc:
                logger.warning("MCP sampling for %r failed: %s", server, exc)
                return mcp.types.ErrorData(
                    code=mcp.types.INTERNAL_ERROR, message=f"sampling failed: {exc}"
                )
            text = "".join(b.text for b in message.content if isinstance(b, TextBlock))
            return mcp.types.CreateMessageResult(
                role="assistant",
                content=mcp.types.TextContent(type="text", text=text),
                model=message.model or self.model,
                stop_reason=_stop_reason(message.stop_reason),
            )

        return callback


def _assistant(text: str) -> AssistantMessage:
    return AssistantMessage(id="", model="", content=(TextBlock(text),))


def _stop_reason(reason: str | None) -> str | None:
    return {"end_turn": "endTurn", "max_tokens": "maxTokens", "stop_sequence": "stopSequence"}.get(
        reason or "", reason
    )


def _sampling_request(server: str, params: mcp.types.CreateMessageRequestParams) -> SamplingRequest:
    if params.tools:
        raise ValueError("sampling with tools is not supported by this client")
    messages: list[tuple[Literal["user", "assistant"], str]] = []
    for message in params.messages:
        blocks = message.content if isinstance(message.content, list) else [message.content]
        texts: list[str] = []
        for block in blocks:
            if not isinstance(block, mcp.types.TextContent):
                raise ValueError(f"only text can be sampled here, not {block.type} content")
            texts.append(block.text)
        messages.append((message.role, "".join(texts)))
    if not messages:
        raise ValueError("a sampling request needs at least one message")
    hints = (params.model_preferences.hints or []) if params.model_preferences else []
    return SamplingRequest(
        server,
        tuple(messages),
        params.system_prompt,
        params.max_tokens,
        tuple(h.name for h in hints if h.name),
    )


# --- roots ----------------------------------------------------------------------


def _root(value: str | os.PathLike[str]) -> mcp.types.Root:
    path = Path(value).resolve()
    return mcp.types.Root(uri=cast("Any", path.as_uri()), name=path.name or str(path))


def _resolved(paths: Iterable[str | os.PathLike[str]]) -> tuple[Path, ...]:
    return tuple(Path(p).resolve() for p in paths)


@attrs.define(eq=False)
class MCPRoots:
    """The directories the client announces to servers as its roots (``roots/list``).

    :meth:`set` changes them and tells every connected server
    (``notifications/roots/list_changed``).

    Example::

        roots = MCPRoots(["."])
        async with open_mcp_tools(servers, roots=roots) as tools:
            await roots.set(["/srv/project", "/tmp/scratch"])
    """

    _paths: tuple[Path, ...] = attrs.field(converter=_resolved)
    # builtins.set: the method below shadows the name where the hints are resolved.
    _sessions: builtins.set[mcp.ClientSession] = attrs.field(
        factory=builtins.set[mcp.ClientSession], init=False
    )

    @property
    def paths(self) -> tuple[Path, ...]:
        return self._paths

    async def set(self, paths: Iterable[str | os.PathLike[str]]) -> None:
        """Announce *paths* instead, and tell every connected server their list changed."""
        self._paths = _resolved(paths)
        for session in list(self._sessions):
            try:
                with warnings.catch_warnings():
                    # Deprecated by the 2026-07-28 revision, still the current one's way.
                    warnings.simplefilter("ignore", MCPDeprecationWarning)
                    await session.send_roots_list_changed()  # pyright: ignore[reportDeprecated]
            except Exception as exc:  # a server that went away misses the news
                logger.debug("roots/list_changed not sent: %s", exc)
        await trio.lowlevel.checkpoint()

    def attach(self, session: mcp.ClientSession) -> None:
        self._sessions.add(session)

    def detach(self, session: mcp.ClientSession) -> None:
        self._sessions.discard(session)

    def callback(self) -> Any:
        """The SDK's ``list_roots_callback``."""

        async def callback(_context: Any) -> mcp.types.ListRootsResult:
            await trio.lowlevel.checkpoint()
            return mcp.types.ListRootsResult(roots=[_root(p) for p in self._paths])

        return callback


def roots_of(roots: MCPRoots | Sequence[str | os.PathLike[str]] | None) -> MCPRoots:
    """``roots=`` as an :class:`MCPRoots` (None: the current directory)."""
    if isinstance(roots, MCPRoots):
        return roots
    if isinstance(roots, str | os.PathLike):
        raise TypeError("roots is a list of paths (or an MCPRoots), not one path")
    return MCPRoots([os.getcwd()] if roots is None else list(roots))
