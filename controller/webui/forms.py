"""The "new run" form: which config keys it shows, and how its values become ``--set`` items.

The form is a view of the config system, not a second one: choices come from the schema's
``Literal`` types and each env's :class:`~skillopt.envs.base.EnvSpec`, the configs from
:func:`skillopt.config.list_builtin_configs` and the envs from
:func:`skillopt.envs.registry.available_envs` (an env without a config of its own is offered
on the shipped defaults), and every value is validated by building the config with
:func:`skillopt.config.load_config`, whose :class:`~skillopt.errors.ConfigError` message is
shown as it is.
"""

from __future__ import annotations

import re
import time
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from skillopt.config import SECTIONS, Config, list_builtin_configs, load_config
from skillopt.envs.registry import available_envs, find_spec
from skillopt.errors import ConfigError

__all__ = ["FIELDS", "ConfigChoice", "Field", "LaunchPlan", "config_choices", "form_values", "plan_launch"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$")
_DEFAULTS_CONFIG = "_base_/default"
#: The env the form opens on (the README's main job); the others follow by name.
_FIRST_ENV = "spreadsheetbench"


@dataclass(frozen=True)
class Field:
    """One form control for the config key ``key`` (``section.name``)."""

    key: str
    label: str
    kind: str  # number | text | bool | choice
    help: str = ""

    @property
    def section(self) -> str:
        return self.key.split(".", 1)[0]

    @property
    def name(self) -> str:
        return self.key.split(".", 1)[1]

    def choices(self, env: str) -> tuple[str, ...]:
        if self.key == "env.agent":
            spec = find_spec(env)
            return spec.agent_names if spec else ()
        return tuple(str(a) for a in typing.get_args(SECTIONS[self.section].field_type(self.name)))


FIELDS: tuple[Field, ...] = (
    Field("train.num_epochs", "Epochs", "number", "passes over the training split"),
    Field("train.batch_size", "Batch size", "number", "items rolled out per step"),
    Field("optimizer.learning_rate", "Edit budget", "number", "most edits applied per step"),
    Field("optimizer.min_learning_rate", "Edit budget floor", "number", "floor of the scheduled budget"),
    Field("optimizer.lr_scheduler", "Budget schedule", "choice"),
    Field(
        "optimizer.lr_control_mode", "Budget control", "choice", "scheduler (fixed), the optimizer, or none"
    ),
    Field(
        "evaluation.use_gate",
        "Validation gate",
        "bool",
        "accept a candidate only if it beats the current skill",
    ),
    Field("evaluation.gate_metric", "Gate metric", "choice"),
    Field("optimizer.use_slow_update", "Slow update", "bool", "end-of-epoch comparison of skills"),
    Field("optimizer.use_meta_skill", "Meta skill", "bool", "optimizer-facing notes across epochs"),
    Field("gradient.deep_reflect", "Deep reflect", "bool", "probe trajectories with extra target calls"),
    Field(
        "evaluation.eval_test", "Test evaluation", "bool", "evaluate initial, best and final skills on test"
    ),
    Field("env.agent", "Agent", "choice"),
    Field("env.workers", "Workers", "number", "rollouts in flight at once"),
    Field("model.optimizer", "Optimizer model", "text"),
    Field("model.optimizer_provider", "Optimizer provider", "text", "provider profile name"),
    Field("model.target", "Target model", "text"),
    Field("model.target_provider", "Target provider", "text", "provider profile name"),
    Field(
        "sandbox.endpoints",
        "Sandbox endpoints",
        "text",
        "host:port, comma-separated; empty = embedded local sandbox",
    ),
    Field(
        "run.simulate",
        "Simulation",
        "choice",
        "on = offline simulation with scripted models, on purpose; noisy = with a stochastic target",
    ),
    Field("train.max_tokens", "Token budget", "number", "0 = no limit"),
    Field("train.max_cost_usd", "Cost budget (USD)", "number", "0 = no limit"),
)


@dataclass(frozen=True)
class ConfigChoice:
    """A config the form offers: a shipped config, or an env on the shipped defaults."""

    id: str
    label: str
    env: str
    config: str
    base_overrides: tuple[str, ...] = ()

    def load(self, overrides: Sequence[str] = ()) -> Config:
        return load_config(self.config, [*self.base_overrides, *overrides])


def config_choices() -> list[ConfigChoice]:
    """Every shipped config (SpreadsheetBench's first), then every registered env that has
    none of its own."""
    out: list[ConfigChoice] = []
    seen_envs: set[str] = set()
    for name in list_builtin_configs():
        try:
            env = load_config(name).env.name
        except ConfigError:
            continue  # a config that does not build on this machine is not offered
        out.append(ConfigChoice(id=name, label=f"{name} ({env})", env=env, config=name))
        seen_envs.add(env)
    out.sort(key=lambda c: (c.env != _FIRST_ENV, c.id))
    for env in available_envs():
        if env not in seen_envs:
            out.append(
                ConfigChoice(
                    id=f"{env}@defaults",
                    label=f"{env} (shipped defaults)",
                    env=env,
                    config=_DEFAULTS_CONFIG,
                    base_overrides=(f"env.name={env}",),
                )
            )
    return out


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return "" if value is None else str(value)


def form_values(cfg: Config) -> dict[str, Any]:
    """The form's initial values (and choices) for a built config."""
    data = cfg.to_dict(redacted=True)
    return {
        f.key: {
            "value": data[f.section][f.name] if f.kind == "bool" else _show(data[f.section][f.name]),
            "choices": list(f.choices(cfg.env.name)),
        }
        for f in FIELDS
    }


def _override(field: Field, raw: Any) -> str:
    if field.kind == "bool":
        value = raw if isinstance(raw, str) else ("true" if raw else "false")
    elif field.key == "sandbox.endpoints":
        items = [p.strip() for p in str(raw or "").replace("\n", ",").split(",") if p.strip()]
        value = "[" + ",".join(items) + "]"
    else:
        value = str(raw if raw is not None else "").strip()
    return f"{field.key}={value}"


@dataclass(frozen=True)
class LaunchPlan:
    """A validated launch: the config, the ``--set`` items that differ from the chosen config,
    and the run name."""

    choice: ConfigChoice
    config: Config
    overrides: tuple[str, ...]
    name: str

    def set_args(self) -> list[str]:
        return [*self.choice.base_overrides, *self.overrides]


def plan_launch(form: Mapping[str, Any], *, existing: set[str]) -> LaunchPlan:
    """Validate the posted form with the config system.

    ``form`` holds ``config`` (a :class:`ConfigChoice` id), ``name`` (optional), ``values``
    (config key → value, for :data:`FIELDS`) and ``extra`` (more ``key=value`` lines).

    Raises:
        ConfigError: the config system's own message, or a bad run name.
    """
    choices = {c.id: c for c in config_choices()}
    choice = choices.get(str(form.get("config", "")))
    if choice is None:
        raise ConfigError(f"unknown config {form.get('config')!r}; available: {', '.join(choices)}")
    base = choice.load()
    values = form.get("values") or {}
    by_key = {f.key: f for f in FIELDS}
    unknown = [k for k in values if k not in by_key]
    if unknown:
        raise ConfigError(f"the form has no field {unknown[0]!r}")
    fields = [(by_key[k], _override(by_key[k], v)) for k, v in values.items()]
    extra = [line.strip() for line in str(form.get("extra") or "").splitlines() if line.strip()]
    if any("=" not in line for line in extra):
        bad = next(line for line in extra if "=" not in line)
        raise ConfigError(f"extra override {bad!r}: expected KEY=VALUE, e.g. train.seed=7")
    cfg = choice.load([o for _, o in fields] + extra)
    before, after = base.to_dict(redacted=False), cfg.to_dict(redacted=False)
    changed = [o for f, o in fields if before[f.section][f.name] != after[f.section][f.name]]
    name = str(form.get("name") or "").strip() or f"{cfg.env.name}_{time.strftime('%Y%m%d_%H%M%S')}"
    if not _NAME.match(name):
        raise ConfigError(
            f"run name {name!r}: use letters, digits, '.', '_' and '-' (up to 80, not starting with '.' or '-')"
        )
    if name in existing:
        raise ConfigError(f"a run named {name!r} exists already; choose another name or resume that run")
    return LaunchPlan(choice=choice, config=cfg, overrides=(*changed, *extra), name=name)
