"""Run configuration: typed, frozen, validated; loaded from YAML with ``_base_`` and ``--set``.

::

    from skillopt.config import load_config
    cfg = load_config("spreadsheetbench_demo", ["train.batch_size=10"])
    cfg.train.batch_size          # 10
    cfg.to_dict()                 # redacted plain data, e.g. for config.json

Unknown keys are errors with a suggestion, never dropped; see :func:`load_config`.

Two steps, kept apart: building a :class:`Config` checks it on its own (types, declared bounds
and choices, the rules between fields: no file read, no registry asked), and :func:`resolve_config`
does the look-ups (the env and its agent and options, the paths that must exist). The loader
(:func:`load_config`, :func:`config_from_dict`, :func:`with_overrides`) runs both, once; a
config built in Python is resolved with ``resolve_config(Config(...))`` before it runs.
"""

from skillopt.config._keys import unknown_key_message
from skillopt.config._resolve import resolve_config
from skillopt.config.builtin import builtin_config, list_builtin_configs
from skillopt.config.loader import (
    config_from_dict,
    explain_config,
    load_config,
    read_yaml_mapping,
    with_overrides,
)
from skillopt.config.schema import (
    SECTIONS,
    Config,
    EnvConfig,
    EvaluationConfig,
    GradientConfig,
    ModelConfig,
    ModelPrice,
    OptimizerConfig,
    RunConfig,
    SandboxConfig,
    TrainConfig,
)

__all__ = [
    "SECTIONS",
    "Config",
    "EnvConfig",
    "EvaluationConfig",
    "GradientConfig",
    "ModelConfig",
    "ModelPrice",
    "OptimizerConfig",
    "RunConfig",
    "SandboxConfig",
    "TrainConfig",
    "builtin_config",
    "config_from_dict",
    "explain_config",
    "list_builtin_configs",
    "load_config",
    "read_yaml_mapping",
    "resolve_config",
    "unknown_key_message",
    "with_overrides",
]
