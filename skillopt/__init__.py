"""skillopt: train an agent's skill document with a training-loop discipline.

The public surface, for a library user (everything else is reachable by its module path but
may change)::

    from skillopt import Trainer, load_config, load_env_data
    cfg = load_config("searchqa_demo")
    data = load_env_data(cfg.env.name)
    result = Trainer(cfg, data=data, rollouts=..., optimizer=..., out_dir=..., initial_skill=data.initial_skill()).fit()

* the trainer: :class:`Trainer`, :class:`Callback` (hooks that take events),
  :class:`RunControl`, and the typed results :class:`FitResult`, :class:`StepRecord`,
  :class:`EpochRecord`;
* the config: :class:`Config`, :func:`load_config`, :func:`config_from_dict`,
  :func:`with_overrides`;
* the env contract: :func:`load_env_data`, :func:`get_env`, :func:`available_envs`,
  :class:`EnvData`, :class:`TaskItem`, :class:`Environment`;
* the rollout types: :class:`RolloutRequest`, :class:`RolloutResult` (with its
  :class:`InfraFailure`), :class:`Task`, :class:`Grading`, :class:`Limits`, :class:`ModelSpec`,
  :class:`SkillVersion`, :class:`Usage`;
* the error tree (:mod:`skillopt.errors`, drawn in its docstring): :class:`SkillOptError` and
  its families :class:`ConfigError`, :class:`SkillError`, :class:`ModelError`,
  :class:`InfraError`, :class:`SystemicFailure`.

The sandbox client and the fleet are ``controller``'s (:class:`controller.SandboxClient`); a
sandbox host in this process is ``sandbox``'s (:func:`sandbox.serve`). Names are imported on
first use, so ``import skillopt`` stays cheap (the grader's worker processes import it).
"""

from __future__ import annotations

from skillopt._lazy import lazy_exports

__version__ = "0.1.0"

#: Public name → the module that defines it.
_EXPORTS = {
    "Callback": "skillopt.trainer.callbacks",
    "Config": "skillopt.config",
    "ConfigError": "skillopt.errors",
    "EnvData": "skillopt.envs.base",
    "Environment": "skillopt.envs.base",
    "EpochRecord": "skillopt.trainer.summary",
    "FitResult": "skillopt.trainer.summary",
    "Grading": "skillopt.types",
    "InfraError": "skillopt.errors",
    "InfraErrorKind": "skillopt.types",
    "InfraFailure": "skillopt.types",
    "Limits": "skillopt.types",
    "ModelError": "skillopt.errors",
    "ModelSpec": "skillopt.types",
    "RolloutRequest": "skillopt.types",
    "RolloutResult": "skillopt.types",
    "RunControl": "skillopt.trainer.callbacks",
    "SkillError": "skillopt.errors",
    "SkillOptError": "skillopt.errors",
    "SkillVersion": "skillopt.types",
    "StepRecord": "skillopt.trainer.records",
    "SystemicFailure": "skillopt.errors",
    "Task": "skillopt.types",
    "TaskItem": "skillopt.envs.base",
    "Trainer": "skillopt.trainer.trainer",
    "Usage": "skillopt.types",
    "available_envs": "skillopt.envs.registry",
    "config_from_dict": "skillopt.config",
    "get_env": "skillopt.envs.registry",
    "load_config": "skillopt.config",
    "load_env_data": "skillopt.envs.registry",
    "with_overrides": "skillopt.config",
}

__all__ = ["__version__", *sorted(_EXPORTS)]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
