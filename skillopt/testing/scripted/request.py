"""The provider-neutral view of one model request, as rules and responders see it.

Each API module (``openai_chat``, ``openai_responses``, ``anthropic_messages``) turns its wire
body into a :class:`ScriptedRequest`. Matching, reply choice and token counting only ever look
at this object, so a scenario works the same against every API.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["OfferedTool", "ParsedBody", "ScriptedMessage", "ScriptedRequest", "content_text", "count_runs"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ScriptedMessage:
    """One conversation element flattened to text.

    ``role`` is ``system``, ``developer``, ``user``, ``assistant`` or ``tool`` (a tool result).
    Assistant tool calls are rendered into ``text`` as ``<name> <arguments>`` lines so that
    ``contains``/``regex`` rules can see them.
    """

    role: str
    text: str


@dataclass(frozen=True, kw_only=True, slots=True)
class OfferedTool:
    """A tool the client offered. ``type`` is ``function`` for JSON-schema tools, ``custom`` for
    freeform tools (Codex's ``apply_patch``), or the provider's own type (``web_search``,
    ``bash_20250124`` ...). ``parameters`` is the JSON schema ({} when there is none)."""

    name: str
    type: str = "function"
    parameters: Mapping[str, Any] = field(default_factory=dict)

    @property
    def properties(self) -> Mapping[str, Any]:
        """The schema's ``properties`` mapping ({} when absent)."""
        props = self.parameters.get("properties") if isinstance(self.parameters, Mapping) else None
        return props if isinstance(props, Mapping) else {}


@dataclass(frozen=True, kw_only=True, slots=True)
class ScriptedRequest:
    """A parsed model request.

    Attributes:
        api: ``chat``, ``responses`` or ``messages``.
        method: HTTP method.
        path: URL path without the query string (``/v1/messages``).
        query: the raw query string (``beta=true``), "" when absent.
        headers: request headers, lower-cased names, secrets redacted.
        body: the decoded JSON body.
        model: the requested model ("" when absent).
        stream: whether the client asked for SSE.
        system: all system/developer/instructions text, joined.
        messages: the conversation in order (system parts included).
        tools: the offered tools.
        turn: the stateless turn index: how many model turns the conversation already holds
            (see ``skillopt.testing.scripted`` for the per-API definition).
    """

    api: str
    method: str = "POST"
    path: str = ""
    query: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    body: Mapping[str, Any] = field(default_factory=dict)
    model: str = ""
    stream: bool = False
    system: str = ""
    messages: tuple[ScriptedMessage, ...] = ()
    tools: tuple[OfferedTool, ...] = ()
    turn: int = 0

    @property
    def text(self) -> str:
        """The request's full text: system + every message, tool call and tool result."""
        return "\n\n".join(m.text for m in self.messages if m.text)

    @property
    def last_user_text(self) -> str:
        """Text of the latest user message that has any (tool results excluded)."""
        for m in reversed(self.messages):
            if m.role == "user" and m.text:
                return m.text
        return ""

    @property
    def tool_results(self) -> tuple[str, ...]:
        """The texts of all tool results, oldest first."""
        return tuple(m.text for m in self.messages if m.role == "tool")

    def tool(self, name: str) -> OfferedTool | None:
        """The offered tool called ``name``, or None."""
        for t in self.tools:
            if t.name == name:
                return t
        return None

    def has_tool(self, name: str) -> bool:
        """Whether a tool called ``name`` is offered."""
        return self.tool(name) is not None


def count_runs(flags: list[bool]) -> int:
    """Number of maximal runs of True in ``flags`` (model turns among conversation items).

    A model turn may span several consecutive items (an assistant message split into blocks,
    parallel function calls, reasoning + call), so runs rather than items are counted.
    """
    runs = 0
    prev = False
    for f in flags:
        if f and not prev:
            runs += 1
        prev = f
    return runs


@dataclass(frozen=True, kw_only=True, slots=True)
class ParsedBody:
    """What an API module extracts from a request body (the API-specific part of a request)."""

    model: str = ""
    stream: bool = False
    system: str = ""
    messages: tuple[ScriptedMessage, ...] = ()
    tools: tuple[OfferedTool, ...] = ()
    turn: int = 0


def content_text(content: Any) -> str:
    """Text of a content value: a string, or a list of parts/blocks with ``text`` fields."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out: list[str] = []
        for part in content:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
                out.append(part["text"])
        return "\n".join(out)
    if isinstance(content, Mapping) and isinstance(content.get("text"), str):
        return content["text"]
    return ""
