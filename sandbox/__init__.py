"""The sandbox service: gRPC API, hardened container runtime, rollout service.

Public surface: run a sandbox host in this process (:func:`serve` with a
:class:`ServerConfig`: a :class:`RuntimeConfig` for the containers, a :class:`ServiceConfig`
for the rollouts), or drive the runtime contract directly (:class:`SandboxRuntime`,
:class:`RolloutSandbox`, the Docker implementation :class:`DockerRuntime`, hardened
:class:`ContainerSpec` defaults). Imported on first use.
"""

from __future__ import annotations

from skillopt._lazy import lazy_exports

_EXPORTS = {
    "ContainerSpec": "sandbox.runtime.spec",
    "DockerRuntime": "sandbox.runtime.docker.runtime",
    "RolloutSandbox": "sandbox.runtime.base",
    "RunningServer": "sandbox.server.serve",
    "RuntimeConfig": "sandbox.runtime.spec",
    "SandboxRuntime": "sandbox.runtime.base",
    "ServerConfig": "sandbox.server.serve",
    "ServiceConfig": "sandbox.service.config",
    "serve": "sandbox.server.serve",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
