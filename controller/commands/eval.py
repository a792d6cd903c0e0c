"""``skillopt eval``: roll a skill out on a split and report its scores with their 95%
intervals; with ``--against B``, also roll B out on the same items and report the paired
difference (its interval and a one-sided p-value: the exact sign test on pass/fail scores, a
paired bootstrap otherwise)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from skillopt.errors import SkillOptError
from skillopt.stats import format_score

if TYPE_CHECKING:
    from skillopt.config import Config
    from skillopt.trainer.evaluation import EvalSummary
    from skillopt.trainer.state import RunMode
    from skillopt.types import SkillSpec

__all__ = ["register"]

_SPLITS = ("train", "val", "test", "all")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "eval",
        help="evaluate a skill on a split (no training)",
        description="Roll SKILL out on a split through the sandbox (embedded or --endpoints) and write eval_summary.json.",
    )
    p.add_argument("--config", required=True, help="YAML config file or a built-in name")
    p.add_argument(
        "--skill",
        required=True,
        help="the skill to evaluate: a SKILL.md file or an Agent Skills package folder (e.g. a run's best_skill/<name>/)",
    )
    p.add_argument(
        "--against",
        metavar="SKILL_B",
        help="also evaluate this skill on the same items and report SKILL - SKILL_B with its 95%% "
        "interval and p-value (per item, by evaluation.gate_metric)",
    )
    p.add_argument(
        "--split",
        default="test",
        choices=_SPLITS,
        help="the split to evaluate on: train, val (the env's name for the selection split), test, or all "
        "(default: test)",
    )
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--out", help="output directory (default: runs/eval_<env>_<timestamp>)")
    p.add_argument("--endpoints", help="comma-separated sandbox hosts host:port")
    p.add_argument(
        "--simulate",
        choices=("auto", "on", "off", "noisy"),
        help="offline simulation with scripted models (noisy: a stochastic target)",
    )
    p.add_argument(
        "--allow-sample",
        action="store_true",
        help="let real models run on the env's vendored sample (env.allow_sample=true); refused otherwise",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from controller.rundata import refuse_sample, run_data
    from controller.rundir.lock import acquire_run_lock
    from controller.session import decide_simulation
    from skillopt.config import load_config
    from skillopt.logs import configure_logging
    from skillopt.skill.package import load_skill
    from skillopt.trainer.planning import load_data
    from skillopt.trainer.rundir import layout

    overrides = list(args.set)
    if args.endpoints:
        overrides.append(f"sandbox.endpoints=[{args.endpoints}]")
    if args.simulate:
        overrides.append(f"run.simulate={args.simulate}")
    if args.allow_sample:
        overrides.append("env.allow_sample=true")
    try:
        cfg = load_config(args.config, overrides)
        skill = load_skill(Path(args.skill), limits=cfg.env.skill_limits)
        against = load_skill(Path(args.against), limits=cfg.env.skill_limits) if args.against else None
        mode = decide_simulation(cfg)
        used = run_data(cfg, load_data(cfg))
        refuse_sample(cfg, mode, used, command="eval")
    except (SkillOptError, OSError) as exc:
        print(f"skillopt eval: {getattr(exc, 'message', exc)}", file=sys.stderr)
        return 2
    print(f"skillopt eval: {mode.describe()}", file=sys.stderr)
    print(f"skillopt eval: {used.line()}", file=sys.stderr, flush=True)
    out = Path(args.out or f"runs/eval_{cfg.env.name}_{time.strftime('%Y%m%d_%H%M%S')}")
    try:
        _lock = acquire_run_lock(out)  # held until this function returns: the eval's liveness
    except SkillOptError as exc:
        print(f"skillopt eval: {exc.message}", file=sys.stderr)
        return 2
    with open(out / "eval.log", "a", encoding="utf-8") as log_file:
        configure_logging(json=True, level=cfg.run.log_level, stream=log_file)
        try:
            summary = _evaluate(args, cfg, mode, out, skill, against)
        except SkillOptError as exc:
            print(f"skillopt eval: {exc.message}", file=sys.stderr)
            return 1
    report = summary.to_json()
    (out / layout.EVAL_SUMMARY).write_text(json.dumps(report, indent=2) + "\n")
    _print_scores(args, summary)
    print(json.dumps(report))
    if not summary.ok:
        print(
            f"skillopt eval: more than {summary.max_infra_fraction:.0%} of the rollouts failed on "
            f"infrastructure (evaluation.max_infra_fraction): these numbers are not a measurement. See "
            f"{out / f'eval_{args.split}' / layout.RESULTS}; fix the sandbox and rerun with --out {out}: "
            "finished rollouts are kept, failed ones run again",
            file=sys.stderr,
        )
        return 1
    return 0


def _evaluate(
    args: argparse.Namespace,
    cfg: Config,
    mode: RunMode,
    out: Path,
    skill: SkillSpec,
    against: SkillSpec | None,
) -> EvalSummary:
    """Both skills on the split's items through one sandbox session (the trainer's evaluation
    routine), with where and how they ran."""
    from dataclasses import replace

    from controller.session import open_session
    from controller.ui.progress import RowProgress
    from skillopt.models.prefix import prefix_report
    from skillopt.trainer.evaluation import compare_rows, evaluate_split
    from skillopt.trainer.manifest import data_manifest
    from skillopt.trainer.planning import load_data
    from skillopt.trainer.rundir import target_prefix_on_disk

    data = load_data(cfg)
    names = ("train", "val", "test") if args.split == "all" else (args.split,)
    items = [it for name in names for it in data.split(name)]
    if cfg.evaluation.test_env_num:
        items = items[: cfg.evaluation.test_env_num]
    progress: RowProgress | None = None
    try:
        with open_session(cfg, out_dir=out, mode=mode) as session:
            progress = RowProgress()
            session.rollouts.on_row = progress

            def one(text: SkillSpec, path: str, suffix: str) -> tuple[EvalSummary, list]:
                label = f"eval_{args.split}{suffix}"
                return evaluate_split(
                    session.rollouts,
                    items,
                    text,
                    out / label,
                    label=label,
                    split=args.split,
                    skill_name=str(Path(path).resolve()),
                    config=cfg,
                    categories=data.task_types(),
                )

            summary, rows = one(skill, args.skill, "")
            if against is not None:
                e = cfg.evaluation
                other, rows_b = one(against, args.against, "_against")
                diff = compare_rows(rows, rows_b, metric=e.gate_metric, mixed_weight=e.gate_mixed_weight)
                summary = replace(summary, against=other, difference=diff, metric=e.gate_metric)
            hosts = tuple(session.rollouts.executor.hosts())
            environment = {**session.environment, "data": data_manifest({args.split: items})}
    finally:
        if progress is not None:
            progress.close()
    # From the rows' recorded model exchanges (both skills' when --against).
    share, by_role = prefix_report({"target": target_prefix_on_disk(out)})
    return replace(
        summary,
        mode=mode.to_dict(),
        sandbox_hosts=hosts,
        environment=environment,
        cacheable_prefix_share=share,
        cacheable_prefix=by_role,
    )


def _print_scores(args: argparse.Namespace, s: EvalSummary) -> None:
    print(
        f"skillopt eval: {args.split}: hard {format_score(s.hard, s.hard_ci95)}, soft "
        f"{format_score(s.soft, s.soft_ci95)} over {s.n_scored} scored rollouts (95% intervals); "
        f"{s.n_infra} of {s.n_items} failed on infrastructure (not scored)",
        file=sys.stderr,
    )
    if s.against is not None and s.difference is not None:
        b, d = s.against, s.difference
        print(
            f"skillopt eval: against {args.against}: hard {format_score(b.hard, b.hard_ci95)}; "
            f"difference ({s.metric}) {d.effect:+.3f} [{d.ci95[0]:+.3f}, {d.ci95[1]:+.3f}], "
            f"one-sided p = {d.p_value:.3g} ({d.name} test over {d.n} items: {d.wins} better, "
            f"{d.losses} worse)",
            file=sys.stderr,
        )
