"""Packages and evidence for the stage/adopt/revert tests (fast: files only, no Docker)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from skillopt.sleep.proposal import Evidence, GateRecord, Score, TaskResult
from skillopt.sleep.staging import StagedProposal, stage_proposal

NAME = "fix-tests"
T0 = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


def write_skill(folder: Path, body: str, *, script: str | None = None) -> Path:
    """A package ``folder`` (named after the skill) with SKILL.md and maybe scripts/check.py."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {folder.name}\ndescription: Fix failing tests.\n---\n{body}\n", encoding="utf-8"
    )
    if script is not None:
        (folder / "scripts").mkdir(exist_ok=True)
        (folder / "scripts" / "check.py").write_text(script, encoding="utf-8")
        (folder / "scripts" / "check.py").chmod(0o755)
    return folder


def evidence(*, action: str = "accept_new_best", regressed: bool = False) -> Evidence:
    return Evidence(
        live=Score(mean=0.5, low=0.3, high=0.7, n=20),
        proposal=Score(mean=0.75, low=0.53, high=0.89, n=20),
        gate=(GateRecord(action=action, reason="paired test p=0.01", step=3),),
        tasks=(
            TaskResult(task_id="t1", live=1.0, proposal=1.0 if not regressed else 0.0, regressed=regressed),
            TaskResult(task_id="t2", live=0.0, proposal=1.0),
        ),
        session_ids=("s-1", "s-2"),
        run_dir="/runs/sleep-1",
    )


def project(tmp_path: Path) -> Path:
    """A project with a live skill installed for Claude Code, and a trained proposal."""
    root = tmp_path / "proj"
    write_skill(root / ".claude/skills" / NAME, "Run the tests first.", script="print('v1')\n")
    write_skill(
        tmp_path / "run/best_skill" / NAME, "Run the tests first.\nRead the failure.", script="print('v2')\n"
    )
    return root


def live_dir(root: Path) -> Path:
    return root / ".claude/skills" / NAME


def stage(root: Path, tmp_path: Path, *, when: datetime = T0, ev: Evidence | None = None) -> StagedProposal:
    return stage_proposal(
        root,
        skill_name=NAME,
        proposal_dir=tmp_path / "run/best_skill" / NAME,
        evidence=ev or evidence(),
        harness="claude-code",
        scope="project",
        live_dir=live_dir(root),
        now=when,
    )


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` by relative path, with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
