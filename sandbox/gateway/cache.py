"""Record/replay store of model exchanges, keyed by the canonical request.

``record`` forwards and stores every exchange; ``replay`` answers only from the store (a miss
is a typed error), so a recorded run re-executes offline, byte for byte; ``off`` does neither.

The canonical request drops what changes between otherwise identical calls: client bookkeeping
fields (``prompt_cache_key``, ``metadata``, ``client_metadata``, ``user``, ``store``,
``stream_options``, ``service_tier``), item and call ids, the environment notes agent CLIs add
(Codex's ``<current_date>``/``<timezone>`` tags, its tool-output chunk ids and wall times), and
in system/developer text the "Today's date is …" lines. These rules were derived from the real
Codex CLI 0.171 and Claude Code 2.1.332; a newer CLI may need more.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["CACHE_MODES", "ExchangeCache", "StoredResponse", "canonical_key"]

CACHE_MODES = ("off", "record", "replay")
_VOLATILE_KEYS = frozenset(
    {
        "prompt_cache_key",
        "metadata",
        "client_metadata",
        "user",
        "store",
        "stream_options",
        "service_tier",
        "safety_identifier",
        # Item and call ids: client-generated (Codex names its input items msg_<uuid>) or copied
        # from an earlier response; the content around them identifies the request.
        "id",
        "call_id",
        "tool_use_id",
        "tool_call_id",
    }
)
# What agent CLIs add about the environment they run in; never task data.
_ENV_TAGS = (
    re.compile(r"<current_date>.*?</current_date>", re.S),
    re.compile(r"<timezone>.*?</timezone>", re.S),
    # Claude Code's context-budget reminder inside tool results.
    re.compile(r"<total_tokens>\d+ tokens left</total_tokens>"),
    # Codex's tool-output header: a random chunk id and the measured wall time.
    re.compile(r"(?m)^Chunk ID: [0-9a-f]+$"),
    re.compile(r"(?m)^Wall time: [0-9.]+ seconds$"),
)
# Plain-prose date lines: only scrubbed in system/developer text.
_SYSTEM_DATES = (
    re.compile(r"(Today's date is )[^\n.]*"),
    re.compile(r"(Current date: )[^\n]*"),
)


def _scrub_text(text: str, *, system: bool) -> str:
    for pattern in _ENV_TAGS:
        text = pattern.sub("", text)
    if system:
        for pattern in _SYSTEM_DATES:
            text = pattern.sub(lambda m: m.group(1), text)
    return text


def _canonical(value: Any, *, system: bool = False) -> Any:
    if isinstance(value, dict):
        role = value.get("role")
        is_system = system or role in ("system", "developer")
        return {
            k: _canonical(v, system=is_system or k in ("system", "instructions"))
            for k, v in sorted(value.items())
            if k not in _VOLATILE_KEYS
        }
    if isinstance(value, list):
        return [_canonical(v, system=system) for v in value]
    if isinstance(value, str):
        return _scrub_text(value, system=system)
    return value


def canonical_key(api: str, body: Any, *, seed: int = 0) -> str:
    """SHA-256 of the canonical form of a request (``api`` names the endpoint kind).

    A rollout's sampling ``seed`` is part of the key: the same prompt sent by two rollouts
    may get two answers (a stochastic target), and a replay gives each rollout its own.
    """
    form: dict[str, Any] = {"api": api, "body": _canonical(body)}
    if seed:
        form["seed"] = seed
    raw = json.dumps(form, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class StoredResponse:
    status: int
    content_type: str
    body: bytes
    usage: dict[str, int]

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "content_type": self.content_type,
            "body_b64": base64.b64encode(self.body).decode("ascii"),
            "usage": self.usage,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StoredResponse:
        return cls(
            status=int(data["status"]),
            content_type=str(data.get("content_type", "application/json")),
            body=base64.b64decode(data["body_b64"]),
            usage=dict(data.get("usage") or {}),
        )


class ExchangeCache:
    """Exchanges stored as files ``<dir>/<key[:2]>/<key>.json``; safe across threads and
    processes (atomic renames)."""

    def __init__(self, directory: str | Path) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def _path(self, key: str) -> Path:
        return self.dir / key[:2] / f"{key}.json"

    def get(self, key: str) -> StoredResponse | None:
        path = self._path(key)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        return StoredResponse.from_json(data["response"])

    def put(self, key: str, request: Any, response: StoredResponse) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(
            json.dumps({"request": request, "response": response.to_json()}, ensure_ascii=False),
            encoding="utf-8",
        )
        with self._lock:
            tmp.replace(path)
