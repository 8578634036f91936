"""What trio_agent knows about models: context windows, prices, output caps, lifecycle.

One place, read by the loop (the ``max_tokens`` escalation, auto-compaction, the
deprecation warning, the cost of each call) and the session (``Session.cost``).

Where each datum comes from:

- **Context windows and prices**: `genai-prices <https://github.com/pydantic/genai-prices>`_
  (pydantic's maintained price and model database), its data snapshot bundled in the
  wheel. trio_agent never starts its ``UpdatePrices`` thread, so nothing is fetched at
  run time: the data is the installed version's (upgrade the package to refresh it).
- **Output caps** (the largest ``max_tokens``): :data:`OUTPUT_CAPS`, a small table from
  Anthropic's *Models overview* page (platform.claude.com/docs/en/about-claude/models/overview,
  the "Max output" row), as read on 2026-09-22; genai-prices has no output caps.
- **Deprecations and retirements**: :data:`LIFECYCLE`, a small table from Anthropic's
  *Model deprecations* page and the official SDK's ``anthropic/_data/deprecated_models.py``
  (2.15.0), each entry with its date; and genai-prices' ``deprecated`` flag (no date)
  for every other provider's models.

A model no source knows still runs, with safe defaults: no ``max_tokens`` escalation
above what was asked, auto-compaction at :data:`CONSERVATIVE_CONTEXT_WINDOW`, and no
cost (``None``); :func:`check_model` says so once per model in the
``trio_agent.models`` log, and warns once about a deprecated or retired model.
"""

from __future__ import annotations

import datetime as _dt
import functools
import logging
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar

import attrs

from ._messages import Usage

if TYPE_CHECKING:
    from genai_prices.types import ModelInfo, Provider

__all__ = [
    "CONSERVATIVE_CONTEXT_WINDOW",
    "DEFAULT_MODEL",
    "LIFECYCLE",
    "OUTPUT_CAPS",
    "Lifecycle",
    "ModelDeprecationWarning",
    "check_model",
    "context_window",
    "cost_usd",
    "lifecycle",
    "output_cap",
    "price_provider",
]

logger = logging.getLogger("trio_agent.models")

_T = TypeVar("_T")

#: The model the CLI, the README and the examples use: a current one.
DEFAULT_MODEL: Final = "claude-sonnet-5-5"

#: The context window assumed for a model no source knows (auto-compaction fires at
#: ``auto_compact`` times this): the smallest window of the current mainstream models
#: (GPT-4o's 128k), so compaction comes early rather than after a prompt-too-long error.
CONSERVATIVE_CONTEXT_WINDOW: Final = 128_000

#: Output-token caps by model-name prefix (the longest matching prefix wins). Source:
#: Anthropic's Models overview page ("Max output"), read 2026-09-22, for the models it
#: lists (Fable 5.x, Opus 5/5.5, Sonnet 5/5.5, Haiku 5.5: 128k; Opus 4.6/4.7: 128k;
#: Sonnet 4.6, Haiku 4.5: 64k); the older entries are the page's values for legacy
#: models as this table held them before. A model not listed (Opus 4.8 falls under
#: ``claude-opus-4``, 32k, an under-estimate: a smaller escalation, never a 400) gets no
#: escalation past the caller's ``max_tokens`` when no prefix matches.
OUTPUT_CAPS: Final[Mapping[str, int]] = {
    "claude-fable-5": 128_000,
    "claude-opus-5": 128_000,
    "claude-sonnet-5": 128_000,
    "claude-haiku-5": 128_000,
    "claude-opus-4-7": 128_000,
    "claude-opus-4-6": 128_000,
    "claude-opus-4-5": 64_000,
    "claude-opus-4-1": 32_000,
    "claude-opus-4": 32_000,
    "claude-sonnet-4": 64_000,
    "claude-haiku-4": 64_000,
    "claude-3-7-sonnet": 64_000,
    "claude-3-5-sonnet": 8192,
    "claude-3-5-haiku": 8192,
    "claude-3-opus": 4096,
    "claude-3-haiku": 4096,
}


@attrs.frozen
class Lifecycle:
    """A model's lifecycle stage once it is no longer active, and its date.

    Attributes:
        state: ``"deprecated"`` (still answers, retires on *date*) or ``"retired"``
            (requests fail since *date*).
        date: the retirement date, or None when the source gives none.
        source: where this comes from.
    """

    state: Literal["deprecated", "retired"]
    date: _dt.date | None
    source: str


_PAGE = "Anthropic's Model deprecations page"
_SDK = "the anthropic SDK 2.15.0 (_data/deprecated_models.py)"

