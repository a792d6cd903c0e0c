"""Installing a skill package where an agent harness discovers it: the one implementation,
used by ``skillopt skill install`` and by ``skillopt sleep adopt`` / ``revert``.

Each harness reads ``<name>/`` subfolders of a skills folder, one for the project and one for
the user (:func:`skills_root`). :func:`install_skill` writes the package there through
:func:`skillopt.skill.package.write_package` (a temporary sibling, then a rename: a harness
never sees half a package). A different skill already installed under the name is replaced
only when asked (``force``); the same skill is left as it is.

Usage::

    root = skills_root("claude-code", "project", Path.cwd())   # ./.claude/skills
    outcome = install_skill(spec, root)                          # -> ./.claude/skills/<name>/
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from skillopt.errors import SkillError, SkillInstallRefused
from skillopt.skill.package import load_skill, write_package
from skillopt.types import SkillVersion

__all__ = [
    "HARNESSES",
    "Harness",
    "InstallOutcome",
    "Scope",
    "install_skill",
    "installed_skill",
    "remove_skill",
    "skills_root",
]

Harness = Literal["claude-code", "codex"]
Scope = Literal["project", "user"]

#: Each harness: its name as printed, and the folder (under the project, or under HOME for the
#: user scope) whose <name>/ subfolders it discovers as skills.
HARNESSES: dict[str, tuple[str, str]] = {
    "claude-code": ("Claude Code", ".claude/skills"),
    "codex": ("Codex", ".agents/skills"),
}


def skills_root(harness: str, scope: str, project: Path, *, env: Mapping[str, str] | None = None) -> Path:
    """The folder whose ``<name>/`` subfolders ``harness`` discovers as skills.

    Claude Code reads ``<project>/.claude/skills`` and ``~/.claude/skills`` (or
    ``$CLAUDE_CONFIG_DIR/skills`` when that is set); Codex reads ``.agents/skills`` from the
    working folder up to the repository root and ``~/.agents/skills`` (measured in
    reference/agent-clis.md §4-5; OpenAI's Codex docs name ``$HOME/.agents/skills`` the user
    location).

    Args:
        env: the environment to read ``CLAUDE_CONFIG_DIR`` from (default ``os.environ``).
    """
    env = os.environ if env is None else env
    sub = HARNESSES[harness][1]
    if scope == "project":
        return project / sub
    if harness == "claude-code" and env.get("CLAUDE_CONFIG_DIR"):
        return Path(env["CLAUDE_CONFIG_DIR"]) / "skills"
    return Path.home() / sub


@dataclass(frozen=True, slots=True)
class InstallOutcome:
    """What :func:`install_skill` did: ``path`` is the installed folder; ``replaced`` the skill
    that was there before (``None``: nothing, or not a valid package); ``unchanged`` the same
    skill was already installed, so nothing was written."""

    path: Path
    replaced: SkillVersion | None
    unchanged: bool


def installed_skill(dest: Path) -> SkillVersion | None:
    """The valid skill package at ``dest``, or ``None`` when nothing is there.

    Raises:
        SkillError: something is there but it is not a valid package (its problems listed).
    """
    if not dest.is_symlink() and not dest.exists():
        return None
    return load_skill(dest)


def install_skill(spec: SkillVersion, root: Path, *, force: bool = False) -> InstallOutcome:
    """Write ``spec`` as ``root/<name>/``, where a harness discovers it.

    The caller checks the package first (:func:`skillopt.skill.package.check_package`).

    Raises:
        SkillInstallRefused: a different skill (or a folder that is not a valid package) is
            installed under that name and ``force`` is off; its ``there`` says which.
        OSError: the folder cannot be written (nothing half-written is left).
    """
    dest = root / spec.name
    there: SkillVersion | None = None
    if dest.is_symlink() or dest.exists():
        try:
            there = load_skill(dest)
        except SkillError:
            there = None
        if there is not None and there.tree_sha256 == spec.tree_sha256:
            return InstallOutcome(path=dest, replaced=there, unchanged=True)
        if not force:
            raise SkillInstallRefused(dest, there)
    return InstallOutcome(path=write_package(spec, root), replaced=there, unchanged=False)


def remove_skill(dest: Path) -> None:
    """Take the installed skill folder ``dest`` away: renamed aside first (a harness sees it
    whole or not at all), then deleted; a symlink is removed, never what it points to."""
    if not dest.is_symlink() and not dest.exists():
        return
    old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old.", dir=dest.parent))
    dest.rename(old / dest.name)
    shutil.rmtree(old, ignore_errors=True)
