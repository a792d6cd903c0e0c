"""Optimizer prompt texts: env-specific first, generic second.

``load_prompt("analyst_error", "spreadsheetbench")`` reads
``skillopt/envs/spreadsheetbench/prompts/analyst_error.md`` when it exists, else
``skillopt/prompts/analyst_error.md``. Texts are read once per process (they ship with the
package and do not change while a run is going).

Every prompt states its exact JSON output schema; the variable inputs (skill, trajectories,
budget) always travel in the user message, so the prompt files have no placeholders.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Literal

from skillopt.reflection.modes import prompt_suffix

__all__ = ["GENERIC_PROMPTS", "analyst_prompt_name", "analyst_system_prompt", "load_prompt"]

_PACKAGE = Path(__file__).resolve().parents[1]
GENERIC_PROMPTS = _PACKAGE / "prompts"
_ENVS = _PACKAGE / "envs"
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_]*$")

SourceKind = Literal["failure", "success"]


@cache
def load_prompt(name: str, env: str | None = None) -> str:
    """The text of prompt ``name``, env-specific when ``env`` ships one.

    Args:
        name: Prompt name without ``.md`` (lower-case letters, digits, ``_``).
        env: Env name (a folder under ``skillopt/envs/``) or ``None`` for generic only.

    Returns:
        The prompt text, stripped, with one trailing newline.

    Raises:
        ValueError: ``name`` or ``env`` is not a plain identifier (no paths).
        FileNotFoundError: neither file exists; the message names both paths.
    """
    if not _NAME_RE.match(name):
        raise ValueError(f"prompt name must be a plain identifier, got {name!r}")
    candidates: list[Path] = []
    if env:
        if not _NAME_RE.match(env):
            raise ValueError(f"env name must be a plain identifier, got {env!r}")
        candidates.append(_ENVS / env / "prompts" / f"{name}.md")
    candidates.append(GENERIC_PROMPTS / f"{name}.md")
    for path in candidates:
        if path.is_file():
            return path.read_text(encoding="utf-8").strip() + "\n"
    tried = " or ".join(str(p) for p in candidates)
    raise FileNotFoundError(f"prompt {name!r} not found (looked for {tried})")


def analyst_prompt_name(kind: SourceKind, update_mode: str) -> str:
    """``analyst_error`` / ``analyst_success`` plus the mode suffix (§6.3)."""
    base = "analyst_error" if kind == "failure" else "analyst_success"
    return base + prompt_suffix(update_mode)


def analyst_system_prompt(
    kind: SourceKind,
    *,
    env: str | None,
    update_mode: str = "patch",
    skill_aware: bool = False,
    skill_aware_source: str = "failure",
) -> str:
    """The analyst's system prompt, optionally with the skill-aware section (§7.7).

    With ``skill_aware=False`` the result is exactly :func:`load_prompt`'s text, byte for byte,
    so turning the feature off reproduces the baseline prompts. With it on, the failure analyst
    always gets the SKILL_DEFECT / EXECUTION_LAPSE section; the success analyst gets its
    (optional-notes) section only when ``skill_aware_source == "both"``.
    """
    base = load_prompt(analyst_prompt_name(kind, update_mode), env)
    if not skill_aware:
        return base
    if kind == "failure":
        return base + "\n" + load_prompt("skill_aware_failure", env)
    if str(skill_aware_source).strip().lower() == "both":
        return base + "\n" + load_prompt("skill_aware_success", env)
    return base
