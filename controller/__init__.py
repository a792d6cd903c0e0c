"""Orchestration: CLI, rollout client over gRPC, fleet placement, run directory, WebUI.

Public surface: the client of one sandbox host (:class:`SandboxClient` with its
:class:`ChannelConfig`; :meth:`SandboxClient.describe` answers a
:class:`skillopt.types.HostDescription`, :meth:`SandboxClient.watch_health` a
:class:`HealthWatch`: no protobuf or gRPC type reaches the caller, gRPC failures become
:mod:`skillopt.errors` through :func:`map_rpc_error`), and the fleet executor that places
rollouts over many hosts (:class:`FleetExecutor`, a trainer's ``RolloutExecutor``). Imported on
first use.
"""

from __future__ import annotations

from skillopt._lazy import lazy_exports

_EXPORTS = {
    "ChannelConfig": "controller.client.sandbox_client",
    "FleetExecutor": "controller.fleet.executor",
    "HealthWatch": "controller.client.sandbox_client",
    "SandboxClient": "controller.client.sandbox_client",
    "map_rpc_error": "controller.client.sandbox_client",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
