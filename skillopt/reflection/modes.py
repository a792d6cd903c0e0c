"""Skill update modes (reference §7.1): what the analysts produce and how it is applied.

=================================  ======================  ============  =====================
mode (aliases)                     payload key             select        update
=================================  ======================  ============  =====================
``patch`` (edits)                  ``edits``               rank + clip   apply edits
``rewrite_from_suggestions``       ``revise_suggestions``  rank + clip   one LLM rewrite
(rewrite, suggestions,
rewrite_suggestions)
``full_rewrite_minibatch``         ``skill_candidates``    none          take ``new_skill``
(full_rewrite,
minibatch_full_rewrite,
skill_rewrite_minibatch)
=================================  ======================  ============  =====================

Unlike the reference, an unknown mode name is an error (it silently fell back to ``patch``,
so a typo trained a different method than the one configured).
"""

from __future__ import annotations

from typing import Literal

from skillopt.errors import ConfigError

__all__ = [
    "PAYLOAD_KEYS",
    "UPDATE_MODES",
    "PayloadKind",
    "UpdateMode",
    "normalize_update_mode",
    "payload_key",
    "prompt_suffix",
]

UpdateMode = Literal["patch", "rewrite_from_suggestions", "full_rewrite_minibatch"]
PayloadKind = Literal["edits", "revise_suggestions", "skill_candidates"]

UPDATE_MODES: tuple[str, ...] = ("patch", "rewrite_from_suggestions", "full_rewrite_minibatch")
PAYLOAD_KEYS: dict[str, PayloadKind] = {
    "patch": "edits",
    "rewrite_from_suggestions": "revise_suggestions",
    "full_rewrite_minibatch": "skill_candidates",
}
_ALIASES: dict[str, UpdateMode] = {
    "patch": "patch",
    "edits": "patch",
    "rewrite_from_suggestions": "rewrite_from_suggestions",
    "rewrite": "rewrite_from_suggestions",
    "suggestions": "rewrite_from_suggestions",
    "rewrite_suggestions": "rewrite_from_suggestions",
    "full_rewrite_minibatch": "full_rewrite_minibatch",
    "full_rewrite": "full_rewrite_minibatch",
    "minibatch_full_rewrite": "full_rewrite_minibatch",
    "skill_rewrite_minibatch": "full_rewrite_minibatch",
}
_SUFFIX = {"patch": "", "rewrite_from_suggestions": "_rewrite", "full_rewrite_minibatch": "_full_rewrite"}


def normalize_update_mode(mode: str) -> UpdateMode:
    """The canonical mode name for ``mode`` or one of its aliases (case-insensitive).

    Raises:
        ConfigError: unknown mode; the message lists the accepted names.
    """
    key = str(mode).strip().lower().replace("-", "_")
    if key not in _ALIASES:
        raise ConfigError(
            f"unknown skill update mode {mode!r}; expected one of {', '.join(sorted(_ALIASES))}"
        )
    return _ALIASES[key]


def payload_key(mode: str) -> PayloadKind:
    """The payload list key of ``mode`` (``edits`` / ``revise_suggestions`` / ``skill_candidates``)."""
    return PAYLOAD_KEYS[normalize_update_mode(mode)]


def prompt_suffix(mode: str) -> str:
    """Prompt-name suffix of ``mode``: ``""``, ``"_rewrite"`` or ``"_full_rewrite"``."""
    return _SUFFIX[normalize_update_mode(mode)]
