"""Who is calling: the bearer tokens a host accepts, each one a tenant.

A token file holds one token per line, optionally followed by ``max_sessions=N`` (that tenant's
cap on live sessions); blank lines and ``#`` comments are ignored. A file with a single bare
token is what it always was. A tenant is known by a short hash of its token (logs, session
ownership), never by the token itself. Rollouts accept every tenant; sessions belong to the
tenant that created them.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from skillopt.errors import ConfigError

__all__ = ["LOCAL_TENANT", "Tenant", "TenantTokens", "parse_token_file", "tenant_id"]


@dataclass(frozen=True, slots=True)
class Tenant:
    """One caller identity. ``max_sessions`` 0 = only the host-wide cap applies."""

    id: str
    max_sessions: int = 0


#: The identity of every caller when the host runs without a token (loopback only).
LOCAL_TENANT = Tenant(id="local")


def tenant_id(token: str) -> str:
    """The id a token's tenant goes by (in logs, metrics and the pool's recycling): a
    prefix of its hash, never the token."""
    return "t-" + hashlib.sha256(token.encode("utf-8")).hexdigest()[:12]


class TenantTokens:
    """The tokens a host accepts; :meth:`identify` maps a presented token to its tenant in
    constant time per token (no early exit on the first byte that differs)."""

    def __init__(self, entries: list[tuple[str, int]]) -> None:
        self._entries = [(token.encode("utf-8"), Tenant(tenant_id(token), cap)) for token, cap in entries]

    @classmethod
    def single(cls, token: str) -> TenantTokens:
        return cls([(token, 0)])

    def __bool__(self) -> bool:
        return bool(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def identify(self, presented: str) -> Tenant | None:
        """The tenant of ``presented`` (a bare token), or ``None`` when no token matches."""
        raw = presented.strip().encode("utf-8")
        found = None
        for token, tenant in self._entries:
            if hmac.compare_digest(raw, token):
                found = tenant
        return found


def parse_token_file(text: str, *, source: str = "token file") -> list[tuple[str, int]]:
    """``(token, max_sessions)`` per line of a token file.

    Raises:
        ConfigError: an empty file, a duplicate token, or an option it does not know,
            naming the line.
    """
    entries: list[tuple[str, int]] = []
    seen: set[str] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        token, *options = line.split()
        cap = 0
        for option in options:
            key, sep, value = option.partition("=")
            if key != "max_sessions" or not sep or not value.isdigit():
                raise ConfigError(
                    f"{source} line {number}: unknown option {option!r} (expected 'max_sessions=N' after the token)"
                )
            cap = int(value)
        if token in seen:
            raise ConfigError(f"{source} line {number}: the same token appears twice")
        seen.add(token)
        entries.append((token, cap))
    if not entries:
        raise ConfigError(f"{source} holds no token")
    return entries
