"""How much of a run's prompt input repeats a prefix already sent: the *cacheable prefix share*.

Providers bill a repeated prompt prefix at a discount (OpenAI caches prefixes automatically,
Anthropic up to ``cache_control`` breakpoints), so what a run costs depends on whether its
prompts put what repeats (tools, system text, the skill, fixed instructions) before what changes
(the task, files, history). This module measures it from the recorded exchanges:

- :func:`prompt_prefix` reduces one request (any of the three wire APIs, or our neutral form) to
  its prompt text in the order providers cache it (tools, system/instructions, then the
  conversation) and that text to a chain of digests, one per 512-character block, each covering
  everything before it. The gateway stores it with each exchange (a few bytes per block).
- :class:`PrefixMeter` walks a run's exchanges in order: a request's leading blocks whose
  digests an earlier request *to the same model* already produced are cacheable; their share of
  the request's characters, times its reported input tokens, is its cacheable input.

``cacheable_prefix_share`` = cacheable input tokens / input tokens (``None`` without exchanges).
It measures what repeats, not what a provider actually cached (minimum lengths, eviction and
routing decide that; the provider's ``cached_tokens`` report it).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from skillopt.models.base import ChatRequest

__all__ = [
    "BLOCK_CHARS",
    "PrefixMeter",
    "PromptPrefix",
    "chained_digests",
    "chat_payload",
    "prefix_report",
    "prompt_prefix",
    "prompt_text",
]

#: Characters per block (about 128 tokens: the step in which OpenAI caches).
BLOCK_CHARS = 512
_DIGEST_BYTES = 8
#: Keys of a request body that hold prompt input, in the order providers cache them.
_PROMPT_KEYS = ("tools", "system", "instructions", "messages", "input")


def chained_digests(text: str, block_chars: int = BLOCK_CHARS) -> list[bytes]:
    """One digest per whole block of ``text``, each over every block up to it (so equal digests
    mean equal prefixes)."""
    h = hashlib.blake2b(digest_size=_DIGEST_BYTES)
    out = []
    for i in range(len(text) // block_chars):
        h.update(text[i * block_chars : (i + 1) * block_chars].encode("utf-8", "surrogatepass"))
        out.append(h.copy().digest())
    return out


def prompt_text(payload: Mapping[str, Any]) -> str:
    """A request's prompt input as one string, stable parts first (tools, system text, then the
    conversation), whatever the API: Chat Completions, Responses, Anthropic Messages, or the
    gateway's neutral form of an in-service agent's call."""
    return "".join(
        json.dumps(payload[k], sort_keys=True, ensure_ascii=False, default=str)
        for k in _PROMPT_KEYS
        if payload.get(k)
    )


@dataclass(frozen=True, slots=True)
class PromptPrefix:
    """One request's prompt length and its chain of block digests."""

    chars: int
    chain: bytes  # the digests, concatenated

    def to_json(self) -> dict[str, Any]:
        return {"chars": self.chars, "chain": base64.b64encode(self.chain).decode("ascii")}

    @classmethod
    def from_json(cls, data: Any) -> PromptPrefix | None:
        """The prefix an exchange record carries; None when absent or malformed."""
        if not isinstance(data, Mapping):
            return None
        try:
            return cls(int(data["chars"]), base64.b64decode(str(data["chain"]), validate=True))
        except (KeyError, TypeError, ValueError):
            return None

    def digests(self) -> list[bytes]:
        n = _DIGEST_BYTES
        return [self.chain[i : i + n] for i in range(0, len(self.chain) - n + 1, n)]


def chat_payload(request: ChatRequest) -> dict[str, Any]:
    """The prompt input of a provider-neutral request as JSON (``messages``, ``tools``): what
    the gateway records and keys recordings by, and what :func:`prompt_prefix` reads."""
    return {
        "messages": [
            {
                "role": m.role,
                "content": m.content,
                "name": m.name,
                "tool_call_id": m.tool_call_id,
                "tool_calls": [dict(c) for c in m.tool_calls],
            }
            for m in request.messages
        ],
        "tools": [
            {"name": t.name, "description": t.description, "parameters": dict(t.parameters)}
            for t in request.tools
        ],
    }


def prompt_prefix(payload: Mapping[str, Any]) -> PromptPrefix:
    """The :class:`PromptPrefix` of one request body."""
    text = prompt_text(payload)
    return PromptPrefix(len(text), b"".join(chained_digests(text)))


class PrefixMeter:
    """Counts, over requests in the order they were sent, input tokens and how many of them
    repeat a prefix an earlier request to the same model sent.

    Memory is bounded: after ``max_digests`` distinct digests no new ones are remembered (hits
    on known ones still count), so a very long run's share is then a lower bound.
    """

    def __init__(self, *, max_digests: int = 2_000_000) -> None:
        self._seen: dict[str, set[bytes]] = {}
        self._size = 0
        self.max_digests = max_digests
        self.input_tokens = 0
        self.cacheable_tokens = 0.0

    def observe(self, model: str, prefix: PromptPrefix, prompt_tokens: int) -> None:
        """One request of ``prompt_tokens`` input tokens (0 = unreported: estimated from its
        characters, 4 a token)."""
        tokens = prompt_tokens if prompt_tokens > 0 else -(-prefix.chars // 4)
        digests = prefix.digests()
        seen = self._seen.setdefault(model, set())
        hits = 0
        for d in digests:
            if d not in seen:
                break
            hits += 1
        if prefix.chars:
            self.cacheable_tokens += tokens * min(1.0, hits * BLOCK_CHARS / prefix.chars)
        self.input_tokens += tokens
        fresh = digests[hits:]  # chained: after the first unseen block, every later one is new
        if self._size + len(fresh) <= self.max_digests:
            seen.update(fresh)
            self._size += len(fresh)

    def observe_exchanges(self, exchanges: Iterable[Mapping[str, Any]], *, model: str = "") -> None:
        """A rollout's gateway exchange records (``trace.notes["model_exchanges"]``), in order;
        records without a prefix (older rows, failed calls) are skipped."""
        for ex in exchanges:
            prefix = PromptPrefix.from_json(ex.get("prefix"))
            if prefix is None:
                continue
            usage = ex.get("usage") or {}
            tokens = usage.get("prompt_tokens", 0) if isinstance(usage, Mapping) else 0
            self.observe(str(ex.get("model") or model), prefix, int(tokens or 0))

    @property
    def share(self) -> float | None:
        """Cacheable input tokens / input tokens; None before any request."""
        return round(self.cacheable_tokens / self.input_tokens, 4) if self.input_tokens else None

    def to_json(self) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "cacheable_input_tokens": round(self.cacheable_tokens),
            "share": self.share,
        }


def prefix_report(by_role: Mapping[str, PrefixMeter]) -> tuple[float | None, dict[str, Any]]:
    """``(cacheable_prefix_share, cacheable_prefix)`` of a run or eval: the share over every
    role's input tokens, and each role's counts (roles without a request left out)."""
    used = {role: m for role, m in by_role.items() if m.input_tokens}
    total = sum(m.input_tokens for m in used.values())
    share = round(sum(m.cacheable_tokens for m in used.values()) / total, 4) if total else None
    return share, {role: m.to_json() for role, m in used.items()}
