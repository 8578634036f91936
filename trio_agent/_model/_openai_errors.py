"""Typed errors from OpenAI answers: an HTTP error status, or an error inside a stream.

The HTTP status decides the type, as for Anthropic (:func:`error_from_response`):
OpenAI's 401 body says ``invalid_request_error``, yet it is an
:class:`AuthenticationError`. OpenAI's ``code`` refines it where the loop needs to
know: ``context_length_exceeded`` is a :class:`PromptTooLongError` (so the loop
compacts), and a 503 that says it is overloaded is an :class:`OverloadedError` (as
Anthropic's 529, so the loop falls back to ``fallback_model``). An error inside a 200 stream (a Responses ``error`` event or
``response.failed``, a Chat chunk holding ``error``) is typed by its ``code``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from .._exceptions import (
    APIStatusError,
    InternalServerError,
    InvalidRequestError,
    OverloadedError,
    PromptTooLongError,
    RateLimitError,
    excerpt,
)
from ._errors_http import error_from_response

__all__ = ["openai_error_from_response", "openai_stream_error", "retryable_in_stream"]

_BY_CODE: dict[str, type[APIStatusError]] = {
    "rate_limit_exceeded": RateLimitError,
    "server_error": InternalServerError,
    "internal_error": InternalServerError,
    "api_error": InternalServerError,
    "server_is_overloaded": OverloadedError,
    "overloaded": OverloadedError,
    "slow_down": OverloadedError,
    "context_length_exceeded": PromptTooLongError,
    "invalid_request_error": InvalidRequestError,
    "invalid_prompt": InvalidRequestError,
}


def _code(error: Any) -> str | None:
    if not isinstance(error, Mapping):
        return None
    error_ = cast("Mapping[str, Any]", error)
    for key in ("code", "type"):
        value = error_.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def openai_error_from_response(
    status_code: int,
    content: bytes,
    *,
    headers: Mapping[str, str] | None = None,
    request_id: str | None = None,
) -> APIStatusError:
    """The typed error for an HTTP error answer from an OpenAI(-compatible) server."""
    exc = error_from_response(status_code, content, headers=headers, request_id=request_id)
    body = exc.body
    error = cast("Mapping[str, Any]", body).get("error") if isinstance(body, Mapping) else None
    code = error.get("code") if isinstance(error, Mapping) else None  # pyright: ignore[reportUnknownVariableType]
    message = error.get("message") if isinstance(error, Mapping) else None  # pyright: ignore[reportUnknownVariableType]
    if (
        status_code == 503
        and not isinstance(exc, OverloadedError)
        and (
            _BY_CODE.get(code if isinstance(code, str) else "") is OverloadedError
            or (isinstance(message, str) and "overloaded" in message.lower())
        )
    ):
        # OpenAI says "overloaded" with a 503 (Anthropic with a 529): the same error,
        # so the loop's fallback after 3 overloaded answers works over OpenAI too.
        return _retyped(exc, OverloadedError)
    if code == "context_length_exceeded" and not isinstance(exc, PromptTooLongError):
        return _retyped(exc, PromptTooLongError)
    return exc


def _retyped(exc: APIStatusError, kind: type[APIStatusError]) -> APIStatusError:
    """*exc* as a *kind*, every field kept."""
    return kind(
        exc.message,
        status_code=exc.status_code,
        error_type=exc.error_type,
        request_id=exc.request_id,
        body=exc.body,
        headers=exc.headers,
    )


def openai_stream_error(error: Any, event: Mapping[str, Any]) -> APIStatusError:
    """The typed error for an error reported inside a 200 stream.

    Args:
        error: the error object (``{"code", "message", ...}``).
        event: the whole event, kept as the exception's ``body``.
    """
    code = _code(error)
    message: Any = (
        cast("Mapping[str, Any]", error).get("message") if isinstance(error, Mapping) else None
    )
    if not isinstance(message, str):
        message = f"error event: {excerpt(repr(dict(event)))}"
    cls = _BY_CODE.get(code or "", APIStatusError)
    return cls(f"{code or 'error'}: {message}", status_code=None, error_type=code, body=dict(event))


def retryable_in_stream(exc: APIStatusError) -> bool:
    """Whether an in-stream error is worth another attempt (429, 5xx, overloaded)."""
    return isinstance(exc, RateLimitError | InternalServerError | OverloadedError)
