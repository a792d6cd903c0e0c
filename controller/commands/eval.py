"""``skillopt eval``: roll a skill out on a split and report its scores with their 95%
intervals; with ``--against B``, also roll B out on the same items and report the paired
difference (its interval and a one-sided p-value: the exact sign test on pass/fail scores, a
paired bootstrap otherwise).

Three ways to say what to evaluate::

    skillopt eval --run runs/demo [--skill best|final|PATH]   # as the run trained
    skillopt eval --config my.yaml --skill PATH               # any config, any skill
    skillopt eval --resume runs/demo/evals/test_best_skill_…  # continue an unfinished eval

``--run`` reuses the run's own config (``config.json``) and mode (real models or the
simulation; ``--simulate`` overrides it) and writes under ``RUN/evals/`` by default, where the
WebUI lists it. Every eval records what it runs in ``eval_config.json``, which ``--resume``
continues (giving the same ``--out`` again does too).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from controller.fleet.access import add_fleet_arguments
from skillopt.errors import ConfigError, SkillOptError
from skillopt.gate import format_score

if TYPE_CHECKING:
    from skillopt.config import Config
    from skillopt.trainer.rundir import EvalConfigRecord, EvalSummary, SkillRef
    from skillopt.trainer.state import RunMode
    from skillopt.types import SkillVersion

__all__ = ["load", "register"]

_SPLITS = ("train", "val", "test", "all")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "eval",
        help="evaluate a skill on a split (no training); --run RUN evaluates a run as it trained",
        description=(
            "Roll a skill out on a split through the sandbox (embedded or --endpoints) and write "
            "eval_summary.json. Examples:\n"
            "  skillopt eval --run runs/demo                     # the run's best skill, its config and mode\n"
            "  skillopt eval --run runs/demo --skill final --against best --split val\n"
            "  skillopt eval --config my.yaml --skill path/to/SKILL.md\n"
            "  skillopt eval --resume runs/demo/evals/test_best_skill_20250101_120000"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--config", help="YAML config file or a built-in name")
    source.add_argument(
        "--run",
        metavar="RUN",
        help="a training run's directory: evaluate with the config it trained with (its config.json), in "
        "the mode it ran in (real models or the simulation; --simulate overrides), writing to "
        "RUN/evals/<split>_<skill>_<time>/ unless --out says otherwise",
    )
    source.add_argument(
        "--resume",
        metavar="DIR",
        help="continue the eval in DIR where it stopped: the same config, skills, split and mode "
        "(finished rollouts are kept, failed ones run again); --set, --endpoints may change",
    )
    p.add_argument(
        "--skill",
        help="the skill to evaluate: with --run, best (default: best_skill/<name>/, else best_skill.md), "
        "final (the version after the last step), initial (the one it started from) or vN (the version "
        "after step N); or a path: a SKILL.md file or an Agent Skills package "
        "folder (e.g. a run's best_skill/<name>/)",
    )
    p.add_argument(
        "--against",
        metavar="SKILL_B",
        help="also evaluate this skill (best, final, initial, vN with --run, or a path) on the same items and report "
        "SKILL - SKILL_B with its 95%% interval and p-value (per item, by evaluation.gate_metric)",
    )
    p.add_argument(
        "--split",
        choices=_SPLITS,
        help="the split to evaluate on: train, val (the env's name for the selection split), test, or all "
        "(default: test)",
    )
    p.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="override a config key (repeatable)"
    )
    p.add_argument(
        "--out",
        help="output directory (default: RUN/evals/<split>_<skill>_<time> with --run, else "
        "runs/eval_<env>_<time>); an unfinished eval's directory continues it, as --resume does",
    )
    add_fleet_arguments(
        p.add_argument_group(
            "sandbox fleet",
            "where rollouts run; each flag beats its sandbox.* key, which beats its environment variable",
        ),
        config_keys=True,
        endpoints_default="an embedded local sandbox, started for the evaluation",
    )
    p.add_argument(
        "--simulate",
        choices=("auto", "on", "off", "noisy"),
        help="offline simulation with scripted models (noisy: a stochastic target) (default: the run's "
        "mode with --run or --resume, else the config's run.simulate)",
    )
    p.add_argument(
        "--allow-sample",
        action="store_true",
        help="let real models run on the env's vendored sample (env.allow_sample=true); refused otherwise",
    )
    p.set_defaults(func=run)


@dataclass(frozen=True)
class _Plan:
    """What one eval runs, resolved from the arguments (or from its ``eval_config.json``)."""

    cfg: Config
    mode: RunMode
    out: Path
    split: str
    skill_path: Path
    skill: SkillVersion
    against_path: Path | None
    against: SkillVersion | None
    run_dir: Path | None
    #: The data root and split counts (the start line).
    data_line: str = ""

    def record(self) -> EvalConfigRecord:
        """``eval_config.json``: what ``--resume`` continues."""
        from skillopt.trainer.rundir import EvalConfigRecord, SkillRef

        return EvalConfigRecord(
            config=self.cfg,
            split=self.split,
            skill=SkillRef(path=str(self.skill_path.resolve()), tree_sha256=self.skill.tree_sha256),
            against=SkillRef(path=str(self.against_path.resolve()), tree_sha256=self.against.tree_sha256)
            if self.against_path is not None and self.against is not None
            else None,
            mode=self.mode,
            run=str(self.run_dir.resolve()) if self.run_dir is not None else "",
        )


def _skill_path(name: str, run_dir: Path | None, flag: str) -> Path:
    """``best``/``final``/``initial``/``vN`` of ``run_dir``, else ``name`` as a path.

    Raises:
        ConfigError: such a name without ``--run`` (and no such file), or the run lacks it.
    """
    from controller.rundir.runconfig import is_run_skill_name, run_skill

    if is_run_skill_name(name):
        if run_dir is not None:
            return run_skill(run_dir, name)
        if not Path(name).exists():
            raise ConfigError(
                f"{flag} {name} names a training run's skill: give the run with --run RUN, or {flag} a "
                "path to a SKILL.md file or a package folder"
            )
    return Path(name)


def _stem(path: Path) -> str:
    """How an eval's default folder names its skill (as the WebUI's launcher does)."""
    from skillopt.trainer.rundir import layout

    if path.parent.name.startswith("v") and path.parent.parent.name == layout.SKILL_PACKAGES:
        return f"skill_{path.parent.name}"  # skill_packages/v0003/<name>/ -> skill_v0003
    if path.parent.name == layout.BEST_SKILL_DIR:
        return Path(layout.BEST_SKILL).stem
    return path.stem if path.is_file() else path.name


def _recorded(out: Path) -> EvalConfigRecord | None:
    """``out``'s ``eval_config.json``, ``None`` when it has none.

    Raises:
        ConfigError: it is damaged.
    """
    from skillopt.trainer.rundir import RecordError, RunDirectory, layout

    try:
        return RunDirectory(out, failpoint=None).eval_config()
    except RecordError as exc:
        raise ConfigError(
            f"{out / layout.EVAL_CONFIG} {exc}; start the eval again with a new --out"
        ) from None


@dataclass(frozen=True)
class _Source:
    """What the arguments (or an eval's record) say to evaluate, before anything is loaded."""

    cfg: Config
    out: Path
    split: str
    skill_path: Path
    against_path: Path | None
    run_dir: Path | None
    record: EvalConfigRecord | None  # the eval's eval_config.json when it continues one


def _with_simulate(overrides: list[str], simulate: str) -> list[str]:
    return [*overrides, f"run.simulate={simulate}"] if simulate else overrides


def _resumed(args: argparse.Namespace, overrides: list[str]) -> _Source:
    """``--resume DIR``: everything from the eval's ``eval_config.json``.

    Raises:
        ConfigError: a flag that would change the eval, or DIR is no (readable) eval directory.
    """
    from skillopt.config import with_overrides
    from skillopt.trainer.rundir import layout

    out = Path(args.resume)
    given = [
        f for f, v in (("--skill", args.skill), ("--against", args.against), ("--split", args.split)) if v
    ]
    if given or args.out:
        raise ConfigError(
            f"--resume continues the eval in {out} as it started; {', '.join(given or ['--out'])} cannot "
            "change it. To evaluate something else, start a new eval (--run RUN or --config FILE)"
        )
    rec = _recorded(out)
    if rec is None:
        raise ConfigError(
            f"{out} is not an eval directory (no {layout.EVAL_CONFIG}); an eval started by an older "
            "skillopt continues when its command is given again with the same --out"
        )
    simulate = args.simulate or (rec.mode.flag if rec.mode is not None else "")
    cfg = with_overrides(rec.config, _with_simulate(overrides, simulate))
    return _Source(
        cfg=cfg,
        out=out,
        split=rec.split,
        skill_path=Path(rec.skill.path),
        against_path=Path(rec.against.path) if rec.against is not None else None,
        run_dir=Path(rec.run) if rec.run else None,
        record=rec,
    )


def _started(args: argparse.Namespace, overrides: list[str]) -> _Source:
    """``--run RUN`` or ``--config FILE``: a new eval (or one continued by its ``--out``).

    Raises:
        ConfigError: the config or the run is unusable, or a skill name needs ``--run``.
    """
    from controller.rundir.runconfig import recorded_mode, run_config
    from skillopt.config import load_config
    from skillopt.trainer.rundir import layout

    split, run_dir = args.split or "test", Path(args.run) if args.run else None
    if run_dir is not None:
        recorded = None if args.simulate else recorded_mode(run_dir)  # the run's mode by default
        cfg = run_config(
            run_dir, _with_simulate(overrides, args.simulate or (recorded.flag if recorded else ""))
        )
    elif not args.skill:
        raise ConfigError("give --skill PATH (a SKILL.md file or a package folder) with --config")
    else:
        cfg = load_config(args.config, _with_simulate(overrides, args.simulate or ""))
    skill_path = _skill_path(args.skill or "best", run_dir, "--skill")
    stamp = time.strftime("%Y%m%d_%H%M%S")
    if args.out:
        out = Path(args.out)
    elif run_dir is not None:  # beside the run's other evals, where the WebUI lists them
        out = run_dir / layout.EVALS / f"{split}_{_stem(skill_path)}_{stamp}"
    else:
        out = Path(f"runs/eval_{cfg.env.name}_{stamp}")
    return _Source(
        cfg=cfg,
        out=out,
        split=split,
        skill_path=skill_path,
        against_path=_skill_path(args.against, run_dir, "--against") if args.against else None,
        run_dir=run_dir,
        record=_recorded(out),
    )


def _source(args: argparse.Namespace) -> _Source:
    """What the arguments say to evaluate, the fleet flags applied to its config.

    Raises:
        SkillOptError: the config or the run is unusable, or a skill name needs ``--run``.
    """
    from controller.fleet.access import config_with_access

    overrides = list(args.set)
    if args.allow_sample:
        overrides.append("env.allow_sample=true")
    src = _resumed(args, overrides) if args.resume else _started(args, overrides)
    return replace(src, cfg=config_with_access(src.cfg, args))


def load(args: argparse.Namespace) -> tuple[Config, Path]:
    """The config and output directory ``skillopt eval ARGS`` runs with (its skills and data are
    loaded when it runs). The WebUI checks an eval with it (``args`` from
    :func:`controller.cli.parse_args`) before starting the CLI.

    Raises:
        SkillOptError: the config or the run is unusable, or a skill name needs ``--run``.
    """
    src = _source(args)
    return src.cfg, src.out


def _plan(args: argparse.Namespace) -> _Plan:
    """Resolve config, mode, skills, split and output directory from the arguments.

    Raises:
        SkillOptError: a config, skill or directory is unusable (the message says what to do).
        OSError: a file could not be read.
    """
    from controller.rundata import refuse_sample, run_data
    from controller.session import decide_simulation
    from skillopt.skill.package import load_skill
    from skillopt.trainer.planning import load_data
    from skillopt.trainer.state import refuse_mode_change

    src = _source(args)
    cfg = src.cfg
    mode = decide_simulation(cfg)
    used = run_data(cfg, load_data(cfg))
    refuse_sample(cfg, mode, used, command="eval")
    skill = load_skill(src.skill_path, limits=cfg.env.skill_limits)
    against = load_skill(src.against_path, limits=cfg.env.skill_limits) if src.against_path else None
    plan = _Plan(
        cfg,
        mode,
        src.out,
        src.split,
        src.skill_path,
        skill,
        src.against_path,
        against,
        src.run_dir,
        used.line(),
    )
    if src.record is not None:  # continuing: the same skills and split, in the same mode
        _refuse_change(src.out, src.record, plan.record())
        refuse_mode_change(src.out, src.record.mode, mode)
    return plan


def _refuse_change(out: Path, before: EvalConfigRecord, now: EvalConfigRecord) -> None:
    """An eval continues only with what it started with: its rows would mix two skills.

    Raises:
        ConfigError: naming what differs and what to do instead.
    """
    again = (
        "Evaluate into a new --out (or leave --out out), or continue that eval as it was: "
        f"skillopt eval --resume {out}"
    )
    if before.split != now.split:
        raise ConfigError(
            f"{out} holds an eval of another split (it was {before.split}, now {now.split}); their rows "
            f"cannot be mixed. {again}"
        )
    for what, was, is_ in (
        ("skill", before.skill, now.skill),
        ("--against skill", before.against, now.against),
    ):
        if (was and was.tree_sha256) == (is_ and is_.tree_sha256):
            continue
        if was is not None and is_ is not None and was.path == is_.path:  # the same path, other files
            raise ConfigError(
                f"the {what} {was.path} changed since the eval in {out} started (sha256 "
                f"{was.tree_sha256[:12]}, now {is_.tree_sha256[:12]}); its rows and the new ones "
                "cannot be mixed. Evaluate it into a new --out"
            )
        raise ConfigError(
            f"{out} holds an eval of another {what} (it was {_shown(was)}, now {_shown(is_)}); their rows "
            f"cannot be mixed. {again}"
        )


def _shown(skill: SkillRef | None) -> str:
    return "none" if skill is None else f"{skill.path} (sha256 {skill.tree_sha256[:12]})"


def run(args: argparse.Namespace) -> int:
    from skillopt.durable import is_disk_full
    from skillopt.trainer.rundir import RunDirectoryFull

    try:
        plan = _plan(args)
    except (SkillOptError, OSError) as exc:
        print(f"skillopt eval: {getattr(exc, 'message', exc)}", file=sys.stderr)
        return 2
    try:
        return _run(plan)
    except OSError as exc:
        if not is_disk_full(exc):  # a bug or the machine: the traceback helps
            raise
        # Its files are written whole or not at all (skillopt.durable): it stopped at a write.
        print(f"skillopt eval: {RunDirectoryFull.from_os_error(plan.out, exc).message}", file=sys.stderr)
        print(f"(continue with: skillopt eval --resume {plan.out})", file=sys.stderr)
        return 1


def _run(plan: _Plan) -> int:
    """Evaluate ``plan`` into its directory and report.

    Raises:
        OSError: a write failed (a full disk: the caller says so).
    """
    from controller.rundir.lock import acquire_run_lock
    from skillopt.durable import atomic_write_json, atomic_write_text
    from skillopt.logs import LogFile, configure_logging
    from skillopt.trainer.rundir import layout

    out = plan.out
    print(f"skillopt eval: {plan.mode.describe()}", file=sys.stderr, flush=True)
    print(f"skillopt eval: {plan.data_line}", file=sys.stderr, flush=True)
    print(
        f"skillopt eval: {plan.skill_path}"
        + (f" against {plan.against_path}" if plan.against_path is not None else "")
        + f" on {plan.split}"
        + (f" with the config of run {plan.run_dir}" if plan.run_dir is not None else "")
        + f"; output in {out}",
        file=sys.stderr,
        flush=True,
    )
    try:
        _lock = acquire_run_lock(out)  # held until this function returns: the eval's liveness
    except SkillOptError as exc:
        print(f"skillopt eval: {exc.message}", file=sys.stderr)
        return 2
    atomic_write_json(out / layout.EVAL_CONFIG, plan.record().to_json())
    # Whole lines; a full disk drops them, never raises (the eval's own writes say so).
    configure_logging(json=True, level=plan.cfg.run.log_level, stream=LogFile(out / "eval.log"))
    try:
        summary = _evaluate(plan)
    except SkillOptError as exc:
        print(f"skillopt eval: {exc.message}", file=sys.stderr)
        print(f"(continue with: skillopt eval --resume {out})", file=sys.stderr)
        return 1
    report = summary.to_json()
    atomic_write_text(out / layout.EVAL_SUMMARY, json.dumps(report, indent=2) + "\n")
    _print_scores(plan, summary)
    print(json.dumps(report))
    if not summary.ok:
        print(
            f"skillopt eval: more than {summary.max_infra_fraction:.0%} of the rollouts failed on "
            f"infrastructure (evaluation.max_infra_fraction): these numbers are not a measurement. See "
            f"{out / f'eval_{plan.split}' / layout.RESULTS}; fix the sandbox and continue with: skillopt "
            f"eval --resume {out} (finished rollouts are kept, failed ones run again)",
            file=sys.stderr,
        )
        return 1
    return 0


def _evaluate(plan: _Plan) -> EvalSummary:
    """Both skills on the split's items through one sandbox session (the trainer's evaluation
    routine), with where and how they ran."""
    from controller.session import open_session
    from controller.ui.progress import RowProgress
    from skillopt.models.prefix import prefix_report
    from skillopt.trainer.evaluation import compare_rows, evaluate_split
    from skillopt.trainer.manifest import data_manifest
    from skillopt.trainer.planning import load_data
    from skillopt.trainer.rundir import target_prefix_on_disk

    cfg, mode, out, split = plan.cfg, plan.mode, plan.out, plan.split
    data = load_data(cfg)
    names = ("train", "val", "test") if split == "all" else (split,)
    items = [it for name in names for it in data.split(name)]
    if cfg.evaluation.test_env_num:
        items = items[: cfg.evaluation.test_env_num]
    progress: RowProgress | None = None
    try:
        with open_session(cfg, out_dir=out, mode=mode) as session:
            progress = RowProgress()
            session.rollouts.on_row = progress

            def one(text: SkillVersion, path: str, suffix: str) -> tuple[EvalSummary, list]:
                label = f"eval_{split}{suffix}"
                return evaluate_split(
                    session.rollouts,
                    items,
                    text,
                    out / label,
                    label=label,
                    split=split,
                    skill_name=str(Path(path).resolve()),
                    config=cfg,
                    categories=data.task_types(),
                )

            summary, rows = one(plan.skill, str(plan.skill_path), "")
            if plan.against is not None:
                e = cfg.evaluation
                other, rows_b = one(plan.against, str(plan.against_path), "_against")
                diff = compare_rows(rows, rows_b, metric=e.gate_metric, mixed_weight=e.gate_mixed_weight)
                summary = replace(summary, against=other, difference=diff, metric=e.gate_metric)
            hosts = tuple(session.rollouts.executor.hosts())
            environment = {**session.environment, "data": data_manifest({split: items})}
    finally:
        if progress is not None:
            progress.close()
    # From the rows' recorded model exchanges (both skills' when --against).
    share, by_role = prefix_report({"target": target_prefix_on_disk(out)})
    return replace(
        summary,
        mode=mode,
        sandbox_hosts=hosts,
        environment=environment,
        cacheable_prefix_share=share,
        cacheable_prefix=by_role,
    )


def _print_scores(plan: _Plan, s: EvalSummary) -> None:
    print(
        f"skillopt eval: {plan.split}: hard {format_score(s.hard, s.hard_ci95)}, soft "
        f"{format_score(s.soft, s.soft_ci95)} over {s.n_scored} scored rollouts (95% intervals); "
        f"{s.n_infra} of {s.n_items} failed on infrastructure (not scored)",
        file=sys.stderr,
    )
    if s.against is not None and s.difference is not None:
        b, d = s.against, s.difference
        print(
            f"skillopt eval: against {plan.against_path}: hard {format_score(b.hard, b.hard_ci95)}; "
            f"difference ({s.metric}) {d.effect:+.3f} [{d.ci95[0]:+.3f}, {d.ci95[1]:+.3f}], "
            f"one-sided p = {d.p_value:.3g} ({d.name} test over {d.n} items: {d.wins} better, "
            f"{d.losses} worse)",
            file=sys.stderr,
        )
