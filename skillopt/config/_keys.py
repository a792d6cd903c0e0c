"""Tables that turn keys we do not accept into messages that say what to write instead.

Nothing here changes what is accepted: every key listed below is *rejected*; the tables only
choose the message. The names come from the reference implementation's configs and CLI
(reference §2), so a config written for it fails with a pointer to our spelling.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from types import MappingProxyType

from skillopt.logs import is_secret_key

__all__ = ["LEGACY_FLAT", "MOVED", "PROVIDER_PREFIXES", "RETIRED", "SECRET_HINT", "unknown_key_message"]

#: Reference flat names whose structured path differs from ``<section>.<same name>``
#: (names equal to a schema field are derived from the schema itself, see skillopt/config/schema/).
LEGACY_FLAT = MappingProxyType(
    {
        "edit_budget": "optimizer.learning_rate",
        "min_edit_budget": "optimizer.min_learning_rate",
        "env": "env.name",
        "optimizer_model": "model.optimizer",
        "target_model": "model.target",
        "optimizer_backend": "model.optimizer_provider",
        "target_backend": "model.target_provider",
        "backend": "model.optimizer_provider and model.target_provider",
        "model_backend": "model.optimizer_provider and model.target_provider",
        "random_seed": "train.seed",
        "mode": "env.agent",
        "data_path": "env.data_root",
        "split_dir": "env.data_root",
    }
)

#: Structured keys of the reference that live elsewhere here (or are spelled differently).
MOVED = MappingProxyType(
    {
        "env.out_root": "run.out_root",
        "env.mode": "env.agent (single → codegen_single, multi → codegen_multi)",
        "env.data_path": "env.data_root",
        "env.split_dir": "env.data_root (a directory holding splits.json, with env.split_mode=split_file)",
        "env.split_output_dir": "run.out_root (generated splits are written inside the run directory)",
        "env.max_completion_tokens": "model.max_completion_tokens",
        "env.timeout": "env.exec_timeout (per code execution) or env.task_timeout (whole rollout)",
        "model.backend": "model.optimizer_provider and model.target_provider (provider profiles)",
        "model.optimizer_backend": "model.optimizer_provider",
        "model.target_backend": "model.target_provider",
        "train.random_seed": "train.seed",
        "optimizer.edit_budget": "optimizer.learning_rate",
        "optimizer.min_edit_budget": "optimizer.min_learning_rate",
    }
)

#: Keys that were retired or never had an effect, with the reason shown to the user.
RETIRED = MappingProxyType(
    {
        "gradient.max_analyst_rounds": (
            "was retired: it never reached reflection and so never had an effect "
            "(reference issues #213, #219); remove it"
        ),
        "optimizer.meta_learning_rate": "was mapped by the reference but never used; remove it",
        "train.steps_per_epoch": (
            "is derived, not set: ceil(train_size / (batch_size * accumulation)); "
            "set train.train_size, train.batch_size or train.accumulation instead"
        ),
    }
)

#: Prefixes of the reference's per-provider model keys (Azure, Qwen, MiniMax, Codex...).
PROVIDER_PREFIXES = (
    "azure_",
    "optimizer_azure",
    "target_azure",
    "qwen_",
    "optimizer_qwen",
    "target_qwen",
    "minimax_",
    "optimizer_minimax",
    "target_minimax",
    "codex_",
    "claude_",
    "cursor_",
    "copilot_",
)

SECRET_HINT = (
    "keys are never read from a config file: export the key in an environment variable and "
    "name it with api_key_env (or api_key_file) in a provider profile (model.providers_file; "
    "see skillopt/models/profiles.py)"
)


def unknown_key_message(path: str, name: str, valid: Sequence[str], *, where: str = "") -> str:
    """The message for an unknown key: a close match if there is one, else the valid keys.

    Args:
        path: the full dotted key as written (``train.batch_sise``).
        name: its last component (``batch_sise``).
        valid: the names allowed at that place.
        where: appended after the key, e.g. ``" in configs/x.yaml"``.

    Only key names appear in the message, never values: an unknown key may hold a secret.
    """
    prefix = path[: len(path) - len(name)]
    close = difflib.get_close_matches(name, list(valid), n=1, cutoff=0.6)
    if close:
        text = f"unknown key {path!r}{where}; did you mean {prefix + close[0]!r}?"
    else:
        scope = f"of {prefix[:-1]!r} " if prefix else ""
        text = f"unknown key {path!r}{where}; valid keys {scope}are: {', '.join(valid)}"
    if is_secret_key(name):
        text += f". {path!r} looks like a secret: {SECRET_HINT}"
    elif name.startswith(PROVIDER_PREFIXES):
        text += (
            ". Provider endpoints, keys and options live in provider profiles "
            "(model.providers_file; see skillopt/models/profiles.py)"
        )
    return text
