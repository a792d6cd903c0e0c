"""Adopting a staged proposal, and reverting an adoption: the only ways sleep changes a skill
a harness reads, each started by a person (``skillopt sleep adopt`` / ``revert``).

Both are one transaction, :func:`_swap`: back up what is installed (``backups/<time>/<name>/``),
install the new package with :func:`skillopt.skill.install.install_skill` (the code of
``skillopt skill install``), check that the installed tree hash is the one intended, and write
a receipt (``receipts/<time>-<name>[-revert].json``). When any step fails, what was installed
before is put back from the backup and :class:`~skillopt.errors.AdoptFailed` says so.

Both refuse when the installed skill is not the one they expect: adopt when it changed since
staging (its hash is not the manifest's), revert when it changed since the adoption (not the
receipt's after-hash; ``force`` reverts all the same, the changed skill backed up first).

Usage::

    plan = plan_adoption(root, staged)          # raises LiveSkillChanged when stale
    receipt_path, receipt = adopt(plan)
    revert(root, receipt_path)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import structlog
from pydantic import ValidationError

from skillopt.durable import atomic_write_text
from skillopt.errors import AdoptFailed, LiveSkillChanged, SkillError, SleepError
from skillopt.skill.diff import diff_summary, package_diff
from skillopt.skill.install import install_skill, installed_skill, remove_skill
from skillopt.skill.package import load_skill, write_package
from skillopt.sleep.proposal import Receipt
from skillopt.sleep.staging import (
    BACKUPS,
    NOT_A_PACKAGE,
    RECEIPTS,
    StagedProposal,
    live_tree_sha256,
    load_receipts,
    proposal_states,
    sleep_dir,
    time_stamp,
)
from skillopt.types import SkillVersion

__all__ = ["AdoptPlan", "adopt", "pick_proposals", "plan_adoption", "revert"]

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class AdoptPlan:
    """What :func:`adopt` will do: install ``proposal`` at ``dest`` (replacing ``live``,
    ``None`` when nothing is installed), backing it up to ``backup`` and writing ``receipt``.
    ``changes`` is the diff summary live -> proposal."""

    root: Path
    staged: StagedProposal
    proposal: SkillVersion
    live: SkillVersion | None
    dest: Path
    backup: Path | None
    receipt: Path
    changes: str


def pick_proposals(
    root: Path, *, skill: str | None = None, every: bool = False, staging: Path | None = None
) -> list[StagedProposal]:
    """The proposals an ``adopt`` means: the folder ``staging``; else for each skill (only
    ``skill`` unless ``every``) its newest proposal not adopted or reverted yet.

    Raises:
        SleepError: nothing staged (or nothing for ``skill``), or several skills have proposals
            and neither ``skill`` nor ``every`` says which.
    """
    states = proposal_states(root)
    if staging is not None:
        found = [s for s in states if s.staged.folder.resolve() == staging.resolve()]
        if not found:
            raise SleepError(
                f"--staging {staging}: not a complete staging folder (see skillopt sleep status)"
            )
        if found[0].state == "adopted":
            raise SleepError(
                f"--staging {staging} is adopted already (receipt {found[0].receipt}): nothing to do"
            )
        return [found[0].staged]
    open_ = [s for s in states if s.state in ("pending", "stale")]
    if skill is not None:
        open_ = [s for s in open_ if s.staged.manifest.skill_name == skill]
    if not open_:
        what = f" for the skill {skill!r}" if skill else ""
        raise SleepError(
            f"no staged proposal{what} waiting to be adopted: skillopt sleep run stages one "
            "(skillopt sleep status lists them)"
        )
    newest: dict[str, StagedProposal] = {}
    for s in open_:  # newest first
        newest.setdefault(s.staged.manifest.skill_name, s.staged)
    if len(newest) > 1 and not every and skill is None:
        raise SleepError(
            f"proposals are staged for {len(newest)} skills ({', '.join(sorted(newest))}): "
            "name one with --skill NAME, or adopt them all with --all"
        )
    return list(newest.values())


def plan_adoption(root: Path, staged: StagedProposal, *, now: datetime | None = None) -> AdoptPlan:
    """Check that ``staged`` can be adopted and say how; changes nothing.

    Raises:
        LiveSkillChanged: the installed skill is not the one the proposal was staged against.
        SleepError: the staged package is missing or was changed after staging.
    """
    m = staged.manifest
    proposal = staged.load_package()
    dest = Path(m.live.path)
    current = live_tree_sha256(dest)
    if current != m.live.tree_sha256:
        now_is = (
            "nothing"
            if current is None
            else "not a valid package"
            if current == NOT_A_PACKAGE
            else f"tree {current[:12]}"
        )
        was = f"tree {m.live.tree_sha256[:12]}" if m.live.tree_sha256 else "nothing installed"
        raise LiveSkillChanged(
            f"{dest} changed since {m.skill_name} was staged in {staged.folder.name} (then: {was}; now: "
            f"{now_is}): the evidence no longer compares with what is installed. Re-run skillopt sleep run "
            "to train and stage against the skill as it is now"
        )
    live = installed_skill(dest)
    stamp = _free_stamp(root, m.skill_name, now or datetime.now(UTC), "")
    return AdoptPlan(
        root=root,
        staged=staged,
        proposal=proposal,
        live=live,
        dest=dest,
        backup=sleep_dir(root) / BACKUPS / stamp / m.skill_name if live is not None else None,
        receipt=sleep_dir(root) / RECEIPTS / f"{stamp}-{m.skill_name}.json",
        changes=diff_summary(package_diff(live or SkillVersion(name=m.skill_name), proposal)),
    )


def adopt(plan: AdoptPlan, *, now: datetime | None = None) -> tuple[Path, Receipt]:
    """Install the planned proposal where the harness reads it, as one transaction.

    Returns:
        The receipt's path and the receipt.

    Raises:
        AdoptFailed: a step failed; what was installed before was put back (``restored``).
    """
    m = plan.staged.manifest
    receipt = Receipt(
        kind="adopt",
        skill_name=m.skill_name,
        staging=str(plan.staged.folder.absolute()),
        harness=m.live.harness,
        scope=m.live.scope,
        installed=str(plan.dest),
        backup=str(plan.backup) if plan.backup else None,
        before_sha256=plan.live.tree_sha256 if plan.live else None,
        after_sha256=plan.proposal.tree_sha256,
        created_at=now or datetime.now(UTC),
    )
    _swap(plan.dest, plan.proposal, plan.live, plan.backup, lambda: _write_receipt(plan.receipt, receipt))
    log.info("sleep.adopted", skill=m.skill_name, dest=str(plan.dest), receipt=str(plan.receipt))
    return plan.receipt, receipt


def revert(
    root: Path, receipt_path: Path, *, force: bool = False, now: datetime | None = None
) -> tuple[Path, Receipt]:
    """Put back what an adoption replaced (its receipt at ``receipt_path``).

    Raises:
        SleepError: the receipt cannot be read, is not an adoption's, was reverted already, or
            its backup is missing or damaged.
        LiveSkillChanged: the installed skill changed since the adoption and ``force`` is off.
        AdoptFailed: a step failed; the skill installed before the revert was put back.
    """
    adopted = _read_receipt(receipt_path)
    done = [p for p, r in load_receipts(root) if r.kind == "revert" and r.reverts == receipt_path.name]
    if done:
        raise SleepError(f"{receipt_path.name} was reverted already ({done[-1]}): nothing to do")
    dest = Path(adopted.installed)
    current = _installed_or_none(dest)
    current_hash = live_tree_sha256(dest)
    if current_hash == NOT_A_PACKAGE:  # it could not be backed up: --force would lose it
        raise LiveSkillChanged(
            f"{dest} is not a valid skill package now (skillopt skill validate says why): move it aside, "
            "then run skillopt sleep revert again"
        )
    if current_hash != adopted.after_sha256 and not force:
        raise LiveSkillChanged(
            f"{dest} changed since the adoption in {receipt_path.name} (it is no longer tree "
            f"{(adopted.after_sha256 or 'none')[:12]}): reverting would lose that change. --force reverts "
            "anyway (the changed skill is backed up first)"
        )
    target = _backup_skill(adopted) if adopted.backup else None
    now = now or datetime.now(UTC)
    stamp = _free_stamp(root, adopted.skill_name, now, "-revert")
    backup = sleep_dir(root) / BACKUPS / stamp / adopted.skill_name if current is not None else None
    receipt = Receipt(
        kind="revert",
        skill_name=adopted.skill_name,
        staging=adopted.staging,
        harness=adopted.harness,
        scope=adopted.scope,
        installed=adopted.installed,
        backup=str(backup) if backup else None,
        before_sha256=current.tree_sha256 if current else None,
        after_sha256=adopted.before_sha256,
        reverts=receipt_path.name,
        created_at=now,
    )
    path = sleep_dir(root) / RECEIPTS / f"{stamp}-{adopted.skill_name}-revert.json"
    _swap(dest, target, current, backup, lambda: _write_receipt(path, receipt))
    log.info("sleep.reverted", skill=adopted.skill_name, dest=str(dest), receipt=str(path))
    return path, receipt


def _installed_or_none(dest: Path) -> SkillVersion | None:
    """The valid package at ``dest``; ``None`` when nothing (or no valid package) is there."""
    try:
        return installed_skill(dest)
    except SkillError:
        return None


# ── the transaction ───────────────────────────────────────────────────────────────────────


def _swap(
    dest: Path,
    target: SkillVersion | None,
    current: SkillVersion | None,
    backup: Path | None,
    commit: Callable[[], None],
) -> None:
    """Back ``current`` up to ``backup``, install ``target`` at ``dest`` (``None``: remove what
    is there), check the installed hash, then ``commit`` (write the receipt). When a step after
    the backup fails, ``current`` is put back and :class:`AdoptFailed` raised.

    Raises:
        AdoptFailed: nothing was changed (the backup failed), or the change was undone.
    """
    if current is not None and backup is not None:
        try:
            written = load_skill(write_package(current, backup.parent))
            if written.tree_sha256 != current.tree_sha256:
                raise SleepError(f"the backup at {backup} is not the skill it copies")
        except (OSError, SkillError, SleepError) as exc:
            raise AdoptFailed(
                f"could not back up {dest} to {backup} ({exc}); nothing was changed", restored=True
            ) from exc
    try:
        _install(dest, target)
        commit()
    except Exception as exc:
        restored = _restore(dest, current)
        where = f" from {backup}" if backup else ""
        raise AdoptFailed(
            f"installing at {dest} failed ({type(exc).__name__}: {exc}); "
            + (
                f"the skill installed before was put back{where}, unchanged"
                if restored
                else f"putting back the skill installed before failed too: copy {backup} to {dest} by hand"
            ),
            restored=restored,
        ) from exc


def _install(dest: Path, target: SkillVersion | None) -> None:
    if target is None:
        remove_skill(dest)
    else:
        install_skill(target, dest.parent, force=True)
    after = live_tree_sha256(dest)
    want = target.tree_sha256 if target is not None else None
    if after != want:
        raise SleepError(f"the installed tree hash is {after}, not {want}")


def _restore(dest: Path, current: SkillVersion | None) -> bool:
    """Put ``current`` back at ``dest`` (``None``: nothing was there); whether that worked."""
    try:
        _install(dest, current)
    except Exception as exc:  # reported by the caller's message
        log.error("sleep.restore_failed", dest=str(dest), error=str(exc))
        return False
    return True


def _write_receipt(path: Path, receipt: Receipt) -> None:
    atomic_write_text(path, receipt.model_dump_json(indent=2) + "\n")


def _read_receipt(path: Path) -> Receipt:
    try:
        receipt = Receipt.model_validate_json(path.read_bytes())
    except (OSError, ValidationError) as exc:
        raise SleepError(
            f"{path}: not a readable receipt ({str(exc)[:200]}): skillopt sleep status lists them"
        ) from exc
    if receipt.kind != "adopt":
        raise SleepError(
            f"{path} is a revert's receipt: give the adoption's receipt it names ({receipt.reverts})"
        )
    return receipt


def _backup_skill(adopted: Receipt) -> SkillVersion:
    """The skill an adoption backed up, checked against the receipt's before-hash."""
    where = Path(adopted.backup or "")
    try:
        spec = load_skill(where)
    except SkillError as exc:
        raise SleepError(f"the backup {where} cannot be read ({exc}): nothing was changed") from exc
    if spec.tree_sha256 != adopted.before_sha256:
        raise SleepError(f"the backup {where} was changed after the adoption: nothing was changed")
    return spec


def _free_stamp(root: Path, name: str, now: datetime, suffix: str) -> str:
    """A time stamp whose backup folder and receipt are both unused (``-N`` added if needed)."""
    base = time_stamp(now)
    for n in range(1, 1000):
        stamp = base if n == 1 else f"{base}-{n}"
        if (
            not (sleep_dir(root) / BACKUPS / stamp / name).exists()
            and not (sleep_dir(root) / RECEIPTS / f"{stamp}-{name}{suffix}.json").exists()
        ):
            return stamp
    raise SleepError(f"too many adoptions of {name} at {base}")
