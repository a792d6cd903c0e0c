"""Wiring for ``train`` and ``eval``: models, sandbox fleet (or the embedded one), simulation.

The composition root's one helper: it resolves everything from the config once and hands the
trainer typed objects. Misconfiguration fails here, at startup, with what to set.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import structlog

from controller.client.isolation import check_isolation
from controller.client.sandbox_client import ChannelConfig
from controller.embedded import embedded_sandbox
from controller.fleet.executor import FleetExecutor
from skillopt import __version__
from skillopt.config import Config
from skillopt.errors import ConfigError
from skillopt.models.openai_chat import OpenAIChatModel
from skillopt.models.profiles import load_profiles, validate_profiles
from skillopt.models.roles import RoleModel, UsageTracker
from skillopt.trainer.rollouts import Rollouts, RolloutSpec
from skillopt.trainer.rundir import layout
from skillopt.trainer.state import RunMode
from skillopt.types import Limits, ModelSpec
from skillopt.units import MiB

__all__ = ["Session", "decide_simulation", "open_session", "run_id_for", "sandbox_channels"]

log = structlog.get_logger("skillopt.controller.session")


@dataclass
class Session:
    rollouts: Rollouts
    optimizer: RoleModel
    mode: RunMode
    sandbox_address: str
    #: The sandbox side of the environment manifest: the pinned runtime image digest, and per
    #: host its service version and build and the agent CLI versions its image carries.
    environment: dict

    @property
    def simulated(self) -> bool:
        return self.mode.simulated


_SIM_HINT = (
    "To try skillopt without a key, run the offline simulation on purpose: --simulate on "
    "(or --config spreadsheetbench_demo, which chooses it by itself when no key is set)"
)


def decide_simulation(cfg: Config) -> RunMode:
    """Real models or the offline simulation, and why.

    ``run.simulate`` is ``off`` everywhere but the demo configs: a run that cannot reach its
    providers then stops here with what is missing, rather than quietly producing scripted
    numbers.

    Raises:
        ConfigError: ``off`` and a provider profile is missing or its file does not load.
    """
    mode, m = cfg.run.simulate, cfg.model
    if mode == "on":
        return RunMode(simulated=True, reason="chosen (run.simulate=on)")
    if mode == "noisy":
        return RunMode(simulated=True, noisy=True, reason="chosen (run.simulate=noisy)")
    try:
        profiles = load_profiles(file=m.providers_file or None)
        missing = sorted({p for p in (m.optimizer_provider, m.target_provider) if p not in profiles})
        if missing and mode == "off":
            validate_profiles(profiles, missing)  # raises with exactly what to set
    except ConfigError as exc:
        if mode == "off":
            raise ConfigError(f"{exc.message}. {_SIM_HINT}") from exc
        return RunMode(simulated=True, reason=f"the provider configuration is not usable ({exc.message})")
    if missing:
        return RunMode(
            simulated=True,
            reason=(
                f"no provider key for {', '.join(missing)} (run.simulate=auto; set OPENAI_API_KEY, or define "
                "the profiles in model.providers_file, for real models)"
            ),
        )
    return RunMode(
        simulated=False,
        reason=f"optimizer {m.optimizer} via {m.optimizer_provider}, target {m.target} via {m.target_provider}",
    )


def run_id_for(out_dir: Path) -> str:
    """A stable id of this run (kept in the run dir), prefixing every rollout id."""
    path = out_dir / layout.RUN_ID
    if path.exists():
        return path.read_text().strip()
    rid = f"{out_dir.name[:40]}-{secrets.token_hex(4)}"
    out_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(rid + "\n")
    return rid


def _limits(cfg: Config) -> Limits:
    e = cfg.env
    return Limits(
        wall_time_s=e.task_timeout,
        max_turns=e.max_turns,
        exec_timeout_s=e.exec_timeout,
        memory_bytes=e.memory_mb * MiB,
        cpus=e.cpus,
        max_model_tokens=e.max_model_tokens or None,
    )


def sandbox_channels(cfg: Config) -> list[ChannelConfig]:
    """One channel per configured sandbox endpoint (``sandbox.endpoints``), with the token and
    TLS files of the ``sandbox`` keys, else of the environment (:mod:`controller.fleet.access`).

    Raises:
        ConfigError: a token or TLS file cannot be read (naming the key or variable).
    """
    from controller.fleet.access import resolve_access

    return resolve_access(config=cfg.sandbox.to_dict()).channels()


@contextlib.contextmanager
def open_session(
    cfg: Config,
    *,
    out_dir: Path,
    mode: RunMode | None = None,
    pinned_digest: str = "",
    pinned_agent_digest: str = "",
) -> Iterator[Session]:
    """Start what the run needs (simulation server, embedded sandbox) and stop it afterwards.

    Args:
        mode: decided by the caller (:func:`decide_simulation`), which prints it; decided here
            when not given.
        pinned_digest: the runtime image digest a resumed run started on ("" = pin to what the
            hosts run now); ``pinned_agent_digest`` the same for its agent's own image.

    Raises:
        ConfigError: a provider or endpoint setting is missing or wrong (says what to set).
    """
    mode = mode or decide_simulation(cfg)
    simulated = mode.simulated
    with contextlib.ExitStack() as stack:
        optimizer, target, provider_specs = _models(cfg, mode, stack)
        # The optimizer's calls share one prompt-caching key per run (each stage adds its name).
        optimizer.cache_key = f"{run_id_for(out_dir)}:optimizer" if cfg.model.prompt_caching else ""
        channels, address = _sandbox_hosts(cfg, stack, provider_specs, out_dir)
        executor = stack.enter_context(
            FleetExecutor(
                channels,
                workers=cfg.env.workers,
                rpc_slack_s=cfg.sandbox.rpc_timeout_slack_s,
                down_timeout_s=cfg.sandbox.host_down_timeout_s,
            )
        )
        # Before anything else is asked of the hosts: a run that requires isolation uses none without it.
        check_isolation(executor.agent_runtimes(), cfg.sandbox.isolation, f"{cfg.env.name}/{cfg.env.agent}")
        _check_hosts_serve(executor, target.provider, simulated)
        environment = _pin_environment(executor, cfg, pinned_digest, pinned_agent_digest)
        spec = RolloutSpec(
            run_id=run_id_for(out_dir),
            env=cfg.env.name,
            agent=cfg.env.agent,
            model=target,
            limits=_limits(cfg),
            model_cache=cfg.sandbox.model_cache,
            seed=cfg.train.seed,
            isolation=cfg.sandbox.isolation,
        )
        yield Session(
            rollouts=Rollouts(executor, spec),
            optimizer=optimizer,
            mode=mode,
            sandbox_address=address,
            environment=environment,
        )


def _models(
    cfg: Config, mode: RunMode, stack: contextlib.ExitStack
) -> tuple[RoleModel, ModelSpec, list[str]]:
    """``(the optimizer, the target's spec, --provider specs for an embedded host)``: the
    configured providers, or the simulation server (started on ``stack``) when ``mode`` is
    simulated.

    Raises:
        ConfigError: a provider setting is missing or wrong (says what to set).
    """
    tracker = UsageTracker()
    m = cfg.model
    if mode.simulated:
        from skillopt.envs.registry import env_spec
        from skillopt.testing.simulation import (
            SIM_PROVIDER,
            sim_models,
            simulation_profiles,
            simulation_server,
            simulation_target_provider,
        )

        # The optimizer is simulated here; the target by the sandbox hosts (the embedded one
        # gets this server as its providers; remote hosts run `skillopt serve --simulate`).
        sim = stack.enter_context(simulation_server())
        sim_target, sim_optimizer = sim_models(noisy=mode.noisy)
        optimizer_model = OpenAIChatModel(SIM_PROVIDER, base_url=sim.base_url, api_key="", max_retries=0)
        optimizer = RoleModel(optimizer_model, ModelSpec(provider=SIM_PROVIDER, model=sim_optimizer), tracker)
        api = env_spec(cfg.env.name).agent(cfg.env.agent).api or "openai"
        target = ModelSpec(
            provider=simulation_target_provider(api), model=sim_target, prompt_caching=m.prompt_caching
        )
        return optimizer, target, simulation_profiles(sim)
    profiles = load_profiles(file=m.providers_file or None)
    # Fail now, with what to set, rather than at the first call of a long run.
    models = validate_profiles(profiles, [m.optimizer_provider, m.target_provider])
    optimizer = RoleModel(
        models[m.optimizer_provider],
        ModelSpec(
            provider=m.optimizer_provider,
            model=m.optimizer,
            temperature=m.optimizer_temperature,
            max_output_tokens=m.max_completion_tokens,
            reasoning_effort=m.reasoning_effort or None,
        ),
        tracker,
    )
    target = ModelSpec(
        provider=m.target_provider,
        model=m.target,
        temperature=m.target_temperature,
        max_output_tokens=m.max_completion_tokens,
        reasoning_effort=m.reasoning_effort or None,
        prompt_caching=m.prompt_caching,
    )
    return optimizer, target, []


def _sandbox_hosts(
    cfg: Config, stack: contextlib.ExitStack, provider_specs: list[str], out_dir: Path
) -> tuple[list[ChannelConfig], str]:
    """``(channels, address for messages)`` of the run's sandbox hosts: the configured
    endpoints, or an embedded host started on ``stack`` (with ``provider_specs``).

    Raises:
        ConfigError: a token or TLS file cannot be read.
    """
    if cfg.sandbox.endpoints:
        return sandbox_channels(cfg), ",".join(cfg.sandbox.endpoints)
    capacity = cfg.sandbox.embedded_capacity or max(2, min(cfg.env.workers, 2 * (os.cpu_count() or 2)))
    emb = stack.enter_context(
        embedded_sandbox(
            capacity=capacity,
            pool_size=_embedded_pool_size(cfg),
            providers=provider_specs,
            providers_file=cfg.model.providers_file,
            image=cfg.sandbox.image,
            runtime=cfg.sandbox.runtime or ("runsc" if cfg.sandbox.isolation == "gvisor" else ""),
            memory_mb=cfg.env.memory_mb,
            cpus=cfg.env.cpus,
            log_dir=out_dir,
            cache_dir=cfg.sandbox.model_cache_dir,
        )
    )
    return [ChannelConfig(address=emb.address, token=emb.token)], emb.address


def _embedded_pool_size(cfg: Config) -> int | None:
    """The embedded host's warm pool: as configured; else (0, auto) none for an agent whose
    rollouts need no container (the QA agents: each warm container costs the machine about half
    a second of CPU to start and remove, for nothing), the service's default otherwise (larger
    under gVisor). A container something else asks for (a package's script check) still comes,
    cold."""
    from skillopt.envs.registry import env_spec

    if cfg.sandbox.embedded_pool_size:
        return cfg.sandbox.embedded_pool_size
    return 0 if env_spec(cfg.env.name).agent(cfg.env.agent).sandbox == "none" else None


def _agent_image_pin(executor: FleetExecutor, cfg: Config, pinned: str, refuse: bool) -> tuple[str, str]:
    """``(image, digest)`` the run pins its agent's own image to (``("", "")``: the agent runs
    in the runtime image), chosen like the runtime image's.

    Raises:
        ConfigError: (policy ``refuse``) the hosts run different builds of the image.
    """
    from skillopt.envs.registry import env_spec

    image = env_spec(cfg.env.name).agent(cfg.env.agent).image
    if not image:
        return "", ""
    per_host = {a: d.get(image, "") for a, d in executor.agent_image_digests().items()}
    seen = sorted({d for d in per_host.values() if d})
    if pinned or len(seen) <= 1:
        return image, pinned or (seen[0] if seen else "")
    detail = "; ".join(f"{a}: {d or 'not built'}" for a, d in sorted(per_host.items()))
    if refuse:
        raise ConfigError(
            f"the sandbox hosts run different builds of {image} ({detail}); one run must see one "
            "environment: rebuild them from one image (bash docker/build.sh), or set "
            "sandbox.image_digest_policy=warn"
        )
    return image, max(seen, key=lambda d: sum(d == v for v in per_host.values()))


def _pin_environment(executor: FleetExecutor, cfg: Config, pinned: str, pinned_agent: str = "") -> dict:
    """Pin the run to one runtime image digest (and its agent's own image, if any) and
    describe the sandbox environment.

    Raises:
        ConfigError: (policy ``refuse``) the hosts differ and nothing is pinned yet, or no
            reachable host runs the pinned image.
    """
    refuse = cfg.sandbox.image_digest_policy == "refuse"
    per_host = executor.image_digests()
    seen = sorted({d for digests in per_host.values() for d in digests.values() if d})
    pin = pinned or (seen[0] if len(seen) == 1 else "")
    if not pin and len(seen) > 1:
        detail = "; ".join(f"{a}: {', '.join(d.values())}" for a, d in sorted(per_host.items()))
        if refuse:
            raise ConfigError(
                f"the sandbox hosts run different runtime images ({detail}); one run must see one "
                "environment: rebuild them from one image (bash docker/build.sh), or set "
                "sandbox.image_digest_policy=warn"
            )
        pin = max(seen, key=lambda d: sum(d in v.values() for v in per_host.values()))
    agent_image, agent_pin = _agent_image_pin(executor, cfg, pinned_agent, refuse)
    for line in executor.pin(
        pin, refuse=refuse, agent_images={agent_image: agent_pin} if agent_image else None
    ):
        if refuse:
            print(f"skillopt: not using sandbox host {line}", file=sys.stderr)
        else:
            print(
                f"skillopt: warning: sandbox host {line} (sandbox.image_digest_policy=warn)", file=sys.stderr
            )
    if refuse and not any(not h.excluded for h in executor.hosts_state if h.host_id):
        raise ConfigError(
            f"no reachable sandbox host runs this run's runtime image {pin}"
            + (f" and {agent_image} {agent_pin}" if agent_image and agent_pin else "")
            + " (a resumed run keeps the images it started on); rebuild or start hosts with them, "
            "or set sandbox.image_digest_policy=warn"
        )
    hosts = {
        (h.host_id or h.address): {
            "address": h.address,
            "version": h.version,
            "service_build": h.service_build,
            "image_digests": dict(h.image_digests),
            "agent_cli_versions": {
                k.removeprefix("org.skillopt.").removesuffix("-version"): v
                for k, v in h.image_labels.items()
                if k.endswith("-version")
            },
        }
        for h in executor.hosts_state
        if h.host_id
    }
    return {
        "runtime_image": cfg.sandbox.image,
        "runtime_image_digest": pin,
        **({"agent_image": agent_image, "agent_image_digest": agent_pin} if agent_image else {}),
        "image_digest_policy": cfg.sandbox.image_digest_policy,
        "controller_version": __version__,
        "hosts": hosts,
    }


def _check_hosts_serve(executor: FleetExecutor, provider: str, simulated: bool) -> None:
    """Every reachable host must know the target's provider profile (it calls the target).

    Raises:
        ConfigError: naming the hosts and what to start them with.
    """
    lacking = [a for a, names in executor.providers().items() if provider not in names]
    if not lacking:
        return
    if simulated:
        raise ConfigError(
            f"sandbox hosts {', '.join(lacking)} do not serve the simulated target (no provider {provider!r}); "
            "start them with: skillopt serve --simulate"
        )
    raise ConfigError(
        f"sandbox hosts {', '.join(lacking)} have no provider profile {provider!r} for the target model; "
        "give them one (skillopt serve --providers FILE or --provider NAME=KIND,...)"
    )
