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

from skillopt.errors import SkillOptError
from skillopt.stats import format_score

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
    p.add_argument(
        "--against",
        metavar="SKILL_B",
        help="also evaluate this skill on the same items and report SKILL - SKILL_B with its 95%% "
        "interval and p-value (per item, by evaluation.gate_metric)",
    )
    p.add_argument("--split", default="test", choices=_SPLITS)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--out", help="output directory (default: runs/eval_<env>_<timestamp>)")
    p.add_argument("--endpoints", help="comma-separated sandbox hosts host:port")
    p.add_argument(
        "--simulate",
        choices=("auto", "on", "off", "noisy"),
        help="offline simulation with scripted models (noisy: a stochastic target)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from controller.rundir.lock import acquire_run_lock
    from controller.session import decide_simulation, open_session
    from controller.ui.progress import RowProgress
    from skillopt.config import load_config
    from skillopt.logs import configure_logging
    from skillopt.models.prefix import prefix_report
    from skillopt.trainer.manifest import data_manifest
    from skillopt.trainer.planning import load_data
    from skillopt.trainer.rundir import layout, target_prefix_on_disk
    from skillopt.trainer.scoring import by_category, row_means, score_rows, too_many_infra

    overrides = list(args.set)
    if args.endpoints:
        overrides.append(f"sandbox.endpoints=[{args.endpoints}]")
    if args.simulate:
        overrides.append(f"run.simulate={args.simulate}")
    try:
        cfg = load_config(args.config, overrides)
        skill = Path(args.skill).read_text(encoding="utf-8")
        against = Path(args.against).read_text(encoding="utf-8") if args.against else None
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
                progress = RowProgress()
                session.rollouts.on_row = progress
                rows = session.rollouts.run(
                    items, skill, out / f"eval_{args.split}", label=f"eval_{args.split}"
                )
                if against is not None:
                    rows_b = session.rollouts.run(
                        items, against, out / f"eval_{args.split}_against", label=f"eval_{args.split}_against"
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
        **row_means(rows),
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
    if against is not None:
        s_b = score_rows(rows_b)
        too_many = too_many or too_many_infra(s_b.n_infra, len(rows_b), limit)
        comparison = _compare(rows, rows_b, cfg.evaluation.gate_metric, cfg.evaluation.gate_mixed_weight)
        summary["against"] = {
            "skill": str(Path(args.against).resolve()),
            "n_scored": s_b.n,
            **row_means(rows_b),
            "n_infra": s_b.n_infra,
            "difference": comparison,
        }
        summary["ok"] = not too_many
    # From the rows' recorded model exchanges (both skills' when --against).
    summary["cacheable_prefix_share"], summary["cacheable_prefix"] = prefix_report(
        {"target": target_prefix_on_disk(out)}
    )
    (out / layout.EVAL_SUMMARY).write_text(json.dumps(summary, indent=2) + "\n")
    print(
        f"skillopt eval: {args.split}: hard {format_score(s.hard, summary['hard_ci95'])}, soft "
        f"{format_score(s.soft, summary['soft_ci95'])} over {s.n} scored rollouts (95% intervals); "
        f"{s.n_infra} of {len(rows)} failed on infrastructure (not scored)",
        file=sys.stderr,
    )
    if against is not None:
        b, d = summary["against"], summary["against"]["difference"]
        print(
            f"skillopt eval: against {args.against}: hard {format_score(b['hard'], b['hard_ci95'])}; "
            f"difference ({d['metric']}) {d['effect']:+.3f} [{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}], "
            f"one-sided p = {d['p_value']:.3g} ({d['name']} test over {d['n']} items: {d['wins']} better, "
            f"{d['losses']} worse)",
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


def _compare(rows_a, rows_b, metric: str, mixed_weight: float) -> dict:
    """The paired difference A - B over the items both scored, by the gate's metric."""
    from skillopt.gate import gate_score
    from skillopt.stats import PairedTest
    from skillopt.trainer.scoring import paired_rows

    test = paired_rows(
        rows_a, rows_b, lambda r: gate_score(r.hard, r.soft, metric=metric, mixed_weight=mixed_weight)
    )
    test = test or PairedTest(name="none", p_value=1.0, effect=0.0, ci95=(0.0, 0.0), n=0, wins=0, losses=0)
    return {**test.to_json(), "metric": metric}
