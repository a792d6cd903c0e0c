"""A run's own config, mode and skills, read back from its directory.

``skillopt train --resume DIR`` and ``skillopt eval --run DIR`` both start from what the run
recorded: the effective config in ``config.json`` (:class:`~skillopt.trainer.rundir.ConfigRecord`: the
run added a ``derived`` section of facts it worked out, which is not a config key and never
accepted from a user's file), the mode it ran in (real models or the simulation), and the skill versions it wrote::

    cfg = run_config(Path("runs/demo"), overrides=["env.workers=4"])
    mode = recorded_mode(Path("runs/demo"))      # RunMode | None
    path = run_skill(Path("runs/demo"), "best")  # best_skill/<name>/ or best_skill.md
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from skillopt.config import Config, with_overrides
from skillopt.errors import ConfigError
from skillopt.trainer.rundir import ConfigRecord, RecordError, RunDirectory, layout
from skillopt.trainer.state import RunMode

__all__ = ["SKILL_CHOICES", "is_run_skill_name", "recorded_mode", "run_config", "run_skill"]

#: The names ``--skill`` takes besides a path, with ``--run`` (and ``vN``, the version after step N).
SKILL_CHOICES = ("best", "final", "initial")

#: ``v3``, ``v0003``: the skill version after that step (``v0`` is the initial skill).
VERSION_RE = re.compile(r"^v(\d+)$")


def is_run_skill_name(name: str) -> bool:
    """Whether ``name`` names one of a run's skills (``best``, ``final``, ``initial``, ``vN``)."""
    return name in SKILL_CHOICES or VERSION_RE.match(name) is not None


def _saved_config(run_dir: Path) -> ConfigRecord:
    """``run_dir``'s ``config.json``.

    Raises:
        ConfigError: there is none, or it is damaged (not a config this skillopt reads).
    """
    try:
        record = RunDirectory(run_dir, failpoint=None).config()
    except RecordError as exc:
        raise ConfigError(
            f"{run_dir / layout.CONFIG} {exc}; the run's config cannot be recovered from it. "
            "Start a new run with the same --config"
        ) from None
    if record is None:
        raise ConfigError(
            f"{run_dir} is not a run directory (no {layout.CONFIG}); give the folder that "
            "skillopt train wrote (--out), e.g. runs/<env>_<timestamp>"
        )
    return record


def run_config(run_dir: Path, overrides: Sequence[str] = ()) -> Config:
    """The config ``run_dir`` ran with, resolved on this machine, with ``overrides``
    (``KEY=VALUE``) applied.

    Raises:
        ConfigError: ``run_dir`` holds no ``config.json``, it is damaged, or an override is bad
            (or the config names an env or a path this machine lacks).
    """
    return with_overrides(_saved_config(run_dir).config, list(overrides))


def recorded_mode(run_dir: Path) -> RunMode | None:
    """The mode ``run_dir`` ran in (its state's, else its config's ``derived`` record), or
    ``None`` when it recorded none (or the files are unreadable)."""
    store = RunDirectory(run_dir, failpoint=None)
    try:
        state = store.state()
    except RecordError:
        state = None
    mode = state.run_mode if state is not None else None
    if mode is not None:
        return mode
    try:
        config = store.config()
    except RecordError:
        return None
    return config.derived.mode if config is not None else None


def _only_folder(parent: Path) -> Path | None:
    """The one package folder under ``parent`` (``best_skill/<name>/``), else ``None``."""
    if not parent.is_dir():
        return None
    folders = [p for p in parent.iterdir() if p.is_dir() and not p.name.startswith(".")]
    return folders[0] if len(folders) == 1 else None


def run_skill(run_dir: Path, which: str) -> Path:
    """The skill ``which`` of the run in ``run_dir``, as the package folder the run wrote when
    there is one, else its SKILL.md file.

    ``best`` is ``best_skill/<name>/`` (else ``best_skill.md``); ``final`` is the skill after
    the run's last step, ``initial`` the one it started from and ``vN`` the one after step N:
    ``skill_packages/vNNNN/<name>/`` (else ``skills/skill_vNNNN.md``).

    Raises:
        ConfigError: ``which`` is none of these, or the run has not written that skill yet.
    """
    if which == "best":
        found = _only_folder(run_dir / layout.BEST_SKILL_DIR)
        if found is None and (run_dir / layout.BEST_SKILL).is_file():
            found = run_dir / layout.BEST_SKILL
        if found is None:
            raise ConfigError(
                f"{run_dir} has no best skill yet ({layout.BEST_SKILL_DIR}/<name>/ or {layout.BEST_SKILL}; "
                "written once the baseline is measured); evaluate its last version with --skill final"
            )
        return found
    version = VERSION_RE.match(which)
    if which not in SKILL_CHOICES and version is None:
        raise ConfigError(
            f"--skill takes {', '.join(SKILL_CHOICES)}, vN (the version after step N) or a path, got {which!r}"
        )
    skills = run_dir / layout.SKILLS
    steps = sorted(
        int(m.group(1))
        for p in (skills.iterdir() if skills.is_dir() else ())
        if (m := layout.SKILL_FILE_RE.match(p.name))
    )
    if not steps:
        raise ConfigError(
            f"{run_dir} has no skill versions yet (no {layout.SKILLS}/skill_v*.md): it never started "
            f"training; continue it with: skillopt train --resume {run_dir}"
        )
    step = (
        steps[-1]
        if which == "final"
        else 0
        if which == "initial"
        else int(version.group(1))
        if version
        else 0
    )
    if step not in steps:
        raise ConfigError(
            f"{run_dir} has no skill version {which} (it has v0 to v{steps[-1]}: the version after each step)"
        )
    return _only_folder(run_dir / layout.skill_package_dir(step)) or run_dir / layout.skill_file(step)
