"""Run configuration: typed, frozen, validated; loaded from YAML with ``_base_`` and ``--set``.

::

    from skillopt.config import load_config
    cfg = load_config("spreadsheetbench_demo", ["train.batch_size=10"])
    cfg.train.batch_size          # 10
    cfg.to_dict()                 # redacted plain data, e.g. for config.json

Unknown keys are errors with a suggestion, never dropped; see :func:`load_config`.
"""

from skillopt.config.builtin import builtin_config, list_builtin_configs
from skillopt.config.loader import config_from_dict, explain_config, load_config, with_overrides
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
    "with_overrides",
]
