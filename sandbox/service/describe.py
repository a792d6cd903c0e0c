"""What a sandbox host reports about itself (the ``Describe`` RPC)."""

from __future__ import annotations

import os

from sandbox.service.admission import RolloutAdmission
from sandbox.service.rollout import RolloutService
from skillopt import __version__
from skillopt.envs.registry import available_envs, get_env
from skillopt.errors import InfraError
from skillopt.types import HostDescription

__all__ = ["describe_host"]


def describe_host(service: RolloutService, admission: RolloutAdmission) -> HostDescription:
    """What ``service``'s host reports about itself (the ``Describe`` RPC): capacity, agents
    (with their runtimes, or why they cannot run here), images, pools, versions."""
    running = admission.running_count
    image = service.config.base_spec.image
    try:
        digests = {image: service.runtime.image_digest(image)}
    except InfraError:
        digests = {image: ""}
    agents: list[str] = []
    runtimes: dict[str, str] = {}
    unavailable: dict[str, str] = {}
    agent_images: dict[str, str] = {}
    for name in available_envs():
        env = get_env(name)
        for agent in env.agents:
            own = service.agent_spec(env, agent).image
            if own != image and own not in agent_images:
                try:
                    agent_images[own] = service.runtime.image_digest(own)
                except InfraError:
                    agent_images[own] = ""
            key = f"{name}/{agent}"
            refusal = service.agent_refusal(name, agent)
            if refusal:
                unavailable[key] = refusal
            else:
                agents.append(key)
                spec = service.exec_spec if env.container(agent) == "gateway" else service.config.base_spec
                runtimes[key] = service.runtime.runtime_name(spec)  # the OCI runtime it runs under
    return HostDescription(
        host=service.config.host_id,
        version=__version__,
        capacity=admission.capacity,
        free_slots=0 if admission.draining else max(0, admission.capacity - running),
        running=running,
        draining=admission.draining,
        agents=tuple(agents),
        agent_runtimes=runtimes,
        unavailable_agents=unavailable,
        image_digests=digests,
        agent_image_digests=agent_images,
        pool_idle={f"{s.image}@{s.spec_key}": s.idle for s in service.pools.stats()},
        container_runtime=service.runtime.runtime_name(service.config.base_spec),
        providers=tuple(sorted(service.providers)),
        runner_sha256=service.runtime.runner_sha256,
        available_runtimes=service.runtime.available_runtimes(),
        engine_version=service.runtime.engine_version,
        service_build=os.environ.get("SKILLOPT_SERVICE_BUILD", "") or "source",
        image_labels=service.runtime.image_labels(image),
        skill_package_max_files=service.config.package_limits.max_files,
        skill_package_max_bytes=service.config.package_limits.max_bytes,
        reuse_max_executions=service.runtime.config.reuse_max_executions,
        reuse_max_age_s=service.runtime.config.reuse_max_age_s
        if service.runtime.config.reuse_max_executions
        else 0.0,
    )
