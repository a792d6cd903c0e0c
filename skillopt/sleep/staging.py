"""Staging: a proposal the gate accepted, kept with its evidence until a person adopts it.

``skillopt sleep run`` calls :func:`stage_proposal` with the trained package and the evidence;
nothing is installed. ``skillopt sleep status`` lists what is staged (:func:`proposal_states`),
``adopt`` and ``revert`` (:mod:`skillopt.sleep.adopt`) act on it.

::

    <root>/.skillopt/sleep/
      staging/<UTC time>/           one staged proposal
        proposal/<name>/            the proposal package (copied)
        manifest.json               StagingManifest: hashes, where the live skill is, evidence
        REPORT.md                   the same for a person: per-file diff, then the evidence
      backups/<UTC time>/<name>/    what adopt (or revert) replaced
      receipts/<UTC time>-<name>[-revert].json

A staging folder is written whole under a hidden temporary name and renamed into place, so a
crash leaves either nothing or a complete folder; hidden folders and folders without a
readable manifest are never listed. The state of a proposal is worked out from the receipts and
the live skill, never stored: ``adopted`` (an adopt receipt names it), ``reverted`` (a revert
receipt undid that adoption), ``stale`` (the live skill's tree hash is no longer the one it was
staged against), else ``pending``.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import structlog
from pydantic import ValidationError

from skillopt.durable import atomic_write_text
from skillopt.errors import ProposalRejected, SkillError, SleepError
from skillopt.skill.diff import FileChange, diff_summary, package_diff
from skillopt.skill.install import installed_skill
from skillopt.skill.package import as_package, check_package, load_skill, write_package
from skillopt.sleep.proposal import Evidence, LiveSkill, Receipt, StagingManifest
from skillopt.types import SkillVersion
from skillopt.units import size_text

__all__ = [
    "MANIFEST",
    "REPORT",
    "ProposalState",
    "ProposalStatus",
    "StagedProposal",
    "live_tree_sha256",
    "load_receipts",
    "proposal_states",
    "sleep_dir",
    "stage_proposal",
    "staged_proposals",
    "time_stamp",
]

log = structlog.get_logger(__name__)

MANIFEST = "manifest.json"
REPORT = "REPORT.md"
PROPOSAL = "proposal"
STAGING = "staging"
BACKUPS = "backups"
RECEIPTS = "receipts"
#: What the live skill's hash is reported as when the folder is not a valid package.
NOT_A_PACKAGE = "not-a-valid-package"

ProposalState = Literal["pending", "adopted", "reverted", "stale"]


def sleep_dir(root: Path) -> Path:
    """The folder sleep keeps its files in: ``<root>/.skillopt/sleep``."""
    return root / ".skillopt" / "sleep"


def time_stamp(now: datetime) -> str:
    """A folder name for the UTC time ``now``: ``20261207T233000Z``."""
    return now.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")


@dataclass(frozen=True, slots=True)
class StagedProposal:
    """One staging folder and its manifest."""

    folder: Path
    manifest: StagingManifest

    @property
    def package_dir(self) -> Path:
        """The proposal package: ``proposal/<name>/``."""
        return self.folder / PROPOSAL / self.manifest.skill_name

    def load_package(self) -> SkillVersion:
        """The proposal package, checked to be the one staged.

        Raises:
            SleepError: it is missing, broken, or its tree hash is not the manifest's.
        """
        try:
            spec = load_skill(self.package_dir)
        except SkillError as exc:
            raise SleepError(
                f"{self.package_dir}: the staged package cannot be read ({exc}): stage it again"
            ) from exc
        if spec.tree_sha256 != self.manifest.proposal_tree_sha256:
            raise SleepError(
                f"{self.package_dir} was changed after staging (tree {spec.tree_sha256[:12]}, "
                f"staged {self.manifest.proposal_tree_sha256[:12]}): re-run skillopt sleep run to stage it again"
            )
        return spec


def live_tree_sha256(path: Path) -> str | None:
    """The tree hash of the skill installed at ``path``; ``None`` when nothing is there,
    :data:`NOT_A_PACKAGE` when something is but it is not a valid package."""
    try:
        spec = installed_skill(path)
    except SkillError:
        return NOT_A_PACKAGE
    return spec.tree_sha256 if spec is not None else None


def stage_proposal(
    root: Path,
    *,
    skill_name: str,
    proposal_dir: Path,
    evidence: Evidence,
    harness: str,
    scope: Literal["project", "user"],
    live_dir: Path,
    now: datetime | None = None,
) -> StagedProposal:
    """Stage the proposal package at ``proposal_dir`` under ``<root>/.skillopt/sleep/staging/``.

    Nothing is installed: a person adopts it (``skillopt sleep adopt``).

    Args:
        root: the project folder whose ``.skillopt/sleep/`` holds sleep's files.
        skill_name: the skill's name (the package folder's name, and ``live_dir``'s).
        proposal_dir: the trained package folder (e.g. the run's ``best_skill/<name>/``).
        evidence: the run's measurements; it must say the gate accepted.
        harness, scope: where the live skill is installed (``claude-code``/``codex``,
            ``project``/``user``).
        live_dir: the ``<name>/`` folder the harness reads (see
            :func:`skillopt.skill.install.skills_root`); it need not exist.
        now: the staging time (default: now, UTC).

    Returns:
        The staged proposal (its folder and manifest).

    Raises:
        ProposalRejected: the evidence says the gate did not accept (or a task regressed past
            the limit, or a script failed its check): nothing is written.
        SkillError: the proposal is not a valid package (each problem listed).
        SleepError: names disagree, the live folder is not a valid package, or the proposal is
            the live skill already.
    """
    refusal = evidence.refusal()
    if refusal:
        raise ProposalRejected(
            f"not staging {skill_name}: {refusal}. Nothing is staged; the live skill stays as it is"
        )
    proposal = check_package(as_package(load_skill(proposal_dir)), where=str(proposal_dir))
    if proposal.name != skill_name or live_dir.name != skill_name:
        raise SleepError(
            f"skill {skill_name!r}: the proposal package is named {proposal.name!r} and the live folder "
            f"{live_dir.name!r}; all three must be the same"
        )
    try:
        live_spec = installed_skill(live_dir)
    except SkillError as exc:
        raise SleepError(
            f"{live_dir} is not a valid skill package ({exc}): check it with skillopt skill validate"
        ) from exc
    live_hash = live_spec.tree_sha256 if live_spec is not None else None
    if live_hash == proposal.tree_sha256:
        raise SleepError(f"the proposal for {skill_name} is the live skill already: nothing to stage")
    now = now or datetime.now(UTC)
    manifest = StagingManifest(
        skill_name=skill_name,
        proposal_tree_sha256=proposal.tree_sha256,
        live=LiveSkill(harness=harness, scope=scope, path=str(live_dir.absolute()), tree_sha256=live_hash),
        evidence=evidence,
        created_at=now,
    )
    folder = _write_staging(sleep_dir(root) / STAGING, time_stamp(now), proposal, manifest, live_spec)
    log.info("sleep.staged", skill=skill_name, folder=str(folder), tree=proposal.tree_sha256[:12])
    return StagedProposal(folder=folder, manifest=manifest)


def _write_staging(
    parent: Path, stamp: str, proposal: SkillVersion, manifest: StagingManifest, live: SkillVersion | None
) -> Path:
    """Write the staging folder under a hidden name, then rename it to ``stamp`` (with a
    ``-N`` suffix when that is taken): a crash leaves no folder that looks staged."""
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{stamp}.", dir=parent))
    try:
        write_package(proposal, tmp / PROPOSAL)
        atomic_write_text(tmp / REPORT, render_report(manifest, live, proposal))
        atomic_write_text(tmp / MANIFEST, manifest.model_dump_json(indent=2) + "\n")
        for n in range(1, 1000):
            dest = parent / (stamp if n == 1 else f"{stamp}-{n}")
            try:
                tmp.rename(dest)  # fails when dest exists and is not empty
                return dest
            except OSError:
                if not dest.exists():
                    raise
        raise SleepError(f"{parent}: too many proposals staged at {stamp}")
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


# ── the report ────────────────────────────────────────────────────────────────────────────


def _change_line(c: FileChange) -> str:
    if c.status == "added":
        sizes = size_text(c.new_size or 0)
    elif c.status == "removed":
        sizes = size_text(c.old_size or 0)
    else:
        sizes = f"{size_text(c.old_size or 0)} -> {size_text(c.new_size or 0)}"
    notes = (
        [sizes] + (["binary"] if c.binary else []) + (["executable bit changed"] if c.mode_changed else [])
    )
    return f"### {c.status} `{c.path}` ({', '.join(notes)})"


def render_report(manifest: StagingManifest, live: SkillVersion | None, proposal: SkillVersion) -> str:
    """``REPORT.md``: what the proposal changes, file by file, then the evidence, in plain words."""
    ev, name = manifest.evidence, manifest.skill_name
    changes = package_diff(live or SkillVersion(name=name), proposal)
    lines = [
        f"# Proposal for the skill `{name}`",
        "",
        f"Staged {manifest.created_at:%Y-%m-%d %H:%M} UTC. Nothing is installed until you run "
        f"`skillopt sleep adopt --skill {name}`.",
        "",
        f"- Installed for {manifest.live.harness} ({manifest.live.scope} scope) at `{manifest.live.path}`",
        f"- Live skill: tree {manifest.live.tree_sha256[:12] if manifest.live.tree_sha256 else 'none (nothing installed yet)'}",
        f"- Proposal: tree {manifest.proposal_tree_sha256[:12]}",
        "",
        "## What changes",
        "",
        ("There is no live skill: every file is new. " if live is None else "") + f"{diff_summary(changes)}.",
    ]
    for c in changes:
        lines += ["", _change_line(c)]
        if c.diff:
            lines += ["", "```diff", c.diff.rstrip("\n"), "```"]
    lines += ["", *_evidence_lines(ev)]
    return "\n".join(lines) + "\n"


def _evidence_lines(ev: Evidence) -> list[str]:
    lines = [
        "## Evidence",
        "",
        "Scores are means over held-out tasks, with 95% intervals.",
        "",
        "| | live skill | proposal |",
        "|---|---|---|",
        f"| score | {ev.live.text()} | {ev.proposal.text()} |",
        "",
        "Gate decisions, in order: "
        + "; ".join(f"{g.action}" + (f" ({g.reason})" if g.reason else "") for g in ev.gate)
        + ".",
    ]
    regressed = [t.task_id for t in ev.tasks if t.regressed]
    if ev.tasks:
        lines += [
            f"Tasks that passed with the live skill and fail with the proposal: {len(regressed)} of "
            f"{len(ev.tasks)} ({ev.max_regressions} allowed)"
            + (f": {', '.join(regressed)}" if regressed else "")
            + ".",
            "",
            "| task | live | proposal | regressed |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| {t.task_id} | {_num(t.live)} | {_num(t.proposal)} | {'yes' if t.regressed else 'no'} |"
            for t in ev.tasks
        ]
    if ev.script_checks:
        lines += ["", f"Scripts checked in the sandbox: {len(ev.script_checks)}, all passed."]
    lines += [
        "",
        f"Sessions the tasks came from: {', '.join(ev.session_ids) or 'none recorded'}.",
        f"Training run: `{ev.run_dir}`." if ev.run_dir else "Training run: not recorded.",
    ]
    return lines


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


# ── reading what is staged ────────────────────────────────────────────────────────────────


def staged_proposals(root: Path) -> list[StagedProposal]:
    """Every complete staging folder, newest first. Hidden folders (a staging under way, or
    one a crash cut short) and folders whose manifest cannot be read are left out (logged)."""
    parent = sleep_dir(root) / STAGING
    if not parent.is_dir():
        return []
    found = []
    for folder in parent.iterdir():
        if folder.name.startswith(".") or not folder.is_dir():
            continue
        try:
            manifest = StagingManifest.model_validate_json((folder / MANIFEST).read_bytes())
        except (OSError, ValidationError) as exc:
            log.warning("sleep.staging_unreadable", folder=str(folder), error=str(exc)[:200])
            continue
        found.append(StagedProposal(folder=folder, manifest=manifest))
    return sorted(found, key=lambda s: (s.manifest.created_at, s.folder.name), reverse=True)


def load_receipts(root: Path) -> list[tuple[Path, Receipt]]:
    """Every readable receipt, oldest first (an unreadable one is logged and left out)."""
    parent = sleep_dir(root) / RECEIPTS
    if not parent.is_dir():
        return []
    out = []
    for path in sorted(parent.glob("*.json")):
        try:
            out.append((path, Receipt.model_validate_json(path.read_bytes())))
        except (OSError, ValidationError) as exc:
            log.warning("sleep.receipt_unreadable", path=str(path), error=str(exc)[:200])
    return sorted(out, key=lambda r: (r[1].created_at, r[0].name))


@dataclass(frozen=True, slots=True)
class ProposalStatus:
    """A staged proposal and its state; ``receipt`` is its latest adoption's receipt."""

    staged: StagedProposal
    state: ProposalState
    receipt: Path | None = None


def proposal_states(root: Path) -> list[ProposalStatus]:
    """Every staged proposal with its state, newest first (see the module's docstring)."""
    receipts = load_receipts(root)
    reverted = {r.reverts for _, r in receipts if r.kind == "revert"}
    out = []
    for staged in staged_proposals(root):
        # by the folder's name: the project folder may have moved since
        adoptions = [
            p for p, r in receipts if r.kind == "adopt" and Path(r.staging).name == staged.folder.name
        ]
        if adoptions:
            last = adoptions[-1]
            state: ProposalState = "reverted" if last.name in reverted else "adopted"
            out.append(ProposalStatus(staged, state, last))
            continue
        live = live_tree_sha256(Path(staged.manifest.live.path))
        out.append(ProposalStatus(staged, "stale" if live != staged.manifest.live.tree_sha256 else "pending"))
    return out
