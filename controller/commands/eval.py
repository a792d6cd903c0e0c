"""``skillopt eval``: roll a skill out on a split and report its scores."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from skillopt.errors import SkillOptError

__all__ = ["register"]

_SPLITS = ("train", "val", "test", "all")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "eval",
        help="evaluate a skill on a split (no training)",
        description="Roll SKILL out on a split through the sandbox (embedded or --endpoints) and write eval_summary.json.",
    )
    p.add_argument("--config", required=True, help="YAML config file or a built-in name")
    p.add_argument("--skill", required=True, help="the skill file to evaluate")
    p.add_argument("--split", default="test", choices=_SPLITS)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--out", help="output directory (default: runs/eval_<env>_<timestamp>)")
    p.add_argument("--endpoints", help="comma-separated sandbox hosts host:port")
    p.add_argument("--simulate", choices=("auto", "on", "off"))
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from controller.rundir.lock import acquire_run_lock
    from controller.session import decide_simulation, open_session
    from controller.ui.progress import RowProgress
    from skillopt.config import load_config
    from skillopt.logs import configure_logging
    from skillopt.trainer.manifest import data_manifest
    from skillopt.trainer.planning import load_data
    from skillopt.trainer.rollouts import by_category, score_rows, too_many_infra
    from skillopt.trainer.rundir import layout

    overrides = list(args.set)
    if args.endpoints:
        overrides.append(f"sandbox.endpoints=[{args.endpoints}]")
    if args.simulate:
        overrides.append(f"run.simulate={args.simulate}")
    try:
        cfg = load_config(args.config, overrides)
        skill = Path(args.skill).read_text(encoding="utf-8")
        mode = decide_simulation(cfg)
    except (SkillOptError, OSError) as exc:
        print(f"skillopt eval: {getattr(exc, 'message', exc)}", file=sys.stderr)
        return 2
    print(f"skillopt eval: {mode.describe()}", file=sys.stderr, flush=True)
    out = Path(args.out or f"runs/eval_{cfg.env.name}_{time.strftime('%Y%m%d_%H%M%S')}")
    try:
        _lock = acquire_run_lock(out)  # held until this function returns: the eval's liveness
    except SkillOptError as exc:
        print(f"skillopt eval: {exc.message}", file=sys.stderr)
        return 2
    progress = None
    with open(out / "eval.log", "a", encoding="utf-8") as log_file:
        configure_logging(json=True, level=cfg.run.log_level, stream=log_file)
        try:
            data = load_data(cfg)
            names = ("train", "val", "test") if args.split == "all" else (args.split,)
            items = [it for name in names for it in data.split(name)]
            if cfg.evaluation.test_env_num:
                items = items[: cfg.evaluation.test_env_num]
            with open_session(cfg, out_dir=out, mode=mode) as session:
                progress = RowProgress(len(items), f"eval {args.split}")
                session.rollouts.on_row = progress
                rows = session.rollouts.run(
                    items, skill, out / f"eval_{args.split}", label=f"eval_{args.split}"
                )
                hosts = session.rollouts.executor.hosts()
                environment = {**session.environment, "data": data_manifest({args.split: items})}
        except SkillOptError as exc:
            print(f"skillopt eval: {exc.message}", file=sys.stderr)
            return 1
        finally:
            if progress is not None:
                progress.close()
    s = score_rows(rows)
    types = {it.id: it.task_type for it in items}
    by_type = by_category(rows, types, sorted(set(types.values())))
    limit = cfg.evaluation.max_infra_fraction
    too_many = too_many_infra(s.n_infra, len(rows), limit)
    summary = {
        "skill": str(Path(args.skill).resolve()),
        "split": args.split,
        "n_items": len(rows),
        "n_scored": s.n,
        # Over the scored rows only: rows lost to infrastructure are never scored.
        "hard": s.hard,
        "soft": s.soft,
        "n_infra": s.n_infra,
        "max_infra_fraction": limit,
        "ok": not too_many,
        "by_task_type": by_type,
        "env": {"name": cfg.env.name, "agent": cfg.env.agent, "options": dict(cfg.env.options)},
        "simulated": mode.simulated,
        "mode": mode.to_dict(),
        "sandbox_hosts": hosts,
        "environment": environment,
    }
    (out / layout.EVAL_SUMMARY).write_text(json.dumps(summary, indent=2) + "\n")
    print(
        f"skillopt eval: {args.split}: hard {s.hard:.3f}, soft {s.soft:.3f} over {s.n} scored rollouts; "
        f"{s.n_infra} of {len(rows)} failed on infrastructure (not scored)",
        file=sys.stderr,
    )
    print(json.dumps(summary))
    if too_many:
        print(
            f"skillopt eval: more than {limit:.0%} of the rollouts failed on infrastructure "
            f"(evaluation.max_infra_fraction): these numbers are not a measurement. See "
            f"{out / f'eval_{args.split}' / layout.RESULTS}; fix the sandbox and rerun with --out {out}: "
            "finished rollouts are kept, failed ones run again",
            file=sys.stderr,
        )
        return 1
    return 0
