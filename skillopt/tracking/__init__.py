"""Experiment trackers: a run also logged to MLflow, Weights & Biases and TensorBoard (any of
them, by config: ``tracking.mlflow.enabled``, ``tracking.wandb.enabled``,
``tracking.tensorboard.enabled``; docs/observability.md).

Each tracker is a trainer callback (:class:`TrackerCallback`) driving one library's adapter
(:class:`Backend`) on a thread of its own; the libraries are optional extras
(``pip install 'skillopt[tracking]'``), imported only by an enabled tracker, on that thread.
A tracker that fails says so once and the run goes on; ``--resume`` continues the same
tracker run (its id is kept in the run directory's ``tracking.json``).

Usage::

    trainer = Trainer(config, ..., callbacks=[*callbacks, *tracking_callbacks(config)])
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

from skillopt.errors import ConfigError
from skillopt.tracking._base import Backend, Point, RunInfo, TrackerCallback, load_state

if TYPE_CHECKING:
    from skillopt.config import Config

__all__ = ["LIBRARIES", "Backend", "Point", "RunInfo", "TrackerCallback", "load_state", "tracking_callbacks"]

#: Tracker name → the module its library installs (what ``pip install 'skillopt[<name>]'`` adds).
LIBRARIES = {"mlflow": "mlflow", "wandb": "wandb", "tensorboard": "tensorboard"}


def _backend(config: Config, name: str) -> Backend:
    if name == "mlflow":
        from skillopt.tracking._mlflow import MlflowBackend

        return MlflowBackend(config.tracking.mlflow)
    if name == "wandb":
        from skillopt.tracking._wandb import WandbBackend

        return WandbBackend(config.tracking.wandb)
    from skillopt.tracking._tensorboard import TensorboardBackend

    return TensorboardBackend(config.tracking.tensorboard)


def _installed(module: str) -> bool:
    """``module`` can be imported (found without importing it; a module blocked by a ``None``
    in ``sys.modules`` is not)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def tracking_callbacks(config: Config) -> list[TrackerCallback]:
    """One callback per tracker ``config.tracking`` enables (none by default). Nothing is
    imported or contacted here: that happens on each tracker's thread when the fit starts.

    Raises:
        ConfigError: an enabled tracker's library is not installed (said before the run spends
            anything, with the extra to install).
    """
    out = []
    for name in config.tracking.enabled:
        if not _installed(LIBRARIES[name]):
            raise ConfigError(
                f"tracking.{name}.enabled is true, but {LIBRARIES[name]} is not installed: "
                f"pip install 'skillopt[{name}]' (or run without it: --set tracking.{name}.enabled=false)"
            )
        out.append(TrackerCallback(_backend(config, name), flush_timeout_s=config.tracking.flush_timeout_s))
    return out
