"""Required isolation (``sandbox.isolation``, a session's or the Inspect provider's
``isolation``): which OCI runtimes give each level, and the refusal when a host cannot.

One check for every client: a run checks each host's ``Describe`` (the runtime its agent runs
under) before any rollout; a session checks the runtime its container reports before any
command. Levels and what each stops: ``docker/README.md`` ("Isolation levels").
"""

from __future__ import annotations

from collections.abc import Mapping

from skillopt.errors import ConfigError

__all__ = ["ISOLATION_RUNTIMES", "check_isolation", "isolation_refusal"]

#: Isolation level → the OCI runtimes that give it (``runsc-net``: gVisor with its own network
#: stack, for containers on the model gateway's network).
ISOLATION_RUNTIMES: dict[str, tuple[str, ...]] = {"gvisor": ("runsc", "runsc-net")}

_HOW = "start the host with: skillopt serve --runtime runsc (after bash scripts/setup.sh --gvisor)"


def isolation_refusal(isolation: str, runtime: str) -> str:
    """Why a container running under ``runtime`` does not give ``isolation`` ("" if it does, or
    when no isolation is required).

    Raises:
        ConfigError: an unknown isolation level.
    """
    if not isolation:
        return ""
    if isolation not in ISOLATION_RUNTIMES:
        raise ConfigError(
            f"isolation must be '' or one of {', '.join(ISOLATION_RUNTIMES)}, got {isolation!r}"
        )
    if runtime in ISOLATION_RUNTIMES[isolation]:
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
