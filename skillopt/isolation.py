"""Isolation levels a caller can require of the containers its untrusted code runs in
(``sandbox.isolation``, a session's or the Inspect provider's ``isolation``, the ``isolation``
field of ``RunRequest`` and ``CreateSessionRequest``), and the OCI runtimes that give each.

Plain data shared by the two places that check it: the client, against each host's
``Describe`` before anything runs (``controller.client.isolation``), and the host, per request,
before any container starts (``sandbox.service.isolation``). What each level stops and costs:
``docker/README.md`` ("Isolation levels").
"""

from __future__ import annotations

__all__ = ["ISOLATION_RUNTIMES", "gives_isolation", "unknown_isolation"]

#: Isolation level → the OCI runtimes that give it (``runsc-net``: gVisor with its own network
#: stack, for containers on the model gateway's network).
ISOLATION_RUNTIMES: dict[str, tuple[str, ...]] = {"gvisor": ("runsc", "runsc-net")}


def unknown_isolation(isolation: str) -> str:
    """Why ``isolation`` is not a level ("" when it is one, or ""= none required)."""
    if not isolation or isolation in ISOLATION_RUNTIMES:
        return ""
    return f"isolation must be '' or one of {', '.join(ISOLATION_RUNTIMES)}, got {isolation[:50]!r}"


def gives_isolation(isolation: str, runtime: str) -> bool:
    """Whether a container running under ``runtime`` gives the (known) level ``isolation``."""
    return not isolation or runtime in ISOLATION_RUNTIMES.get(isolation, ())
