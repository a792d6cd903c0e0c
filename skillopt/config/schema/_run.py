"""What the run does around the training: the ``run`` section (its directory, resume, logs,
the offline simulation) and the ``tracking`` section (MLflow, Weights & Biases and TensorBoard,
each a group of keys: ``tracking.mlflow.enabled``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, ClassVar, Literal, TypeAlias

from pydantic import Field

from skillopt.config._fields import FieldError
from skillopt.config.schema._section import _Section, _subsection
from skillopt.validation import Bounds, Canonical

__all__ = [
    "LogLevel",
    "MlflowTracking",
    "RunConfig",
    "Simulate",
    "TensorboardTracking",
    "TrackingConfig",
    "WandbMode",
    "WandbTracking",
]

LogLevel = Literal["debug", "info", "warning", "error"]
Simulate = Literal["auto", "on", "off", "noisy"]
WandbMode = Literal["auto", "online", "offline"]

#: Enum field → {alternative spelling: canonical value}, resolved when the section is built.
_RUN_ALIASES: Mapping[str, Mapping[str, str]] = MappingProxyType(
    {
        "log_level": {"warn": "warning"},
        "simulate": {"true": "on", "yes": "on", "1": "on", "false": "off", "no": "off", "0": "off"},
    }
)

LogLevelField: TypeAlias = Annotated[LogLevel, Canonical(_RUN_ALIASES["log_level"])]
SimulateField: TypeAlias = Annotated[Simulate, Canonical(_RUN_ALIASES["simulate"])]
WandbModeField: TypeAlias = Annotated[WandbMode, Canonical()]

#: A URI with a user (and password) before its host: ``http://bob:pw@host``.
_USERINFO = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://[^/@]+@")


class RunConfig(_Section):
    """The run itself: output directory, resume, logging and presentation."""

    SECTION: ClassVar[str] = "run"
    ALIASES: ClassVar[Mapping[str, Mapping[str, str]]] = _RUN_ALIASES

    out_root: str = ""
    """Run directory; ``""`` = chosen by the CLI (``outputs/skillopt_<env>_<model>_<time>``)."""
    resume: bool = False
    """Continue the run found in ``out_root`` instead of refusing a non-empty directory."""
    log_level: LogLevelField = "info"
    """Threshold of the structured logs."""
    progress: bool = True
    """Show live progress on the terminal."""
    plot: bool = True
    """Render training curves to PNG at the end of each epoch."""
    simulate: SimulateField = "off"
    """Offline simulation with a scripted model server: ``off`` = never (a run without a usable
    provider stops with what to set), ``on`` = always, ``auto`` = when no provider key is
    configured (only the ``*_demo`` configs use it), ``noisy`` = always, with a stochastic
    target (each task passes with a probability; its exact expected scores are recorded in
    ``simulation_truth.json``) and an optimizer that also proposes decoy and harmful edits."""


class MlflowTracking(_Section):
    """Log the run to MLflow (``pip install 'skillopt[mlflow]'``; docs/observability.md)."""

    SECTION: ClassVar[str] = "tracking.mlflow"

    enabled: bool = False
    """Log the run to MLflow."""
    tracking_uri: str = ""
    """MLflow tracking server or store (``http://host:5000``, ``sqlite:///path/mlflow.db``);
    ``""`` = ``MLFLOW_TRACKING_URI`` when set, else a local store beside the run directory
    (``mlflow.db`` and ``mlartifacts/`` in its parent folder, shared by the runs there)."""
    experiment: str = "skillopt"
    """MLflow experiment the run is logged under (created if missing)."""
    run_name: str = ""
    """Name of the MLflow run; ``""`` = the run directory's name."""

    def _validate(self) -> None:
        self._non_empty("experiment")
        if _USERINFO.match(self.tracking_uri):
            raise FieldError(
                self._key("tracking_uri"),
                "must not hold a user or password (the config is saved with the run); give them to "
                "MLflow as MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD (or MLFLOW_TRACKING_TOKEN)",
            )


class WandbTracking(_Section):
    """Log the run to Weights & Biases (``pip install 'skillopt[wandb]'``)."""

    SECTION: ClassVar[str] = "tracking.wandb"

    enabled: bool = False
    """Log the run to W&B."""
    project: str = "skillopt"
    """W&B project of the run."""
    entity: str = ""
    """W&B entity (user or team); ``""`` = the key's default entity."""
    mode: WandbModeField = "auto"
    """``online`` = send as it runs (needs a W&B API key), ``offline`` = write the run under
    ``dir`` only (upload later with ``wandb sync``), ``auto`` = online when a key is configured
    (``WANDB_API_KEY`` or ``wandb login``), else offline; ``WANDB_MODE``, when set, decides."""
    dir: str = ""
    """Folder W&B writes its ``wandb/`` files into; ``""`` = the run directory."""

    def _validate(self) -> None:
        self._non_empty("project")


class TensorboardTracking(_Section):
    """Write TensorBoard event files (``pip install 'skillopt[tensorboard]'``)."""

    SECTION: ClassVar[str] = "tracking.tensorboard"

    enabled: bool = False
    """Write the run's TensorBoard event files."""
    log_dir: str = ""
    """Folder of the event files; ``""`` = ``tensorboard/`` in the run directory (so
    ``tensorboard --logdir runs`` shows every run under ``runs``)."""


class TrackingConfig(_Section):
    """Experiment trackers the run also logs to (none by default). A tracker that fails says so
    once and the run goes on without it; ``--resume`` continues the same tracker run."""

    SECTION: ClassVar[str] = "tracking"

    mlflow: Annotated[MlflowTracking, _subsection(MlflowTracking)] = Field(default_factory=MlflowTracking)
    """MLflow: ``tracking.mlflow.enabled``, ``tracking_uri``, ``experiment``, ``run_name``."""
    wandb: Annotated[WandbTracking, _subsection(WandbTracking)] = Field(default_factory=WandbTracking)
    """Weights & Biases: ``tracking.wandb.enabled``, ``project``, ``entity``, ``mode``, ``dir``."""
    tensorboard: Annotated[TensorboardTracking, _subsection(TensorboardTracking)] = Field(
        default_factory=TensorboardTracking
    )
    """TensorBoard: ``tracking.tensorboard.enabled``, ``log_dir``."""
    flush_timeout_s: Annotated[float, Bounds(ge=0, unit=" seconds")] = 30
    """At the end of the run, the longest wait for trackers still sending what the run logged
    (a slow or unreachable backend); then the run ends without them."""

    @property
    def enabled(self) -> tuple[str, ...]:
        """The names of the enabled trackers (``mlflow``, ``wandb``, ``tensorboard``)."""
        return tuple(n for n in ("mlflow", "wandb", "tensorboard") if getattr(self, n).enabled)
