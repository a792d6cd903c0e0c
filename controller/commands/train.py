"""``skillopt train``: train a skill, or resume a run directory."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from controller.fleet.access import add_fleet_arguments, config_with_access
from skillopt.errors import ConfigError, SkillOptError

if TYPE_CHECKING:
    from skillopt.config import Config
    from skillopt.envs.base import EnvData
    from skillopt.trainer.callbacks import Callback
    from skillopt.trainer.state import RunMode
    from skillopt.trainer.summary import FitResult

__all__ = ["load", "register"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train",
        help="train a skill (epochs, batches, edit budget, validation gate)",
        description=(
            "Train an agent's skill document. With no sandbox endpoints configured, a local sandbox "
            "service is started for the run and stopped afterwards. Without provider keys the run is an "
            "offline simulation (announced). Examples:\n"
            "  skillopt train --config spreadsheetbench_demo --out runs/demo\n"
            "  skillopt train --config my.yaml --set train.batch_size=20 --set env.workers=8\n"
            "  skillopt train --config my.yaml --endpoints h1:50051,h2:50051 --token-file T --tls-ca ca.pem\n"
            "  skillopt train --resume runs/demo\n"
            "Real models on an env's vendored sample (no env.data_root) are refused unless --allow-sample; "
            "the *_demo configs allow it. Check your own data first: skillopt data check --env E DIR."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--config", help="YAML config file or a built-in name (spreadsheetbench, spreadsheetbench_demo)"
    )
    p.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="override a config key (repeatable)"
    )
    p.add_argument("--out", help="run directory (default: runs/<env>_<timestamp>)")
    p.add_argument("--resume", metavar="DIR", help="continue the run in DIR where it stopped")
    add_fleet_arguments(
        p.add_argument_group(
            "sandbox fleet",
            "where rollouts run (README: Reaching the fleet); each flag beats its sandbox.* key, which "
            "beats its environment variable",
        ),
        config_keys=True,
        endpoints_default="an embedded local sandbox, started for the run",
    )
    p.add_argument(
        "--simulate",
        choices=("auto", "on", "off", "noisy"),
        help="offline simulation with scripted models: on, off, auto = when no provider key is set, or "
        "noisy = a stochastic target (docs/gate.md) (default: the config's run.simulate: off, auto in "
        "the *_demo configs)",
    )
    p.add_argument(
        "--allow-sample",
        action="store_true",
        help="let real models run on the env's vendored sample (env.allow_sample=true); refused otherwise",
    )
    p.set_defaults(func=run)


def load(args: argparse.Namespace) -> tuple[Config, Path]:
    """The config and run directory ``skillopt train ARGS`` runs with: a new run's config
    (``--config`` with ``--set``), or the run's own for ``--resume`` (refused when it cannot be
    resumed), with the fleet flags applied. The WebUI checks a launch or a resume with it
    (``args`` from :func:`controller.cli.parse_args`) before starting the CLI.

    Raises:
        ConfigError: a bad config or flag, no run to resume, a run that exists already.
        RunDirectoryDamaged: the run to resume cannot be resumed (the message says why).
    """
    from controller.rundir.damage import inspect as inspect_damage
    from controller.rundir.runconfig import run_config
    from skillopt.config import load_config
    from skillopt.trainer.rundir import RunDirectoryDamaged, layout

    overrides = list(args.set)
    if args.simulate:
        overrides.append(f"run.simulate={args.simulate}")
    if args.allow_sample:
        overrides.append("env.allow_sample=true")
    if args.resume:
        out = Path(args.resume)
        if not (out / layout.CONFIG).exists():
            raise ConfigError(f"{out} is not a run directory (no {layout.CONFIG})")
        damage = inspect_damage(out, deep=True)
        if not damage.resumable:  # said before a sandbox starts, and without "--resume" advice
            raise RunDirectoryDamaged(f"{out}: {damage.headline()}; {damage.advice()}")
        return config_with_access(run_config(out, overrides), args), out
    if not args.config:
        raise ConfigError(
            "give --config FILE (or a built-in name such as spreadsheetbench_demo), or --resume DIR"
        )
    cfg = config_with_access(load_config(args.config, overrides), args)
    out = Path(args.out or cfg.run.out_root or f"runs/{cfg.env.name}_{time.strftime('%Y%m%d_%H%M%S')}")
    if (out / layout.STATE).exists():
        raise ConfigError(f"{out} already holds a run; continue it with: skillopt train --resume {out}")
    return cfg, out


def _pinned(out: Path, resume: bool, mode: RunMode) -> tuple[str, str]:
    """The runtime and agent image digests a resumed run is pinned to (``""``: none, or a new
    run), after refusing to resume it in another mode.

    Raises:
        ConfigError: the run was started in another mode (real models or the simulation).
    """
    from skillopt.trainer.rundir import RecordError, RunDirectory
    from skillopt.trainer.state import refuse_mode_change

    try:
        recorded = RunDirectory(out).state() if resume else None
    except RecordError:
        recorded = None  # a damaged state: the trainer says so when it resumes
    if recorded is None:
        return "", ""
    refuse_mode_change(out, recorded.run_mode, mode)
    # The environment manifest the run is pinned to (the sandbox hosts' own facts).
    env = recorded.environment
    return str(env.get("runtime_image_digest", "")), str(env.get("agent_image_digest", ""))


def _say_stopped(result: FitResult, out: Path) -> None:
    """How to continue a run that stopped before its end (a stop asked for, or a budget)."""
    if result.status != "stopped":
        return
    how = (
        f": skillopt train --resume {out}"
        if result.stop_reason.startswith("stop requested")
        else f" a larger budget: skillopt train --resume {out} --set train.max_tokens=N or --set train.max_cost_usd=X"
    )
    print(
        f"skillopt train: stopped after step {result.total_steps}: {result.stop_reason}\n(continue with{how})",
        file=sys.stderr,
    )


def _fit(
    cfg: Config,
    out: Path,
    mode: RunMode,
    data: EnvData,
    callbacks: list[Callback],
    *,
    pinned: tuple[str, str],
) -> FitResult:
    """Train in a sandbox session (embedded, or the fleet): from the initial skill, with the
    live status (and the noisy simulation's ground truth) among the callbacks.

    Raises:
        SkillOptError: the session or the run failed (the message says what to do).
        OSError: a write failed (a full disk: the caller says so).
    """
    from controller.rundir.live import LiveStatus
    from controller.session import open_session
    from skillopt.trainer import Trainer
    from skillopt.trainer.planning import initial_skill

    initial = initial_skill(cfg, data)
    if mode.noisy:
        from skillopt.testing.truth import simulation_truth

        callbacks.append(simulation_truth(cfg, data))  # simulation-only ground truth
    with open_session(
        cfg, out_dir=out, mode=mode, pinned_digest=pinned[0], pinned_agent_digest=pinned[1]
    ) as session:
        executor = session.rollouts.executor
        hosts = (lambda: executor.hosts_state) if hasattr(executor, "hosts_state") else None
        callbacks.append(LiveStatus(out, hosts=hosts))
        trainer = Trainer(
            cfg,
            data=data,
            rollouts=session.rollouts,
            optimizer=session.optimizer,
            out_dir=out,
            initial_skill=initial,
            callbacks=callbacks,
            mode=session.mode,
            environment=session.environment,
        )
        return trainer.fit()


def run(args: argparse.Namespace) -> int:
    from controller.rundata import refuse_sample, run_data
    from controller.rundir.live import StopWatcher
    from controller.rundir.lock import acquire_run_lock
    from controller.session import decide_simulation
    from controller.ui.curve import CurvePlotter
    from controller.ui.progress import ProgressDisplay
    from skillopt.durable import is_disk_full
    from skillopt.logs import LogFile, configure_logging
    from skillopt.tracking import tracking_callbacks
    from skillopt.trainer.planning import load_data
    from skillopt.trainer.rundir import RunDirectoryDamaged, RunDirectoryFull, layout

    try:
        cfg, out = load(args)
        mode = decide_simulation(cfg)
        pinned, pinned_agent = _pinned(out, bool(args.resume), mode)
        data = load_data(cfg)
        used = run_data(cfg, data)
        refuse_sample(cfg, mode, used, command="train")
        trackers = tracking_callbacks(cfg)  # refuses an enabled tracker that is not installed
    except SkillOptError as exc:
        print(f"skillopt train: {exc.message}", file=sys.stderr)
        return 2
    # Always said, whatever the display: which numbers this run produces, and from which data.
    print(f"skillopt train: {mode.describe()}", file=sys.stderr)
    print(f"skillopt train: {used.line()}", file=sys.stderr, flush=True)
    try:
        # Held while this process runs: the run's liveness for the WebUI and `skillopt runs`.
        lock = acquire_run_lock(out)
    except SkillOptError as exc:
        print(f"skillopt train: {exc.message}", file=sys.stderr)
        return 2
    except OSError as exc:
        if not is_disk_full(exc):
            raise
        print(f"skillopt train: {RunDirectoryFull.from_os_error(out, exc).message}", file=sys.stderr)
        return 1
    log_file = LogFile(out / layout.TRAIN_LOG)  # whole lines; a full disk drops them, never raises
    configure_logging(json=True, level=cfg.run.log_level, stream=log_file)
    progress = ProgressDisplay()
    callbacks: list[Callback] = [progress] if cfg.run.progress else []
    if cfg.run.plot:
        callbacks.append(CurvePlotter())
    callbacks += [StopWatcher(out), *trackers]
    try:
        result = _fit(cfg, out, mode, data, callbacks, pinned=(pinned, pinned_agent))
    except (SkillOptError, OSError) as exc:
        if isinstance(exc, OSError) and not is_disk_full(exc):  # a bug or the machine: the traceback helps
            raise
        # A full disk met outside the trainer's writes (e.g. the sandbox's log there) says the same.
        error = exc if isinstance(exc, SkillOptError) else RunDirectoryFull.from_os_error(out, exc)
        progress._stop()
        print(f"skillopt train: {error.message}", file=sys.stderr)
        if not isinstance(error, RunDirectoryDamaged):  # its message says what to do instead
            print(f"(run dir {out}; continue with: skillopt train --resume {out})", file=sys.stderr)
        return 1
    finally:
        log_file.close()
        lock.release()
    _say_stopped(result, out)
    return 0
