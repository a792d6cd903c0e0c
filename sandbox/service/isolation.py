"""The host's per-request isolation check (``RunRequest.isolation``,
``CreateSessionRequest.isolation``): a request requiring an isolation this host's container
for it would not give is refused before any container starts, saying what the host has and
how to get the isolation. The levels are :mod:`skillopt.isolation`'s."""

from __future__ import annotations

from typing import TYPE_CHECKING

from skillopt.envs.registry import get_env
from skillopt.errors import InvalidRequest, IsolationUnavailable
from skillopt.isolation import ISOLATION_RUNTIMES, gives_isolation, unknown_isolation
from skillopt.types import RolloutRequest

if TYPE_CHECKING:
    from sandbox.runtime.base import SandboxRuntime
    from sandbox.runtime.spec import ContainerSpec
    from sandbox.service.config import ServiceConfig

__all__ = ["check_isolation", "check_rollout_isolation"]


def check_rollout_isolation(
    request: RolloutRequest, *, runtime: SandboxRuntime, config: ServiceConfig, exec_spec: ContainerSpec
) -> None:
    """Refuse (:func:`check_isolation`) a rollout whose required isolation its container would
    not get on this host: the runtime ``Describe`` reports for its agent (exec agents: the
    gateway network's, ``exec_spec``)."""
    if not request.isolation:
        return
    exec_agent = get_env(request.env).container(request.agent) == "gateway"
    check_isolation(
        request.isolation,
        runtime=runtime.runtime_name(exec_spec if exec_agent else config.base_spec),
        host_id=config.host_id,
        what=f"{request.env}/{request.agent}",
        base_runtime=config.base_spec.runtime,
        available=runtime.available_runtimes(),
    )


def check_isolation(
    isolation: str,
    *,
    runtime: str,
    host_id: str,
    what: str,
    base_runtime: str,
    available: tuple[str, ...],
) -> None:
    """Refuse ``isolation`` for a container that would run under ``runtime``.

    Args:
        isolation: the level the request requires ("" = any: nothing is checked).
        runtime: the OCI runtime the request's container would run under here.
        what: the request's work, for the message (``"spreadsheetbench/codex_exec"``, ``"a
            session on the gateway network"``).
        base_runtime: the runtime the host was started with (``--runtime``; "" = the engine's
            default), to tell a runc host from a gVisor host whose networked containers fall
            back.
        available: the runtimes the host's engine has registered.

    Raises:
        InvalidRequest: an unknown level.
        IsolationUnavailable: the container would not give it (FAILED_PRECONDITION).
    """
    if unknown_isolation(isolation):
        raise InvalidRequest(unknown_isolation(isolation))
    if gives_isolation(isolation, runtime):
        return
    wanted = ISOLATION_RUNTIMES[isolation]
    if base_runtime in wanted:  # a gVisor host whose gateway-network containers fall back
        how = (
            f"register gVisor's networked runtime on the host ({base_runtime}-net: bash scripts/setup.sh "
            "--gvisor) and restart it"
        )
    elif any(r in available for r in wanted):
        how = f"restart the host with: skillopt serve --runtime {wanted[0]}"
    else:
        how = (
            f"install gVisor on the host (bash scripts/setup.sh --gvisor), then restart it with: "
            f"skillopt serve --runtime {wanted[0]}"
        )
    raise IsolationUnavailable(
        f"host {host_id} cannot give isolation={isolation} to {what}: its container would run under "
        f"{runtime or 'the engine default'!r}, not {isolation} ({'/'.join(wanted)}; runtimes registered here: "
        f"{', '.join(available) or 'unknown'}); to get it, {how}",
        host=host_id,
    )