#: Deprecated and retired models by name prefix (longest match wins), with their
#: retirement dates, as Anthropic's Model deprecations page and the official SDK's
#: list give them (read 2026-09-22; claude-sonnet-4-5's date is issue 22's).
LIFECYCLE: Final[Mapping[str, Lifecycle]] = {
    "claude-opus-4-5": Lifecycle("deprecated", _dt.date(2027, 1, 22), _SDK),
    "claude-mythos-preview": Lifecycle("deprecated", _dt.date(2026, 6, 30), _SDK),
    "claude-sonnet-4-5": Lifecycle("retired", _dt.date(2026, 11, 30), _PAGE),
    "claude-opus-4-1": Lifecycle("retired", _dt.date(2026, 8, 5), _PAGE),
    "claude-opus-4-0": Lifecycle("retired", _dt.date(2026, 6, 15), _PAGE),
    "claude-opus-4-2025": Lifecycle("retired", _dt.date(2026, 6, 15), _PAGE),
    "claude-4-opus": Lifecycle("retired", _dt.date(2026, 6, 15), _PAGE),
    "claude-sonnet-4-0": Lifecycle("retired", _dt.date(2026, 6, 15), _PAGE),
    "claude-sonnet-4-2025": Lifecycle("retired", _dt.date(2026, 6, 15), _PAGE),
    "claude-4-sonnet": Lifecycle("retired", _dt.date(2026, 6, 15), _PAGE),
    "claude-3-7-sonnet": Lifecycle("retired", _dt.date(2026, 2, 19), _PAGE),
    "claude-3-5-sonnet": Lifecycle("retired", _dt.date(2025, 10, 28), _PAGE),
    "claude-3-opus": Lifecycle("retired", _dt.date(2026, 1, 5), _PAGE),
    "claude-3-sonnet": Lifecycle("retired", _dt.date(2025, 7, 21), _PAGE),
    "claude-2": Lifecycle("retired", _dt.date(2025, 7, 21), _PAGE),
}


class ModelDeprecationWarning(DeprecationWarning):
    """The model of a request is deprecated or retired (as the official SDK warns)."""


def _longest_prefix(table: Mapping[str, _T], model: str) -> _T | None:
    best: str | None = None
    for prefix in table:
        if model.startswith(prefix) and (best is None or len(prefix) > len(best)):
            best = prefix
    return None if best is None else table[best]


# -- genai-prices ---------------------------------------------------------------


@functools.cache
def _snapshot() -> Any:
    # Imported on first use: genai-prices loads pydantic and a large table (~0.25 s),
    # which `import trio_agent` should not pay. The bundled snapshot only: no
    # UpdatePrices, so no network.
    from genai_prices import data_snapshot

    return data_snapshot.get_snapshot()


@functools.lru_cache(maxsize=256)
def _lookup(model: str, provider: str | None) -> tuple[Provider, ModelInfo] | None:
    try:
        return _snapshot().find_provider_model(model, None, provider, None)
    except LookupError:
        return None


@functools.lru_cache(maxsize=64)
def _provider_at(url: str) -> str | None:
    try:
        return _snapshot().find_provider(None, None, url).id
    except LookupError:
        return None


def price_provider(client: object) -> str | None:
    """The genai-prices provider id whose prices apply to *client*'s calls.

    The client's ``url`` (as :class:`~trio_agent.AnthropicClient` and
    :class:`~trio_agent.OpenAIClient` have) decides when it is an API genai-prices
    knows (``api.anthropic.com``, ``api.openai.com``, Groq, OpenRouter, Bedrock...); a
    Messages API at another address (a proxy, a test server) is priced as Anthropic,
    an OpenAI-shaped one as OpenAI. Otherwise (a wrapper, a custom client): None, and
    the provider is the model's maker, from the model name.
    """
    url = getattr(client, "url", None)
    if not isinstance(url, str):
        return None
    known = _provider_at(url)
    if known is not None:
        return known
    path = url.split("?", 1)[0].rstrip("/")
    if path.endswith("/messages"):
        return "anthropic"
    if path.endswith(("/responses", "/chat/completions")):
        return "openai"
    return None


# -- the data -------------------------------------------------------------------

_checked: set[str] = set()


def output_cap(model: str, override: int | None = None) -> int | None:
    """The output-token cap of *model*: *override* if given, else :data:`OUTPUT_CAPS`'
    (longest matching prefix), else None (then nothing is escalated)."""
    if override is not None:
        return override
    return _longest_prefix(OUTPUT_CAPS, model)


