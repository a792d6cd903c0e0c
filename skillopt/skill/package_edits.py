"""Edits of a whole package: each edit names its file, and files can be created and deleted.

Edits apply to a version's packed text (:mod:`skillopt.skill.packed`). An edit's ``file``
(``SKILL.md`` by default) picks the text it applies to with the document ops of
:func:`~skillopt.skill.edits.apply_edits`; ``create_file`` writes a new file (under
``scripts/`` it is executable) and ``delete_file`` removes one. Edits apply in order, and after
every edit the package is checked against the standard's rules and ours
(:func:`~skillopt.skill.package.package_problems`): an edit that breaks one (a description
over 1,024 characters, a renamed skill, a path with ``..``, a package over its limits) is
undone and reported ``skipped_invalid_package`` with the rule, and the others stand. Files the
optimizer cannot edit (binary or large, kept in the frame) are reported
``skipped_file_not_editable``.

Usage::

    skill = load_skill(Path("my-skill"))
    result = apply_package_edits(skill, patch.edits, frame=PackageFrame.of(skill))
    candidate = result.skill
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from skillopt.skill.document import remove_protected_markers
from skillopt.skill.edits import DEFAULT_FILE, ApplySummary, Edit, EditReport, apply_edits
from skillopt.skill.package import PackageLimits, package_problems
from skillopt.skill.packed import FileSection, PackageFrame, join_packed, split_packed
from skillopt.types import SkillVersion

__all__ = ["SCRIPTS", "PackageApplyResult", "apply_package_edits", "changed_paths"]

#: Files under this folder are scripts: created executable, checked before evaluation.
SCRIPTS = "scripts/"


@dataclass(frozen=True, slots=True)
class PackageApplyResult:
    """Output of :func:`apply_package_edits`.

    Attributes:
        skill: The new version (the input is never changed).
        text: Its packed text (what ``candidate_skill.md`` keeps).
        reports: One per edit, in order, each naming its file.
        summary: Counts over ``reports``.
        changed: Whether the version differs from the input.
        changed_files: Paths created, changed or deleted (``SKILL.md`` included), sorted.
    """

    skill: SkillVersion
    text: str
    reports: tuple[EditReport, ...] = ()
    summary: ApplySummary = field(default_factory=ApplySummary)
    changed: bool = False
    changed_files: tuple[str, ...] = ()


def changed_paths(before: Mapping[str, FileSection], after: Mapping[str, FileSection]) -> tuple[str, ...]:
    """Paths whose file was created, deleted, or changed in text or executable bit."""
    return tuple(sorted(p for p in {*before, *after} if before.get(p) != after.get(p)))


def _docs(text: str) -> dict[str, FileSection]:
    skill_md, sections = split_packed(text)
    return {DEFAULT_FILE: FileSection(DEFAULT_FILE, skill_md), **sections}


def _join(docs: Mapping[str, FileSection]) -> str:
    return join_packed(docs[DEFAULT_FILE].text, [s for p, s in docs.items() if p != DEFAULT_FILE])


def _report(index: int, edit: Edit, status: str, error: str = "") -> EditReport:
    content = remove_protected_markers(edit.content).strip()
    return EditReport.of(index, edit.op, edit.target, content, status, error=error, file=edit.file)


def _file_text(content: str) -> str:
    text = remove_protected_markers(content).replace("\r\n", "\n").replace("\r", "\n")
    return text if not text or text.endswith("\n") else text + "\n"


def _apply_one(
    docs: dict[str, FileSection], index: int, edit: Edit, *, fixed: set[str], whitespace_tolerant: bool
) -> EditReport:
    """Apply one edit to ``docs`` in place; its report."""
    path = edit.file
    if path in fixed:
        return _report(index, edit, "skipped_file_not_editable", f"{path} is binary or large: it rides along")
    if edit.op == "create_file":
        if path in docs:
            return _report(index, edit, "skipped_file_exists", f"{path} exists: edit it or delete it first")
        docs[path] = FileSection(path, _file_text(edit.content), executable=path.startswith(SCRIPTS))
        return _report(index, edit, "applied_create_file")
    if edit.op == "delete_file":
        if path not in docs:
            return _report(index, edit, "skipped_file_not_found", f"{path} is not in the package")
        del docs[path]
        return _report(index, edit, "applied_delete_file")
    current = docs.get(path)
    if current is None:
        return _report(
            index, edit, "skipped_file_not_found", f"{path} is not in the package (create_file makes it)"
        )
    result = apply_edits(current.text, [edit], whitespace_tolerant=whitespace_tolerant)
    docs[path] = dataclasses.replace(current, text=result.text)
    return dataclasses.replace(result.reports[0], index=index)


def apply_package_edits(
    skill: SkillVersion,
    edits: Iterable[Edit | Mapping[str, Any]],
    *,
    frame: PackageFrame,
    limits: PackageLimits | None = None,
    whitespace_tolerant: bool = False,
    drop_files: Mapping[str, str] | None = None,
) -> PackageApplyResult:
    """Apply edits in order to a version's packed text, checking the package after each one.

    Args:
        skill: The current version (never changed).
        edits: Edits or plain mappings (:meth:`Edit.from_dict`).
        frame: The run's frame (:class:`~skillopt.skill.packed.PackageFrame`: name, front
            matter, files the optimizer cannot edit).
        limits: The package's limits (files, bytes; default :class:`PackageLimits`).
        whitespace_tolerant: As for :func:`apply_edits`.
        drop_files: Files whose edits are dropped, with the reason (a script that failed its
            check): reported ``skipped_script_check_failed``.

    Returns:
        The new version and its text, one report per edit and the files that changed.
    """
    limits = limits or PackageLimits()
    text = frame.text(skill)
    start = _docs(text)
    docs = dict(start)
    fixed = {f.path for f in frame.files}
    known = {str(p) for p in package_problems(skill, limits)}
    dropped = drop_files or {}
    reports: list[EditReport] = []
    for index, raw in enumerate(edits, 1):
        try:
            edit = raw if isinstance(raw, Edit) else Edit.from_dict(raw)
        except Exception as exc:  # one bad edit must not sink the patch
            reports.append(EditReport(index, "", "", "", "error", None, f"{type(exc).__name__}: {exc}"))
            continue
        if edit.file in dropped:
            reports.append(_report(index, edit, "skipped_script_check_failed", dropped[edit.file]))
            continue
        before = dict(docs)
        try:
            report = _apply_one(docs, index, edit, fixed=fixed, whitespace_tolerant=whitespace_tolerant)
        except Exception as exc:
            docs = before
            report = _report(index, edit, "error", f"{type(exc).__name__}: {exc}")
        if report.applied and docs != before:
            broken = [p for p in package_problems(frame.version(_join(docs)), limits) if str(p) not in known]
            if broken:
                docs = before
                report = _report(index, edit, "skipped_invalid_package", "; ".join(str(p) for p in broken))
        reports.append(report)
    new = frame.version(_join(docs)) if docs != start else skill
    return PackageApplyResult(
        skill=new,
        text=frame.text(new) if new is not skill else text,
        reports=tuple(reports),
        summary=ApplySummary.of(reports),
        changed=new != skill,
        changed_files=changed_paths(start, docs),
    )
