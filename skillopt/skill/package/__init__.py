"""Agent Skills packages (agentskills.io): load one from disk, check it, write it, index it.

A package is a folder named after the skill holding ``SKILL.md`` (YAML front matter with
``name`` and ``description``, then the body) and optional files, by convention under
``scripts/`` (code the agent runs), ``references/`` (documents read on demand) and ``assets/``
(templates, data). In memory it is a :class:`skillopt.types.SkillVersion`: ``content`` is the
text of SKILL.md, ``files`` the rest. A lone SKILL.md without front matter is the one-file
case every skill was before packages; it gets a front matter when written as a package.

Two sets of rules apply (:func:`package_problems`): the standard's, through its reference
implementation (PyPI ``skills-ref``: front-matter parser, allowed fields, name and description
rules), and ours, which keep a package safe to move and mount: relative paths without ``..``,
no symlinks or special files, at most :class:`PackageLimits` files and bytes, text in UTF-8
outside ``assets/``, and an ASCII name (the standard also allows Unicode letters).

The parts, each in its own module, everything imported from here (``skillopt.skill.package``):
``_rules.py`` (the limits, the front matter and every rule), ``_read.py`` (reading a folder or
a lone SKILL.md), ``_write.py`` (writing a package folder), ``_index.py`` (the list of files an
agent is shown).

Usage::

    spec = load_skill(Path("my-skill"))            # a folder, or a single SKILL.md
    write_package(spec, run_dir / "skills" / "v0001")   # -> run_dir/skills/v0001/my-skill/
    print(file_index(spec))                         # what an agent is told is there
"""

from __future__ import annotations

from skillopt.skill.package._index import file_index
from skillopt.skill.package._read import load_skill, read_skill
from skillopt.skill.package._rules import (
    DEFAULT_SKILL_NAME,
    SKILL_MD,
    PackageLimits,
    PackageProblem,
    SkillPackageError,
    as_package,
    check_package,
    front_matter,
    package_problems,
)
from skillopt.skill.package._write import write_package

__all__ = [
    "DEFAULT_SKILL_NAME",
    "SKILL_MD",
    "PackageLimits",
    "PackageProblem",
    "SkillPackageError",
    "as_package",
    "check_package",
    "file_index",
    "front_matter",
    "load_skill",
    "package_problems",
    "read_skill",
    "write_package",
]