def context_window(model: str, override: int | None = None) -> int:
    """The context window of *model* in tokens: *override*, else genai-prices', else
    :data:`CONSERVATIVE_CONTEXT_WINDOW`."""
    if override is not None:
        return override
    found = _lookup(model, None)
    window = found[1].context_window if found is not None else None
    return CONSERVATIVE_CONTEXT_WINDOW if window is None else window


def check_model(model: str, provider: str | None = None) -> None:
    """Before the first request naming *model*, once per model per process: warn
    :class:`ModelDeprecationWarning` (and log) if it is deprecated or retired, and log
    what no source knows about it and the safe default used instead."""
    if model in _checked:
        return
    _checked.add(model)
    missing: list[str] = []
    if _longest_prefix(OUTPUT_CAPS, model) is None:
        missing.append("no output cap, so no max_tokens escalation above what was asked")
    found = _lookup(model, provider)
    if found is None or found[1].context_window is None:
        missing.append(
            "no context window, so auto-compaction assumes a conservative "
            f"{CONSERVATIVE_CONTEXT_WINDOW}-token one"
        )
    if found is None:
        missing.append("no price, so its cost_usd is None")
    if missing:
        logger.warning(
            "model %r is unknown to trio_agent's model data (genai-prices, the output-cap "
            "table): %s",
            model,
            "; ".join(missing),
        )
    _warn_if_deprecated(model)


def lifecycle(model: str) -> Lifecycle | None:
    """Whether *model* is deprecated or retired (None: active, or unknown)."""
    known = _longest_prefix(LIFECYCLE, model)
    if known is not None:
        return known
    found = _lookup(model, None)
    if found is not None and found[1].deprecated:
        return Lifecycle("deprecated", None, "genai-prices")
    return None


def _warn_if_deprecated(model: str) -> None:
    stage = lifecycle(model)
    if stage is None:
        return
    if stage.state == "retired":
        when = f"was retired on {stage.date:%Y-%m-%d}: requests naming it fail"
    elif stage.date is not None:
        when = f"is deprecated and will be retired on {stage.date:%Y-%m-%d}"
    else:
        when = "is deprecated"
    message = (
        f"The model {model!r} {when} (source: {stage.source}). Please migrate to a newer "
        f"model, e.g. {DEFAULT_MODEL!r}; see "
        "https://platform.claude.com/docs/en/about-claude/model-deprecations"
    )
    logger.warning("%s", message)
    warnings.warn(message, ModelDeprecationWarning, stacklevel=3)


# -- cost -----------------------------------------------------------------------


def _cache_writes(usage: Usage) -> dict[str, int]:
    written = usage.cache_creation_input_tokens or 0
    split = usage.extra.get("cache_creation")
    if isinstance(split, Mapping):
        parts: Mapping[str, Any] = split  # pyright: ignore[reportUnknownVariableType]
        five = parts.get("ephemeral_5m_input_tokens")
        hour = parts.get("ephemeral_1h_input_tokens")
        if isinstance(five, int) and isinstance(hour, int) and five + hour == written:
            return {
                "cache_write_tokens": written,
                "cache_write_5m_tokens": five,
                "cache_write_1h_tokens": hour,
            }
    return {"cache_write_tokens": written}


def cost_usd(usage: Usage, model: str, provider: str | None = None) -> float | None:
    """The USD cost of one call's *usage* on *model*, at genai-prices' published price
    for *provider* (None: the model's maker), or None when no price is known.

    The tokens priced: input, output, cache writes (5-minute and 1-hour, from the
    usage's ``cache_creation`` split when the API sent it, else all at the 5-minute
    rate), cache reads, and web-search requests. A usage the price has no rate for
    (a long-context tier the data lacks...) is None too: never a guess.
    """
    found = _lookup(model, provider)
    if found is None:
        return None
    from genai_prices import Usage as PriceUsage

    read = usage.cache_read_input_tokens or 0
    writes = _cache_writes(usage)
    counts: dict[str, int] = {
        # genai-prices counts the cache tokens inside input_tokens; the API does not.
        "input_tokens": usage.input_tokens + (usage.cache_creation_input_tokens or 0) + read,
        "output_tokens": usage.output_tokens,
        "cache_read_tokens": read,
        **writes,
    }
    server = usage.extra.get("server_tool_use")
    if isinstance(server, Mapping):
        searches = server.get("web_search_requests")  # pyright: ignore[reportUnknownVariableType]
        if isinstance(searches, int) and searches:
            counts["web_searches"] = searches
    try:
        price = found[1].calc_price(PriceUsage(**counts), found[0])
    except (ValueError, TypeError, ArithmeticError):
        return None
    return float(price.total_price)
