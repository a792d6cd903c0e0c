"""Required isolation (``sandbox.isolation``, a session's or the Inspect provider's
``isolation``): which OCI runtimes give each level, and the refusal when a host cannot.

One check for every client: a run checks each host's ``Describe`` (the runtime its agent runs
under) before any rollout; a session checks the runtime its container reports before any
command. Both also send the level with each request, and the host refuses it itself
(``IsolationUnavailable``, before any container starts); this check fails earlier, with one
message for the whole fleet. Levels and what each stops: ``docker/README.md`` ("Isolation levels").
"""

from __future__ import annotations

from collections.abc import Mapping

from skillopt.errors import ConfigError
from skillopt.isolation import ISOLATION_RUNTIMES, gives_isolation, unknown_isolation

__all__ = ["ISOLATION_RUNTIMES", "check_isolation", "isolation_refusal"]

_HOW = "start the host with: skillopt serve --runtime runsc (after bash scripts/setup.sh --gvisor)"


def isolation_refusal(isolation: str, runtime: str) -> str:
    """Why a container running under ``runtime`` does not give ``isolation`` ("" if it does, or
    when no isolation is required).

    Raises:
        ConfigError: an unknown isolation level.
    """
    if unknown_isolation(isolation):
        raise ConfigError(unknown_isolation(isolation))
    if gives_isolation(isolation, runtime):
        return ""
    return f"runs it under {runtime or 'an unknown runtime'!r}, not {isolation} ({'/'.join(ISOLATION_RUNTIMES[isolation])})"


def check_isolation(per_host: Mapping[str, Mapping[str, str]], isolation: str, agent: str) -> None:
    """Refuse, before anything runs, a fleet where a host would not run ``agent`` (``env/agent``)
    under ``isolation``.

    Args:
        per_host: address → ``Describe``'s ``agent_runtimes`` (``env/agent`` → OCI runtime).

    Raises:
        ConfigError: naming each such host, the runtime it offers and what to start it with.
    """
    if not isolation:
        return
    lacking = [
        f"{address} {isolation_refusal(isolation, runtimes.get(agent, '')) or ''}".rstrip()
        for address, runtimes in sorted(per_host.items())
        if isolation_refusal(isolation, runtimes.get(agent, ""))
    ]
    if lacking:
        raise ConfigError(
            f"sandbox.isolation={isolation} for {agent}, but sandbox hosts cannot give it: "
            f"{'; '.join(lacking)}; {_HOW}, or leave them out of sandbox.endpoints"
        )
