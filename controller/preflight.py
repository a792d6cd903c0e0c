"""Checks before a run is launched: will ``skillopt train`` with this config get going?

* **models**: the provider profiles the run needs exist and build (keys are named by where
  they come from, never shown), or the offline simulation was chosen: ``run.simulate: on`` or
  ``noisy``, or ``auto`` (which only a config or the user sets: the default is ``off``, so a
  shipped ``<env>_demo`` launches as shipped) without a provider key. The check's detail says
  "offline simulation" and the run is marked simulated everywhere, so nobody mistakes scripted
  numbers for a measurement;
* **sandbox**: the configured hosts answer ``Describe`` (gRPC, with the run's token and TLS
  settings), or, for the embedded default, the local Docker engine answers;
* **images**: the rollout image is built (embedded) or reported by every host;
* **data**: the data root loads (the items per split), and a run with real models does not
  use an env's vendored sample unless ``env.allow_sample`` (``skillopt train`` refuses it too).

The WebUI runs them before it launches; each is quick (a Docker ping, one ``Describe`` with a
short deadline per host).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from skillopt.config import Config
from skillopt.errors import ConfigError, SkillOptError

__all__ = ["Check", "preflight"]


@dataclass(frozen=True)
class Check:
    """One preflight check; ``ok`` False blocks the launch."""

    name: str
    ok: bool
    detail: str

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def _models(cfg: Config) -> Check:
    from controller.session import decide_simulation
    from skillopt.models.profiles import load_profiles

    try:
        mode = decide_simulation(cfg)
    except ConfigError as exc:
        return Check("models", False, exc.message)
    if mode.simulated:
        noisy = " (noisy target)" if mode.noisy else ""
        why = (
            f"run.simulate: auto in this config and {mode.reason}; configure a provider key for real models"
            if cfg.run.simulate == "auto"
            else mode.reason
        )
        return Check("models", True, f"offline simulation with scripted models{noisy}: {why}")
    profiles = load_profiles(file=cfg.model.providers_file or None)
    used = dict.fromkeys((cfg.model.optimizer_provider, cfg.model.target_provider))
    where = ", ".join(f"{n} (key from {profiles[n].public()['credential']})" for n in used)
    return Check("models", True, f"real models: {mode.reason}; profiles {where}")


def _embedded(cfg: Config) -> list[Check]:
    import docker

    try:
        client = docker.from_env(timeout=5)
        client.ping()
    except docker.errors.DockerException as exc:
        return [
            Check(
                "sandbox",
                False,
                f"the local Docker engine does not answer ({exc}); run: bash scripts/setup.sh",
            ),
            Check("images", False, "not checked: no Docker engine"),
        ]
    try:
        image = client.images.get(cfg.sandbox.image)
        images = Check("images", True, f"{cfg.sandbox.image} is built ({image.short_id})")
    except docker.errors.ImageNotFound:
        images = Check("images", False, f"{cfg.sandbox.image} is not built; run: bash docker/build.sh")
    except docker.errors.DockerException as exc:
        images = Check("images", False, f"cannot inspect {cfg.sandbox.image}: {exc}")
    finally:
        client.close()
    return [
        Check("sandbox", True, "embedded: a local sandbox service is started for the run (Docker answers)"),
        images,
    ]


def _fleet(cfg: Config) -> list[Check]:
    from controller.client.sandbox_client import SandboxClient
    from controller.session import sandbox_channels

    try:
        channels = sandbox_channels(cfg)
    except SkillOptError as exc:
        return [Check("sandbox", False, exc.message)]
    down, up, missing = [], [], []
    for ch in channels:
        client = SandboxClient(ch)
        try:
            info = client.describe(timeout_s=3.0)
        except SkillOptError as exc:
            down.append(exc.message if ch.address in exc.message else f"{ch.address}: {exc.message}")
            continue
        finally:
            client.close()
        up.append(f"{ch.address} ({info.host}, {info.capacity} slots)")
        if cfg.sandbox.image not in dict(info.image_digests):
            missing.append(ch.address)
    checks = [
        Check(
            "sandbox",
            not down,
            ("; ".join(down) + (f" (reachable: {', '.join(up)})" if up else ""))
            if down
            else f"reachable: {', '.join(up)}",
        )
    ]
    if up:
        checks.append(
            Check(
                "images",
                not missing,
                f"{cfg.sandbox.image} missing on {', '.join(missing)}"
                if missing
                else f"{cfg.sandbox.image} on every reachable host",
            )
        )
    return checks


def _data(cfg: Config) -> Check:
    """The data root loads, and real models are not about to run on the vendored sample
    unless the config allows it (``skillopt train`` refuses the same)."""
    from controller.rundata import refuse_sample, run_data
    from controller.session import decide_simulation
    from skillopt.trainer.planning import load_data

    try:
        used = run_data(cfg, load_data(cfg))
    except SkillOptError as exc:
        return Check("data", False, exc.message)
    try:
        mode = decide_simulation(cfg)
    except ConfigError:
        return Check("data", True, used.line())  # the models check says what is wrong
    try:
        refuse_sample(cfg, mode, used, command="train")
    except ConfigError as exc:
        return Check("data", False, exc.message)
    return Check("data", True, used.line())


def preflight(cfg: Config) -> list[Check]:
    """Run every check for ``cfg`` (a built, hence valid, config)."""
    checks = [
        Check("config", True, f"valid ({cfg.env.name}, agent {cfg.env.agent})"),
        _models(cfg),
        _data(cfg),
    ]
    checks += _fleet(cfg) if cfg.sandbox.endpoints else _embedded(cfg)
    return checks
