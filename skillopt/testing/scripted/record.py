"""What the scripted model server remembers about each request, with secrets redacted."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["RecordedRequest", "redact_headers"]

_SECRET_HEADERS = ("authorization", "x-api-key", "api-key", "proxy-authorization", "cookie")


def _redact(value: str) -> str:
    scheme, _, token = value.partition(" ") if value.lower().startswith("bearer ") else ("", "", value)
    keep = min(4, len(token) // 3)  # a short prefix identifies the key, never enough to reuse it
    return f"{scheme + ' ' if scheme else ''}{token[:keep]}…[redacted]"


def redact_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Lower-cased headers with secret values (authorization, x-api-key ...) cut to a prefix."""
    return {k.lower(): (_redact(v) if k.lower() in _SECRET_HEADERS else v) for k, v in headers.items()}


@dataclass(frozen=True, kw_only=True, slots=True)
class RecordedRequest:
    """One request as the server saw and answered it.

    Attributes:
        ts: arrival time (``time.time()``).
        method, path, query: the request line (path without query).
        headers: lower-cased, secrets redacted.
        body: decoded JSON body (None without a body; the raw text if it was not JSON).
        api: ``chat``, ``responses``, ``messages``, ``count_tokens``, ``models``, ``probe`` or
            None (unknown route).
        model, stream, turn: from the body (API requests only).
        rule: the rule that answered (``responder:<name>`` for a responder), None if none.
        reply_index: index into that rule's ``replies``.
        status: the HTTP status sent.
        error: the error message sent, for non-2xx statuses.
    """

    ts: float
    method: str
    path: str
    query: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    body: Any = None
    api: str | None = None
    model: str = ""
    stream: bool = False
    turn: int | None = None
    rule: str | None = None
    reply_index: int | None = None
    status: int = 200
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (one JSONL log line)."""
        d = asdict(self)
        d["headers"] = dict(self.headers)
        return d
