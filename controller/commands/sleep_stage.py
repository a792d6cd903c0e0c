"""``skillopt sleep status`` / ``adopt`` / ``revert``: what is staged, and a person's command to
install it or take it back (docs/sleep.md, "Stage, adopt, revert").

``skillopt sleep run`` stages a proposal the gate accepted (:func:`skillopt.sleep.staging.
stage_proposal`); nothing reaches a harness's skills folder until ``adopt`` is run.

Exit status: 0 done (or, with ``--dry-run``, would be done); 1 refused (the live skill changed,
the installed skill changed since the adoption, a step failed and was undone); 2 bad usage, or
nothing staged to act on.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skillopt.errors import AdoptFailed, LiveSkillChanged, SkillOptError

if TYPE_CHECKING:
    from skillopt.sleep.adopt import AdoptPlan
    from skillopt.sleep.staging import ProposalStatus

__all__ = ["adopt_parser", "revert_parser", "status_parser"]

EXIT_REFUSED = 1
EXIT_USAGE = 2


def _dir_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dir",
        default=".",
        metavar="DIR",
        help="the project folder whose .skillopt/sleep/ holds the staged proposals (default: the current one)",
    )


def status_parser(actions: argparse._SubParsersAction) -> None:
    """``skillopt sleep status``: the staged proposals, newest first."""
    s = actions.add_parser(
        "status",
        help="list staged proposals: time, skill, scores live -> proposal, state",
        description=(
            "List the proposals staged under .skillopt/sleep/staging/, newest first: when, which skill, "
            "the held-out scores of the live skill and the proposal (95% intervals), and the state: "
            "pending (waiting for adopt), adopted, reverted, or stale (the live skill changed since "
            "staging; re-run skillopt sleep run)."
        ),
    )
    _dir_arg(s)
    s.add_argument("--json", action="store_true", help="one JSON object: {proposals: [...]}")
    s.set_defaults(func=_status)


def adopt_parser(actions: argparse._SubParsersAction) -> None:
    """``skillopt sleep adopt``: install a staged proposal where the harness reads it."""
    a = actions.add_parser(
        "adopt",
        help="install a staged proposal where the harness reads it (backup, receipt, undo on failure)",
        description=(
            "Install a staged proposal where its harness discovers skills, with the code of "
            "skillopt skill install. The live skill is backed up first (.skillopt/sleep/backups/), the "
            "installed tree hash is checked, and a receipt is written (.skillopt/sleep/receipts/); when a "
            "step fails the backup is put back. Refused when the live skill changed since staging."
        ),
    )
    which = a.add_mutually_exclusive_group()
    which.add_argument("--skill", metavar="NAME", help="the newest pending proposal for this skill")
    which.add_argument("--all", action="store_true", help="the newest pending proposal of every skill")
    which.add_argument(
        "--staging", metavar="DIR", help="this staging folder (skillopt sleep status lists them)"
    )
    a.add_argument("--dry-run", action="store_true", help="say what would be installed where; change nothing")
    _dir_arg(a)
    a.set_defaults(func=_adopt)


def revert_parser(actions: argparse._SubParsersAction) -> None:
    """``skillopt sleep revert RECEIPT``: put back what an adoption replaced."""
    r = actions.add_parser(
        "revert",
        help="put back the skill an adoption replaced (from its receipt)",
        description=(
            "Restore the backup an adoption's receipt names (or remove the skill when nothing was "
            "installed before), check the tree hash, and write a revert receipt. Refused when the "
            "installed skill changed since the adoption, unless --force (the changed skill is backed up first)."
        ),
    )
    r.add_argument(
        "receipt", metavar="RECEIPT", help="the adoption's receipt (.skillopt/sleep/receipts/*.json)"
    )
    r.add_argument(
        "--force", action="store_true", help="revert even though the installed skill changed since"
    )
    _dir_arg(r)
    r.set_defaults(func=_revert)


def _fail(command: str, exc: SkillOptError) -> int:
    print(f"skillopt sleep {command}: {exc.message}", file=sys.stderr)
    return EXIT_REFUSED if isinstance(exc, LiveSkillChanged | AdoptFailed) else EXIT_USAGE


# ── status ────────────────────────────────────────────────────────────────────────────────


def _status_json(s: ProposalStatus) -> dict[str, Any]:
    m = s.staged.manifest
    return {
        "folder": str(s.staged.folder),
        "created_at": m.created_at.isoformat(),
        "skill": m.skill_name,
        "state": s.state,
        "live_score": m.evidence.live.model_dump(),
        "proposal_score": m.evidence.proposal.model_dump(),
        "harness": m.live.harness,
        "scope": m.live.scope,
        "installed": m.live.path,
        "receipt": str(s.receipt) if s.receipt else None,
    }


def _status(args: argparse.Namespace) -> int:
    from skillopt.logs import configure_logging
    from skillopt.sleep.staging import proposal_states

    configure_logging(json=False, level="warning")
    states = proposal_states(Path(args.dir).absolute())
    if args.json:
        print(json.dumps({"proposals": [_status_json(s) for s in states]}, ensure_ascii=False))
        return 0
    if not states:
        print("no proposals staged (skillopt sleep run stages one)")
        return 0
    rows = [("STAGED (UTC)", "SKILL", "SCORE live -> proposal", "STATE", "FOLDER")]
    for s in states:
        m = s.staged.manifest
        ev = m.evidence
        rows.append(
            (
                f"{m.created_at:%Y-%m-%d %H:%M:%S}",
                m.skill_name,
                f"{ev.live.text()} -> {ev.proposal.text()}",
                s.state,
                str(s.staged.folder),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        print("  ".join(f"{c:<{w}}" for c, w in zip(r, widths, strict=False)) + "  " + r[4])
    if any(s.state == "stale" for s in states):
        print("\nstale: the live skill changed since staging; re-run skillopt sleep run to stage against it")
    return 0


# ── adopt ─────────────────────────────────────────────────────────────────────────────────


def _plan_lines(plan: AdoptPlan) -> list[str]:
    m = plan.staged.manifest
    live = f"replacing tree {plan.live.tree_sha256[:12]}" if plan.live else "nothing installed there yet"
    return [
        f"{m.skill_name}: {m.evidence.live.text()} -> {m.evidence.proposal.text()}",
        f"  from    {plan.staged.folder} (tree {plan.proposal.tree_sha256[:12]}; {plan.changes})",
        f"  to      {plan.dest}/ ({m.live.harness}, {m.live.scope} scope; {live})",
        f"  backup  {plan.backup}/" if plan.backup else "  backup  none (nothing installed there yet)",
        f"  receipt {plan.receipt}",
    ]


def _adopt(args: argparse.Namespace) -> int:
    from skillopt.logs import configure_logging
    from skillopt.sleep.adopt import adopt, pick_proposals, plan_adoption

    configure_logging(json=False, level="warning")
    root = Path(args.dir).absolute()
    try:
        chosen = pick_proposals(
            root, skill=args.skill, every=args.all, staging=Path(args.staging) if args.staging else None
        )
        plans = [plan_adoption(root, staged) for staged in chosen]
    except SkillOptError as exc:
        return _fail("adopt", exc)
    if args.dry_run:
        for plan in plans:
            print("would adopt " + "\n".join(_plan_lines(plan)))
        print("nothing changed (--dry-run)")
        return 0
    for plan in plans:
        try:
            receipt_path, _ = adopt(plan)
        except SkillOptError as exc:
            return _fail("adopt", exc)
        print("adopted " + "\n".join(_plan_lines(plan)))
        print(f"  undo with: skillopt sleep revert {receipt_path}")
    return 0


# ── revert ────────────────────────────────────────────────────────────────────────────────


def _revert(args: argparse.Namespace) -> int:
    from skillopt.logs import configure_logging
    from skillopt.sleep.adopt import revert

    configure_logging(json=False, level="warning")
    try:
        path, receipt = revert(Path(args.dir).absolute(), Path(args.receipt), force=args.force)
    except SkillOptError as exc:
        return _fail("revert", exc)
    put_back = (
        f"put back the skill the adoption replaced (tree {(receipt.after_sha256 or '')[:12]})"
        if receipt.after_sha256
        else "removed it (nothing was installed before the adoption)"
    )
    print(f"reverted {receipt.skill_name} at {receipt.installed}/: {put_back}")
    print(f"  receipt {path}")
    return 0
