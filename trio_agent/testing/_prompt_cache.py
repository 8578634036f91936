"""An emulation of the Messages API's prompt cache, for a :class:`ScriptedModel`.

``ScriptedModel(answers, prompt_cache=PromptCache())`` answers each Messages API
request with the usage the API would report for it: the prompt is read in the API's
order (tools, system, messages), block by block, with the ``cache_control`` marks
left out of the key; each marked block (and the last block, for a top-level
``cache_control``) whose prefix is at least :attr:`PromptCache.min_tokens` long is
written to the cache for its TTL, in Trio's clock (virtual time under a
``MockClock``); a request reads the longest cached prefix that ends at one of its
breakpoints or up to :attr:`PromptCache.lookback` blocks before one, and a read
refreshes the entry's TTL. Tokens are counted from the blocks' JSON
(:attr:`PromptCache.tokens`), not by a tokenizer: the figures are the emulation's,
consistent from one request to the next.

Example::

    cache = PromptCache()
    model = ScriptedModel(answers, prompt_cache=cache)
    ...  # run a session against model.client() or serve_scripted_model(model)
    assert all(use.read >= 0.9 * use.prompt for use in cache.uses[1:])
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any, cast, final

import attrs

from .._messages import Usage

__all__ = ["CacheUse", "PromptCache"]

_TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}


def estimate_tokens(text: str) -> int:
    """About four characters a token (the API's rule of thumb for English)."""
    return max(1, (len(text) + 3) // 4)


def _unmarked(value: Any) -> Any:
    """*value* without any ``cache_control`` key, at any depth."""
    if isinstance(value, Mapping):
        items = cast("Mapping[str, Any]", value).items()
        return {k: _unmarked(v) for k, v in items if k != "cache_control"}
    if isinstance(value, list):
        return [_unmarked(v) for v in cast("list[Any]", value)]
    return value


def _mark(value: Any) -> str | None:
    """The TTL of the breakpoint on *value* (a block, or a tool_result's blocks)."""
    if not isinstance(value, Mapping):
        return None
    block = cast("Mapping[str, Any]", value)
    ttls = [block["cache_control"]] if "cache_control" in block else []
    inner = block.get("content")
    if isinstance(inner, list):
        ttls += [
            cast("Mapping[str, Any]", b)["cache_control"]
            for b in cast("list[Any]", inner)
            if isinstance(b, Mapping) and "cache_control" in b
        ]
    if not ttls:
        return None
    longest = "5m"
    for mark in ttls:
        if isinstance(mark, Mapping) and cast("Mapping[str, Any]", mark).get("ttl") == "1h":
            longest = "1h"
    return longest


def _items(body: Mapping[str, Any]) -> list[tuple[Any, str | None]]:
    """The prompt's blocks in the cache's order, each as (key, its breakpoint TTL)."""
    items: list[tuple[Any, str | None]] = []
    for tool in body.get("tools") or ():
        items.append((("tool", _unmarked(tool)), _mark(tool)))
    system = body.get("system")
    if isinstance(system, str):
        # A string is the same prompt as one text block of it.
        system = [{"type": "text", "text": system}] if system else []
    for block in cast("list[Any]", system or []):
        items.append((("system", _unmarked(block)), _mark(block)))
    for message in body.get("messages") or ():
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for b, block in enumerate(cast("list[Any]", content or [])):
            items.append(((message.get("role"), b == 0, _unmarked(block)), _mark(block)))
    return items


@attrs.frozen
class CacheUse:
    """What one request read from and wrote to the emulated cache (in tokens).

    Attributes:
        prompt: the whole prompt (``read + written + uncached``).
        read: ``cache_read_input_tokens``.
        written: ``cache_creation_input_tokens`` (``written_1h`` of them for 1 hour).
        uncached: ``input_tokens``, after the last breakpoint.
        time: the clock when the request came.
    """

    prompt: int
    read: int
    written: int
    written_1h: int
    uncached: int
    time: float


@final
@attrs.define(eq=False)
class PromptCache:
    """The emulated cache of one :class:`ScriptedModel` (see the module docstring).

    Attributes:
        min_tokens: the shortest prefix a breakpoint caches (1024 for Sonnet and Opus).
        lookback: how many blocks before a breakpoint a cached prefix is looked for.
        tokens: the token count of one block's JSON.
        uses: one :class:`CacheUse` per Messages API request, in order.
    """

    min_tokens: int = 1024
    lookback: int = 20
    tokens: Callable[[str], int] = estimate_tokens
    uses: list[CacheUse] = attrs.field(factory=list[CacheUse], init=False)
    #: The prefix key of each entry: (when it expires, its TTL in seconds).
    _entries: dict[bytes, tuple[float, float]] = attrs.field(
        factory=dict[bytes, tuple[float, float]], init=False
    )

    def clear(self) -> None:
        """Forget every entry (as the API's eviction may)."""
        self._entries.clear()

    def usage(self, body: Mapping[str, Any], now: float, *, output_tokens: int) -> Usage:
        """The usage the API reports for request *body* at *now*; records the writes."""
        items = _items(body)
        seed = hashlib.sha256(str(body.get("model", "")).encode())
        keys: list[bytes] = []
        ends: list[int] = []  # tokens of the prompt up to and including each block
        total = 0
        for key, _ in items:
            text = json.dumps(key, ensure_ascii=False, separators=(",", ":"), sort_keys=False)
            seed.update(text.encode())
            keys.append(seed.copy().digest())
            total += self.tokens(text)
            ends.append(total)
        marks = [(i, ttl) for i, (_, ttl) in enumerate(items) if ttl is not None]
        top = body.get("cache_control")
        if isinstance(top, Mapping) and items:
            marks.append((len(items) - 1, _mark({"cache_control": top}) or "5m"))
            marks.sort()
        cacheable = [(i, ttl) for i, ttl in marks if ends[i] >= self.min_tokens]
        read, hit = 0, None
        for i, _ in cacheable:
            for j in range(i, max(i - self.lookback, -1), -1):
                entry = self._entries.get(keys[j])
                if entry is not None and entry[0] > now:
                    if ends[j] > read:
                        read, hit = ends[j], j
                    break
        if hit is not None:  # a read refreshes the entry, for the TTL it was written with
            ttl_seconds = self._entries[keys[hit]][1]
            self._entries[keys[hit]] = (now + ttl_seconds, ttl_seconds)
        written = written_1h = 0
        covered = read
        for i, ttl in cacheable:
            if ends[i] > covered:
                written += ends[i] - covered
                written_1h += (ends[i] - covered) if ttl == "1h" else 0
                covered = ends[i]
            seconds = _TTL_SECONDS[ttl]
            old = self._entries.get(keys[i])
            if old is None or old[0] < now + seconds:
                self._entries[keys[i]] = (now + seconds, seconds)
        uncached = total - covered
        self.uses.append(CacheUse(total, read, written, written_1h, uncached, now))
        return Usage(
            input_tokens=uncached,
            output_tokens=output_tokens,
            cache_creation_input_tokens=written,
            cache_read_input_tokens=read,
            extra={
                "cache_creation": {
                    "ephemeral_5m_input_tokens": written - written_1h,
                    "ephemeral_1h_input_tokens": written_1h,
                }
            },
        )
