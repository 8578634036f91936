"""Which model client ``trio-agent run`` uses: ``--provider`` or a ``provider:`` prefix.

``--model openai:gpt-5`` (or ``--provider openai --model gpt-5``) talks to OpenAI's
Responses API, ``openai-chat:`` to Chat Completions (OpenAI-compatible local servers
too, with ``--base-url http://localhost:8000/v1``); anything else to Anthropic.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .._model import AnthropicClient, ModelClient, OpenAIClient

__all__ = ["PROVIDERS", "Endpoint", "endpoint_of", "provider_client", "provider_of"]

PROVIDERS = ("anthropic", "openai", "openai-chat")


def provider_of(provider: str | None, model: str) -> tuple[str, str]:
    """(provider, model name) from ``--provider`` and a ``provider:`` model prefix.

    Raises:
        ValueError: an unknown provider, or one the prefix contradicts.
    """
    prefix, sep, rest = model.partition(":")
    if sep and prefix in PROVIDERS:
        if provider is not None and provider != prefix:
            raise ValueError(f"--provider {provider} contradicts the model prefix {prefix}:")
        return prefix, rest
    provider = provider or "anthropic"
    if provider not in PROVIDERS:
        raise ValueError(f"unknown provider {provider!r} (one of {', '.join(PROVIDERS)})")
    return provider, model


def provider_client(
    provider: str | None, model: str, base_url: str | None
) -> tuple[ModelClient, str]:
    """The client and the model name (its prefix removed) for the command line.

    Raises:
        AuthenticationError: OpenAI was chosen and no key is configured.
        ValueError: an unknown provider.
    """
    provider, model = provider_of(provider, model)
    if provider == "anthropic":
        return AnthropicClient(base_url=base_url), model
    api = "responses" if provider == "openai" else "chat"
    return OpenAIClient(base_url=base_url, api=api), model


class Endpoint(NamedTuple):
    """Where a client sends its requests, and the variable that sets its base URL."""

    url: str
    variable: str


def endpoint_of(client: Any) -> Endpoint | None:
    """The URL *client* posts to and the variable naming its base URL (None: unknown).

    ``OpenAIClient`` posts to ``{base_url}/responses`` or ``{base_url}/chat/completions``
    (its base URL holds the API version, ``OPENAI_BASE_URL``); ``AnthropicClient`` to
    ``{base_url}/v1/messages`` (``ANTHROPIC_BASE_URL``).
    """
    base_url = getattr(client, "base_url", None)
    if not isinstance(base_url, str):
        return None
    base_url = base_url.rstrip("/")
    if isinstance(client, OpenAIClient):
        path = "/responses" if client.api == "responses" else "/chat/completions"
        return Endpoint(base_url + path, "OPENAI_BASE_URL")
    return Endpoint(base_url + "/v1/messages", "ANTHROPIC_BASE_URL")
