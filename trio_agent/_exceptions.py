"""Every exception trio_agent raises derives from :class:`TrioAgentError`.

The tree::

    TrioAgentError
    ├── StreamError                  the SSE stream itself went wrong
    │   ├── StreamProtocolError      an event broke the Messages API protocol
    │   ├── StreamTruncatedError     the stream ended before ``message_stop``
    │   ├── StreamIdleTimeoutError   no bytes at all for longer than the idle timeout
    │   ├── StreamStalledError       too many stalls (the loop's ``max_stalls``)
    │   └── StreamLimitError         an event, a tool input or the block count is too big
    ├── APIError                     the API (or the network on the way) failed
    │   ├── APIConnectionError       no response: connection refused, reset, ...
    │   │   └── APITimeoutError      the request timed out before a response
    │   └── APIStatusError           an HTTP error status or an in-stream ``error`` event
    │       ├── InvalidRequestError  400 ``invalid_request_error``
    │       │   └── PromptTooLongError   400 "prompt is too long"
    │       ├── AuthenticationError  401, or no credentials configured (checked before sending)
    │       ├── PermissionDeniedError    403
    │       ├── NotFoundError        404
    │       ├── ConflictError        409
    │       ├── RequestTooLargeError 413
    │       ├── RateLimitError       429
    │       ├── InternalServerError  500 and other 5xx
    │       └── OverloadedError      529 ``overloaded_error``
    ├── CompactionError              the built-in compactor could not compact the history
    ├── ApprovalError                approvals that answer no pending tool call
    ├── ToolDefinitionError          a Tool was declared wrongly (bad schema, name...)
    ├── ExecutorClosedError          add_tool() after finish() or discard()
    ├── ClientClosedError            a model client used after ``aclose()``
    ├── WorkspaceError               a path escapes the workspace of a built-in tool
    ├── TranscriptError              a transcript file cannot be read back
    ├── PermissionRuleError          a permission rule that cannot be parsed (also ValueError)
    ├── MCPConfigError               a malformed ``.mcp.json`` entry (trio_agent.mcp; ValueError)
    ├── ScenarioError                a bad scenario for the harness (trio_agent.testing)
    └── DurableError                 the durable engine cannot do what was asked
                                     (``trio_agent.durable``, the ``durable`` extra)
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "APIConnectionError",
    "APIError",
    "APIStatusError",
    "APITimeoutError",
    "ApprovalError",
    "AuthenticationError",
    "ClientClosedError",
    "CompactionError",
    "ConflictError",
    "ExecutorClosedError",
    "InternalServerError",
    "InvalidRequestError",
    "NotFoundError",
    "OverloadedError",
    "PermissionDeniedError",
    "PromptTooLongError",
    "RateLimitError",
    "RequestTooLargeError",
    "StreamError",
    "StreamIdleTimeoutError",
    "StreamLimitError",
    "StreamStalledError",
    "StreamProtocolError",
    "StreamTruncatedError",
    "ToolDefinitionError",
    "TranscriptError",
    "TrioAgentError",
    "WorkspaceError",
    "unwrap_single",
]

#: Longest excerpt of offending input an exception message carries.
EXCERPT_LIMIT = 200


def unwrap_single(group: BaseExceptionGroup[BaseException]) -> BaseException | None:
    """The one exception inside *group*, however deeply nested; None if it holds more.

    For a nursery that is an implementation detail: a single error is raised as
    itself, several stay a group (trio-websocket's ``open_websocket`` does the same).
    """
    if len(group.exceptions) != 1:
        return None
    only: BaseException = group.exceptions[0]
    if isinstance(only, BaseExceptionGroup):
        return unwrap_single(only)
    return only


def excerpt(text: str | bytes, limit: int = EXCERPT_LIMIT) -> str:
    """A bounded, printable excerpt of *text* for error messages."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text)} chars)"


class TrioAgentError(Exception):
    """Root of every exception raised by trio_agent."""


class StreamError(TrioAgentError):
    """The SSE stream of a response went wrong."""


class StreamProtocolError(StreamError):
    """An event broke the Messages API streaming protocol."""


class StreamTruncatedError(StreamError):
    """The stream ended before ``message_stop`` (or delivered no event)."""


class StreamIdleTimeoutError(StreamError):
    """No byte arrived (pings included) for longer than the idle timeout."""


class StreamStalledError(StreamError):
    """The stream stalled (no content event for too long) more often than allowed."""


class StreamLimitError(StreamError):
    """An event, an accumulated tool input or the block count exceeded its limit."""


class APIError(TrioAgentError):
    """The Messages API, or the network on the way to it, failed."""

    def __init__(self, message: str, *, request_id: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.request_id = request_id

    def __str__(self) -> str:
        if self.request_id:
            return f"{self.message} (request id {self.request_id})"
        return self.message


class APIConnectionError(APIError):
    """No response was received: connection refused, reset, or closed early."""


class APITimeoutError(APIConnectionError):
    """The request timed out before a response arrived."""


class APIStatusError(APIError):
    """An HTTP error status, or an ``error`` event inside a 200 stream."""

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None,
        error_type: str | None = None,
        request_id: str | None = None,
        body: Any = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message, request_id=request_id)
        self.status_code = status_code
        self.error_type = error_type
        self.body = body
        self.headers = headers or {}


class InvalidRequestError(APIStatusError):
    """400: the request was malformed or not acceptable."""


class PromptTooLongError(InvalidRequestError):
    """400: the prompt is longer than the model's context window."""


class AuthenticationError(APIStatusError):
    """401: the API key is missing or wrong; also raised before any request is sent
    when a client has no credentials at all (``status_code`` is then None)."""


class PermissionDeniedError(APIStatusError):
    """403: the API key may not use this resource."""


class NotFoundError(APIStatusError):
    """404: the resource (often the model) does not exist."""


class ConflictError(APIStatusError):
    """409: a conflict; retried by default."""


class RequestTooLargeError(APIStatusError):
    """413: the request body is too large."""


class RateLimitError(APIStatusError):
    """429: too many requests; retried by default."""


class InternalServerError(APIStatusError):
    """500 or another 5xx status; retried by default."""


class OverloadedError(APIStatusError):
    """529 or an in-stream ``overloaded_error``; retried by default."""


class ApprovalError(TrioAgentError):
    """Approvals that answer no pending tool call, or a prompt while calls await approval."""


class CompactionError(TrioAgentError):
    """The history cannot be compacted (nothing before the kept part), or the summary
    call gave no text."""


class ToolDefinitionError(TrioAgentError):
    """A Tool was declared wrongly: invalid JSON Schema, bad name or option."""


class ExecutorClosedError(TrioAgentError):
    """A tool was added to an executor after ``finish()`` or ``discard()``."""


class ClientClosedError(TrioAgentError):
    """A model client was used after ``aclose()`` (or after its ``async with`` block)."""


class WorkspaceError(TrioAgentError):
    """A path given to a built-in tool escapes its workspace or is malformed."""


class TranscriptError(TrioAgentError):
    """A transcript file cannot be read back into a valid history."""
