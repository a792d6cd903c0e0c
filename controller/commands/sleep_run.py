"""``skillopt sleep run``: harvest → mine → train on the mined tasks → gate on held-out tasks →
stage the proposal, or say why nothing is staged (docs/sleep.md, Run).

Each step is the existing one: :func:`skillopt.sleep.harvest`, :func:`skillopt.sleep.mine.mine`
(the rule miner), ``skillopt train`` itself (its parser and :func:`controller.commands.train.run`,
with ``env.data_root`` the mined data and ``env.skill_init`` the live skill package), and
:func:`skillopt.sleep.staging.stage_proposal`. The decisions are in :mod:`skillopt.sleep.run`.

Exit status: 0 a proposal was staged, or nothing was staged and the output says why
("nothing staged: ..."), or ``--dry-run``; 1 refused before training (too few held-out tasks,
a session in train and a held-out split, nothing mined), training failed, or staging failed;
2 bad usage, no installed skill, or no session folder.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from controller.fleet.access import add_fleet_arguments
from skillopt.errors import ConfigError, SkillOptError

if TYPE_CHECKING:
    from skillopt.envs.base import EnvData
    from skillopt.sleep.mine import MineResult
    from skillopt.sleep.run import RunDecision

__all__ = ["run_parser"]

EXIT_REFUSED = 1
EXIT_USAGE = 2
_PROG = "skillopt sleep run"
_SPLITS = {"train": "train", "selection": "val", "test": "test"}


def run_parser(actions: argparse._SubParsersAction) -> None:
    """``skillopt sleep run``: sessions in, a staged proposal (or the reason for none) out."""
    from skillopt.sleep.run import DEFAULT_MAX_REGRESSIONS, DEFAULT_MIN_HELD_OUT

    r = actions.add_parser(
        "run",
        help="harvest, mine, train on your sessions, gate on held-out ones, and stage a proposal",
        description=(
            "Harvest your sessions, mine them into tasks, train the installed skill --skill on the "
            "train tasks (the gate on the selection tasks), score the live and the trained skill on the "
            "held-out test tasks, and stage the trained skill under .skillopt/sleep/staging/ when it is "
            "better and regresses no task. Nothing is installed: `skillopt sleep adopt` does that. "
            "Files go to .skillopt/sleep/runs/<UTC time>/. See docs/sleep.md (Run)."
        ),
    )
    r.add_argument("--skill", metavar="NAME", help="the installed skill to train (default: the only one)")
    r.add_argument(
        "--harness", choices=("claude-code", "codex"), default="claude-code", help="default claude-code"
    )
    r.add_argument("--scope", choices=("project", "user"), default="project", help="default project")
    r.add_argument(
        "--project",
        default=".",
        metavar="DIR",
        help="the project: its skills (scope project), its sessions (scope project), and its .skillopt/ "
        "(default: the current folder)",
    )
    r.add_argument("--source", default="claude-code,codex", metavar="LIST", help="sources to harvest")
    r.add_argument("--since", metavar="WHEN", help="only sessions active since then (7d, 24h, 2026-12-01)")
    r.add_argument(
        "--harvest",
        metavar="DIR",
        help="reuse this harvest folder (harvest it yourself first); default: a fresh harvest in the run's folder",
    )
    r.add_argument("--seed", type=int, default=0, help="mine's split seed (default 0)")
    r.add_argument("--config", help="training config (default sleep; sleep_demo with --simulate)")
    r.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a config key")
    r.add_argument(
        "--min-held-out",
        type=int,
        default=DEFAULT_MIN_HELD_OUT,
        metavar="N",
        help=f"refuse to train with fewer selection or test tasks than N each (default {DEFAULT_MIN_HELD_OUT})",
    )
    r.add_argument(
        "--max-regressions",
        type=int,
        default=DEFAULT_MAX_REGRESSIONS,
        metavar="N",
        help="held-out test tasks that may pass with the live skill and fail with the proposal "
        f"(default {DEFAULT_MAX_REGRESSIONS})",
    )
    r.add_argument(
        "--simulate",
        action="store_true",
        help="offline: scripted models play the target and the optimizer (the embedded sandbox still runs)",
    )
    r.add_argument(
        "--dry-run",
        action="store_true",
        help="show what would be harvested and mined and what a model would be sent; write and train nothing",
    )
    add_fleet_arguments(
        r.add_argument_group("sandbox fleet", "passed to skillopt train"),
        config_keys=True,
        endpoints_default="an embedded local sandbox",
    )
    r.set_defaults(func=_run)


def _live_skill(args: argparse.Namespace, project: Path) -> tuple[str, Path]:
    """The skill's name and its installed ``<name>/`` folder.

    Raises:
        ConfigError: no skill installed there (or several, and no --skill).
    """
    from skillopt.skill.install import skills_root

    root = skills_root(args.harness, args.scope, project)
    if args.skill:
        if not (root / args.skill / "SKILL.md").is_file():
            raise ConfigError(
                f"no skill {args.skill!r} installed for {args.harness} ({args.scope}) at {root / args.skill}: "
                "install it first (skillopt skill install), or give the --harness / --scope / --project it is under"
            )
        return args.skill, root / args.skill
    found = sorted(p.parent.name for p in root.glob("*/SKILL.md")) if root.is_dir() else []
    if len(found) != 1:
        raise ConfigError(
            f"give --skill NAME: {len(found)} skills installed for {args.harness} ({args.scope}) "
            f"in {root}" + (f" ({', '.join(found)})" if found else "")
        )
    return found[0], root / found[0]


def _harvest(args: argparse.Namespace, project: Path, out: Path) -> Path:
    """Harvest into ``out`` (or reuse ``--harvest``); the harvest folder."""
    from skillopt.sleep import HarvestConfig, harvest, parse_since, source_root
    from skillopt.sleep.sources import parse_sources

    if args.harvest:
        print(f"{_PROG}: reusing the harvest in {args.harvest} (--since/--source/--project do not filter it)")
        return Path(args.harvest)
    config = HarvestConfig(
        roots={s: source_root(s, os.environ) for s in parse_sources(args.source)},
        out=out,
        since=parse_since(args.since, datetime.now(UTC)) if args.since else None,
        project=project if args.scope == "project" else None,
    )
    result = harvest(config)
    print(f"{_PROG}: harvested {len(result.harvested)} session(s) of {result.seen} seen into {out}")
    return out


def _mine(harvest_dir: Path, out: Path, seed: int, *, dry_run: bool) -> MineResult:
    from skillopt.sleep.mine import MineConfig, mine
    from skillopt.sleep.rules import RuleMiner

    result = mine(MineConfig(harvest=harvest_dir, out=out, seed=seed, dry_run=dry_run), RuleMiner())
    counts = ", ".join(f"{k} {len(v)}" for k, v in result.tasks.items())
    print(f"{_PROG}: mined {result.manifest.counts['checkable']} checkable task(s) ({counts})")
    return result


def _train_argv(args: argparse.Namespace, *, data: Path, live: Path, out: Path) -> list[str]:
    """The ``skillopt train`` command line of this run (the user's --set last: they win)."""
    argv = [
        "train",
        "--config",
        args.config or ("sleep_demo" if args.simulate else "sleep"),
        "--out",
        str(out),
    ]
    for key in (
        f"env.data_root={data}",
        f"env.skill_init={live}",
        "evaluation.gate_mode=sequential",
        "evaluation.eval_test=true",
        *args.set,
    ):
        argv += ["--set", key]
    if args.simulate:
        argv += ["--simulate", "on"]
    for flag in ("endpoints", "token_file", "tls_ca", "tls_cert", "tls_key"):
        value = getattr(args, flag, None)
        for v in value if isinstance(value, list) else [value] if value else []:
            argv += [f"--{flag.replace('_', '-')}", v]
    return argv


def _sessions(data: EnvData) -> dict[str, list[str]]:
    return {
        name: [str(it.task.attributes.get("source_session", "")) for it in data.split(split)]
        for name, split in _SPLITS.items()
    }


def _prepare(args: argparse.Namespace, argv: list[str]) -> tuple[argparse.Namespace, dict[str, list[str]]]:
    """The parsed train command, after the fail-closed checks on the data it will load.

    Raises:
        ConfigError: a bad config; HeldOutRefused: the held-out splits cannot be trusted.
    """
    from controller.cli import parse_args
    from controller.commands.train import load
    from skillopt.sleep.run import check_held_out
    from skillopt.trainer.planning import load_data

    train_args = parse_args(argv)
    cfg, _ = load(train_args)
    if cfg.env.name != "sleep":
        raise ConfigError(
            f"--config {args.config}: its env is {cfg.env.name!r}; give a sleep config (sleep, sleep_cli)"
        )
    data = load_data(cfg)
    sessions = _sessions(data)
    check_held_out(sessions, min_held_out=args.min_held_out)
    if args.simulate:
        from skillopt.testing.sim_catalogue import alias_mined_tasks

        alias_mined_tasks(it for split in _SPLITS.values() for it in data.split(split))
    return train_args, sessions


def _package_text(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): p.read_text(encoding="utf-8", errors="replace")
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _decide(train_dir: Path, live_dir: Path, max_regressions: int) -> tuple[RunDecision, Path | None]:
    """The decision on the training run in ``train_dir``, and the best package's folder."""
    import json

    from skillopt.skill.package import load_skill
    from skillopt.sleep.run import (
        RunDecision,
        decide,
        gate_records,
        read_history,
        read_test_rows,
        unsafe_lines,
    )

    summary = json.loads((train_dir / "summary.json").read_text(encoding="utf-8"))
    best = next((p for p in sorted((train_dir / "best_skill").glob("*")) if p.is_dir()), None)
    if summary.get("status") != "complete" or best is None:
        why = f"the training run did not complete ({summary.get('stop_reason') or 'no best skill package'})"
        return RunDecision(reason=why, live=None, proposal=None, tasks=(), gate=()), None
    live_text, best_text = _package_text(live_dir), _package_text(best)
    unsafe = [
        line for path, text in best_text.items() for line in unsafe_lines(live_text.get(path, ""), text)
    ]
    decision = decide(
        changed=load_skill(best).tree_sha256 != load_skill(live_dir).tree_sha256,
        gate=gate_records(read_history(train_dir), int(summary.get("best_step", 0))),
        live_rows=read_test_rows(train_dir, "test_eval_baseline"),
        best_rows=read_test_rows(train_dir, "test_eval"),
        max_regressions=max_regressions,
        unsafe=unsafe,
    )
    return decision, best


def _dry_run(args: argparse.Namespace, project: Path, skill: str, live: Path) -> int:
    """Harvest into a temporary folder, mine without writing, and print the tasks, the checks'
    verdict (on every kind mined; the config may keep fewer) and the train command line."""
    from skillopt.sleep.run import HeldOutRefused, check_held_out

    with tempfile.TemporaryDirectory(prefix="skillopt-sleep-dry-") as tmp:
        harvest_dir = _harvest(args, project, Path(tmp) / "harvest")
        result = _mine(harvest_dir, Path(tmp) / "mined", args.seed, dry_run=True)
    for name, tasks in result.tasks.items():
        for it in tasks:
            print(f"--- {name} task {it.id} (session {it.session}); the target model would be sent:")
            print(it.prompt)
            for path in it.files:
                print(f"  [working file {path}]")
    try:
        check_held_out(
            {n: [it.session for it in t] for n, t in result.tasks.items()}, min_held_out=args.min_held_out
        )
    except HeldOutRefused as exc:
        print(f"{_PROG}: would refuse before training: {exc.message}")
    print(
        f"{_PROG}: would train {skill} ({live}) with: skillopt "
        + " ".join(_train_argv(args, data=Path("<mined>"), live=live, out=Path("<run>/train")))
    )
    print("nothing written, nothing trained (--dry-run)")
    return 0


def _run(args: argparse.Namespace) -> int:
    from controller.commands.train import run as train
    from skillopt.logs import configure_logging
    from skillopt.sleep.mine import NothingMined
    from skillopt.sleep.run import HeldOutRefused, run_folder

    configure_logging(json=False, level="warning")
    project = Path(args.project).expanduser().resolve()
    try:
        skill, live = _live_skill(args, project)
        if args.dry_run:
            return _dry_run(args, project, skill, live)
        folder = run_folder(project, datetime.now(UTC))
        harvest_dir = _harvest(args, project, folder / "harvest")
        _mine(harvest_dir, folder / "mined", args.seed, dry_run=False)
        argv = _train_argv(args, data=folder / "mined", live=live, out=folder / "train")
        train_args, sessions = _prepare(args, argv)
    except (HeldOutRefused, NothingMined) as exc:
        print(f"{_PROG}: refused: {exc.message}", file=sys.stderr)
        return EXIT_REFUSED
    except ConfigError as exc:
        print(f"{_PROG}: {exc.message}", file=sys.stderr)
        return EXIT_USAGE
    print(f"{_PROG}: training {skill} from {live} ({folder / 'train'})", flush=True)
    rc = train(train_args)
    if rc != 0:
        print(f"{_PROG}: training failed (exit {rc}); nothing staged. Run folder: {folder}", file=sys.stderr)
        return EXIT_REFUSED
    return _stage(args, project, skill, live, folder, sessions)


def _stage(
    args: argparse.Namespace,
    project: Path,
    skill: str,
    live: Path,
    folder: Path,
    sessions: dict[str, list[str]],
) -> int:
    from skillopt.durable import atomic_write_json
    from skillopt.sleep.run import evidence
    from skillopt.sleep.staging import stage_proposal

    try:
        decision, best = _decide(folder / "train", live, args.max_regressions)
    except (SkillOptError, OSError, ValueError) as exc:
        print(
            f"{_PROG}: nothing staged: the training run cannot be read ({exc}). Run folder: {folder}",
            file=sys.stderr,
        )
        return EXIT_REFUSED
    record: dict[str, Any] = {
        "staged": decision.stage,
        "reason": decision.reason,
        "live": decision.live.model_dump() if decision.live else None,
        "proposal": decision.proposal.model_dump() if decision.proposal else None,
        "tasks": [t.model_dump() for t in decision.tasks],
    }
    if not decision.stage or best is None:
        atomic_write_json(folder / "decision.json", record)
        print(f"{_PROG}: nothing staged: {decision.reason}. Run folder: {folder}")
        return 0
    used = [s for name in ("train", "selection", "test") for s in sessions[name]]
    try:
        staged = stage_proposal(
            project,
            skill_name=skill,
            proposal_dir=best,
            evidence=evidence(
                decision, session_ids=used, run_dir=folder / "train", max_regressions=args.max_regressions
            ),
            harness=args.harness,
            scope=cast("Literal['project', 'user']", args.scope),
            live_dir=live,
        )
    except SkillOptError as exc:
        atomic_write_json(folder / "decision.json", record | {"staged": False, "reason": exc.message})
        print(f"{_PROG}: nothing staged: {exc.message}. Run folder: {folder}", file=sys.stderr)
        return EXIT_REFUSED
    atomic_write_json(folder / "decision.json", record | {"staging": str(staged.folder)})
    assert decision.live is not None and decision.proposal is not None
    print(
        f"{_PROG}: staged {skill}: held-out test {decision.live.text()} -> {decision.proposal.text()}, "
        f"in {staged.folder}\n(review {staged.folder / 'REPORT.md'}; install with: skillopt sleep adopt --skill {skill})"
    )
    return 0
