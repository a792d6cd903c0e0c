"""The public face of the trainer: construct with everything resolved, call :meth:`fit`.

Usage::

    trainer = Trainer(config, data=data, rollouts=rollouts, optimizer=optimizer,
                      out_dir=Path("runs/demo"), initial_skill=initial_skill(config, data),
                      callbacks=[ProgressDisplay()])
    result = trainer.fit()          # a FitResult; summary.json holds its JSON form
    result.best_selection_score, result.status

The same call on a run directory that holds a run resumes it (what is committed is not done
again). ``trainer.control.request_stop(reason)`` stops it cleanly at the next stage boundary,
from any thread, as a callback would.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from skillopt.config import Config
from skillopt.envs.base import EnvData
from skillopt.models.roles import RoleModel
from skillopt.trainer.callbacks import Callback, CallbackList, RunControl
from skillopt.trainer.context import RunContext
from skillopt.trainer.loop import FitLoop
from skillopt.trainer.rollouts import Rollouts
from skillopt.trainer.rundir import Failpoint
from skillopt.trainer.rundir.store import _FROM_ENV
from skillopt.trainer.state import RunMode
from skillopt.trainer.summary import FitResult
from skillopt.types import SkillVersion

__all__ = ["Trainer"]


class Trainer:
    """Trains one skill.

    Args:
        config: the run configuration.
        data: the env's splits.
        rollouts: runs rollouts (embedded or remote sandbox hosts) into rollout dirs.
        optimizer: the optimizer model (reflection, merge, ranking, slow update...).
        out_dir: the run directory (created; resumed when it holds a run).
        initial_skill: the version to start from: a one-file skill
            (``SkillVersion(content=data.initial_skill())``) or a package
            (:func:`skillopt.skill.package.load_skill`); see
            :func:`skillopt.trainer.planning.initial_skill`.
        callbacks: progress display, plotter, ... (order-independent).
        mode: real models or the offline simulation (recorded in the state and summaries).
        environment: the sandbox side of the environment manifest (pinned runtime image
            digest, host versions, agent CLI versions); the data checksums are added here.
        failpoint: crash injection for tests (default: ``SKILLOPT_FAILPOINT`` when set).

    Raises:
        ConfigError: the config does not fit the data (an empty selection split, a
            ``train.train_size`` that disagrees with the split).
        TypeError: a callback defines an ``on_*`` method that is no hook (a misspelt
            ``on_stpe_end``), or a hook that cannot take its event.
    """

    def __init__(
        self,
        config: Config,
        *,
        data: EnvData,
        rollouts: Rollouts,
        optimizer: RoleModel,
        out_dir: Path,
        initial_skill: SkillVersion,
        callbacks: Sequence[Callback] = (),
        mode: RunMode | None = None,
        environment: Mapping[str, Any] | None = None,
        failpoint: Failpoint | None = _FROM_ENV,
    ) -> None:
        self._ctx = RunContext(
            config,
            data=data,
            rollouts=rollouts,
            optimizer=optimizer,
            out_dir=out_dir,
            failpoint=failpoint,
            initial_skill=initial_skill,
            hooks=CallbackList(callbacks),
            mode=mode or RunMode(simulated=False),
            environment=environment or {},
        )

    @property
    def out_dir(self) -> Path:
        return self._ctx.run.root

    @property
    def control(self) -> RunControl:
        """Ask the run to stop (``control.request_stop(reason)``), from any thread."""
        return self._ctx.control

    def fit(self) -> FitResult:
        """Train (or resume), evaluate on test, write ``summary.json``.

        Raises:
            SystemicFailure: every rollout of a batch failed before any model reply, or the
                baseline lost too many rows to infrastructure.
            ConfigError: resuming a run in the other mode (real models or simulation).
            RunDirectoryDamaged: the run state to resume from is unreadable.
        """
        return FitLoop(self._ctx).run()
