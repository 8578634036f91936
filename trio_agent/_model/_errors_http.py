"""Typed errors from API answers: an HTTP error status, or an in-stream ``error`` event.

Pure and synchronous; the client calls these with what it read from the response.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast

from .._exceptions import (
    APIStatusError,
    AuthenticationError,
    ConflictError,
    InternalServerError,
    InvalidRequestError,
    NotFoundError,
    OverloadedError,
    PermissionDeniedError,
    PromptTooLongError,
    RateLimitError,
    RequestTooLargeError,
    excerpt,
)

__all__ = ["RETRYABLE_ERROR_TYPES", "error_from_event", "error_from_response"]

_BY_STATUS: dict[int, type[APIStatusError]] = {
    400: InvalidRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    413: RequestTooLargeError,
    429: RateLimitError,
    529: OverloadedError,
}

_BY_ERROR_TYPE: dict[str, type[APIStatusError]] = {
    "invalid_request_error": InvalidRequestError,
    "authentication_error": AuthenticationError,
    "permission_error": PermissionDeniedError,
    "not_found_error": NotFoundError,
    "request_too_large": RequestTooLargeError,
    "rate_limit_error": RateLimitError,
    "api_error": InternalServerError,
    "timeout_error": InternalServerError,
    "overloaded_error": OverloadedError,
}

#: In-stream error types that are worth another attempt (the HTTP equivalents of
#: 429, 5xx and 529).
RETRYABLE_ERROR_TYPES = frozenset(
    {"rate_limit_error", "api_error", "timeout_error", "overloaded_error"}
)


def _is_prompt_too_long(message: str) -> bool:
    return "prompt is too long" in message.lower()


def _error_fields(body: Any) -> tuple[str | None, str | None]:
    """(error type, message) from an API error body ``{"error": {"type", "message"}}``."""
    if not isinstance(body, Mapping):
        return None, None
    error = cast("Mapping[str, Any]", body).get("error")
    if not isinstance(error, Mapping):
        return None, None
    etype = cast("Mapping[str, Any]", error).get("type")
    message = cast("Mapping[str, Any]", error).get("message")
    return (
        etype if isinstance(etype, str) else None,
        message if isinstance(message, str) else None,
    )


def error_from_response(
    status_code: int,
    content: bytes,
    *,
    headers: Mapping[str, str] | None = None,
    request_id: str | None = None,
) -> APIStatusError:
    """The typed error for an HTTP error answer; a body that is not JSON is kept as text."""
    body: Any
    try:
        body = json.loads(content)
    except (ValueError, RecursionError):  # hostile nesting is just a non-JSON body
        body = content.decode("utf-8", "replace")
    error_type, message = _error_fields(body)
    if message is None:
        message = f"HTTP {status_code}: {excerpt(body if isinstance(body, str) else repr(body))}"
    else:
        message = f"HTTP {status_code} {error_type or 'error'}: {message}"
    if isinstance(body, Mapping) and request_id is None:
        rid = cast("Mapping[str, Any]", body).get("request_id")
        request_id = rid if isinstance(rid, str) else None
    cls = _BY_STATUS.get(status_code)
    if cls is None:
        cls = InternalServerError if status_code >= 500 else APIStatusError
    if cls is InvalidRequestError and _is_prompt_too_long(message):
        cls = PromptTooLongError
    return cls(
        message,
        status_code=status_code,
        error_type=error_type,
        request_id=request_id,
        body=body,
        headers=dict(headers or {}),
    )


def error_from_event(event: Mapping[str, Any], *, request_id: str | None = None) -> APIStatusError:
    """The typed error for an in-stream ``error`` event (the HTTP status was 200).

    ``status_code`` is ``None``: the HTTP answer itself succeeded.
    """
    error_type, message = _error_fields(event)
    if message is None:
        message = f"error event: {excerpt(repr(event))}"
    else:
        message = f"{error_type or 'error'}: {message}"
    cls = _BY_ERROR_TYPE.get(error_type or "", APIStatusError)
    if cls is InvalidRequestError and _is_prompt_too_long(message):
        cls = PromptTooLongError
    return cls(
        message,
        status_code=None,
        error_type=error_type,
        request_id=request_id,
        body=dict(event),
    )
