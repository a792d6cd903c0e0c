"""The model seam: one protocol every provider implements.

Agents and the optimizer call :class:`ChatModel.complete` with provider-neutral messages and get
a :class:`ChatResponse` back. Providers (``skillopt.models.providers``) translate to the official
SDKs; nothing outside them imports ``openai`` or ``anthropic``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from skillopt.types import Message, Usage

__all__ = [
    "SEED_HEADER",
    "STAGE_HEADER",
    "ChatModel",
    "ChatRequest",
    "ChatResponse",
    "LazyClient",
    "ToolSpec",
]

#: Which stage of the method asked (rollout, analyst, merge ...).
STAGE_HEADER = "X-Skillopt-Stage"
#: A rollout's sampling seed.
SEED_HEADER = "X-Skillopt-Seed"


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolSpec:
    """A function tool offered to the model (JSON-schema parameters)."""

    name: str
    description: str
    parameters: Mapping[str, Any]


@dataclass(frozen=True, kw_only=True, slots=True)
class ChatRequest:
    """A provider-neutral chat request. ``model`` is the provider's model name."""

    model: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    temperature: float | None = None
    max_output_tokens: int | None = None
    reasoning_effort: str | None = None
    timeout_s: float | None = None
    stage: str = "target"
    extra: Mapping[str, Any] = field(default_factory=dict)
    #: The rollout's sampling seed, sent as the ``X-Skillopt-Seed`` header (None = not sent).
    seed: int | None = None
    #: Prompt caching (``""`` = no hints): OpenAI requests carry it as ``prompt_cache_key``
    #: (requests sharing it are routed to the same cache); Anthropic requests get
    #: ``cache_control`` breakpoints after the system prompt and after the tools.
    cache_key: str = ""

    def headers(self) -> dict[str, str]:
        """The headers every provider call carries: which stage asked (for gateways,
        recordings and the scripted server) and the rollout's seed."""
        out = {STAGE_HEADER: self.stage}
        if self.seed:
            out[SEED_HEADER] = str(self.seed)
        return out


@dataclass(frozen=True, kw_only=True, slots=True)
class ChatResponse:
    """The model's reply: text, tool calls (``{id, name, arguments}``) and usage."""

    text: str
    tool_calls: tuple[Mapping[str, Any], ...] = ()
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = ""
    raw_model: str = ""


@runtime_checkable
class ChatModel(Protocol):
    """A configured provider endpoint.

    ``complete`` raises :class:`skillopt.errors.ModelError` subclasses after the provider's own
    retries are exhausted; it never returns a silent empty answer for a failed call.
    """

    name: str

    def complete(self, request: ChatRequest) -> ChatResponse:
        """Send one chat request and return the reply."""
        ...


def messages_from(pairs: Sequence[tuple[str, str]]) -> tuple[Message, ...]:
    """Shorthand: ``[("system", s), ("user", u)]`` → messages."""
    return tuple(Message(role=r, content=c) for r, c in pairs)


class LazyClient:
    """A provider SDK's client, built on first use (``get``), once, whichever thread asks first.

    The SDKs take about a second of CPU each to import (``anthropic`` 1.0 s, ``openai`` 0.8 s):
    a sandbox host configured with several provider profiles, or a controller that never calls
    one of its models, should not pay that at start for a provider no rollout uses.
    """

    def __init__(self, client: Any, build: Callable[[], Any]) -> None:
        self._client, self._build = client, build
        self._lock = threading.Lock()

    def get(self) -> Any:
        if self._client is None:
            with self._lock:
                if self._client is None:
                    self._client = self._build()
        return self._client
