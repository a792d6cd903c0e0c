"""The scripted server's prompt cache, as OpenAI's automatic prefix caching behaves, so that
cached-token accounting is tested end to end against the real SDKs' ``usage`` fields.

OpenAI (Chat Completions and Responses): a prompt of at least 1024 tokens is cached in
128-token steps; a later request of the same model (and the same ``prompt_cache_key``, when
given) whose prompt starts with an earlier one's reports the shared prefix as
``cached_tokens``, rounded down to a 128-token step (and 0 below 1024). Tokens are the server's
estimate (4 characters each), over the request's text in order: system, then every message.

Anthropic (Messages) caches only up to explicit ``cache_control`` breakpoints: a request whose
tools or system blocks carry one caches the tools and the system prompt (at least 1024 tokens):
the first such request reports them as ``cache_creation_input_tokens``, later ones with the
same model, tools and system as ``cache_read_input_tokens``. Breakpoints inside messages are
not simulated.

Usage::

    cache = PromptCache()
    cached = cache.lookup(api="chat", model="m", key="", text=prompt_text)   # then remembered
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping
from typing import Any

from skillopt.models.prefix import chained_digests

__all__ = ["MIN_CACHED_TOKENS", "STEP_TOKENS", "PromptCache"]

MIN_CACHED_TOKENS = 1024
STEP_TOKENS = 128
_CHARS_PER_TOKEN = 4
_MAX_ENTRIES = 200_000


class PromptCache:
    """Prefix digests seen per (model, cache key), thread-safe and bounded."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[tuple[str, str], set[bytes | str]] = {}
        self._size = 0

    def lookup(self, *, model: str, key: str, text: str) -> int:
        """Cached tokens of a request whose prompt is ``text``; its prefixes are remembered."""
        if len(text) // (STEP_TOKENS * _CHARS_PER_TOKEN) * STEP_TOKENS < MIN_CACHED_TOKENS:
            return 0
        digests = chained_digests(text, STEP_TOKENS * _CHARS_PER_TOKEN)
        with self._lock:
            seen = self._seen.setdefault((model, key), set())
            hits = 0
            for d in digests:
                if d not in seen:
                    break
                hits += 1
            if self._size + len(digests) > _MAX_ENTRIES:
                self._seen = {(model, key): seen}
                self._size = len(seen)
            before = len(seen)
            seen.update(digests)
            self._size += len(seen) - before
        cached = hits * STEP_TOKENS
        return cached if cached >= MIN_CACHED_TOKENS else 0

    def anthropic(self, *, model: str, body: Mapping[str, Any]) -> tuple[int, int]:
        """``(read, write)`` tokens of a Messages request (see the module docstring)."""
        system, tools = body.get("system"), body.get("tools") or []
        blocks = system if isinstance(system, list) else []
        marked = any(isinstance(b, Mapping) and b.get("cache_control") for b in [*blocks, *tools])
        if not marked:
            return 0, 0
        prefix = json.dumps([tools, system], sort_keys=True, default=str)
        tokens = -(-len(prefix) // _CHARS_PER_TOKEN)
        if tokens < MIN_CACHED_TOKENS:
            return 0, 0
        digest = hashlib.sha256(prefix.encode("utf-8", "surrogatepass")).hexdigest()
        with self._lock:
            seen = self._seen.setdefault((model, "anthropic"), set())
            if digest in seen:
                return tokens, 0
            seen.add(digest)
            self._size += 1
        return 0, tokens
