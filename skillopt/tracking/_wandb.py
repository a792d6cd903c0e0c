"""Weights & Biases (``tracking.wandb``): one W&B run per skillopt run, id kept for ``--resume``.

The config is the run's config (nested by section); tags ``env:<name>``, ``agent:<kind>``,
``gate:<mode>`` and ``simulated`` or ``real``. Per-step metrics are plotted against ``step``
(0 = the baseline), ``epoch/*`` against ``epoch``; ``gate/action`` is a text column of the
history; the run's summary holds the ``final/*`` numbers. Skill versions are versions of the
artifact ``skill-<run id>`` (alias ``step-N``), the best skill ``best-skill-<run id>``.

Without an API key the run is offline: it is written under ``<dir>/wandb/offline-run-*`` and
uploaded later with ``wandb sync`` (each resumed part is its own folder, same run id).
"""

from __future__ import annotations

import netrc
import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import urlparse

from skillopt.tracking._base import ArtifactKind, Backend, Point, RunInfo, Status

if TYPE_CHECKING:
    from skillopt.config.schema import WandbTracking

__all__ = ["WandbBackend", "wandb_mode"]

#: Prefixes of the per-step metrics (plotted against ``step``).
STEP_PREFIXES = ("score", "selection", "gate", "rollout", "edits", "skill", "tokens", "cost", "time")
#: W&B refuses tags longer than this.
_MAX_TAG = 64


def _has_key() -> bool:
    """A W&B API key is configured: ``WANDB_API_KEY``, or ``wandb login``'s netrc entry."""
    if os.environ.get("WANDB_API_KEY"):
        return True
    host = urlparse(os.environ.get("WANDB_BASE_URL") or "https://api.wandb.ai").hostname or ""
    try:
        return netrc.netrc().authenticators(host) is not None
    except (OSError, netrc.NetrcParseError):
        return False


def wandb_mode(mode: str) -> str | None:
    """``online``/``offline`` for ``wandb.init``; None when ``WANDB_MODE`` decides (``auto``)."""
    if mode != "auto":
        return mode
    if os.environ.get("WANDB_MODE"):
        return None
    return "online" if _has_key() else "offline"


class WandbBackend(Backend):
    name: ClassVar[str] = "wandb"
    title: ClassVar[str] = "W&B"

    def __init__(self, config: WandbTracking) -> None:
        self.config = config
        self.run: Any = None

    def start(self, run: RunInfo, saved: Mapping[str, Any]) -> Mapping[str, Any]:
        # W&B's own notes ("Detected [openai] in use", "Adding directory to artifact") would
        # write over the progress display; a user's own WANDB_SILENT wins.
        os.environ.setdefault("WANDB_SILENT", "true")
        import wandb

        directory = Path(self.config.dir) if self.config.dir else run.out_dir
        directory.mkdir(parents=True, exist_ok=True)
        run_id = str(saved.get("id") or secrets.token_hex(4))
        resumed = bool(saved.get("id"))
        settings = wandb.Settings(
            silent=True,
            console="off",
            x_disable_stats=True,  # no system-metrics sampler: the run's CPU is the rollouts'
            disable_git=True,
            save_code=False,
        )
        tags = [
            f"env:{run.tags['env']}",
            f"agent:{run.tags['agent']}",
            f"gate:{run.tags['gate_mode']}",
            run.tags["simulated"],
        ]
        self.run = wandb.init(
            project=self.config.project,
            entity=self.config.entity or None,
            dir=str(directory),
            mode=wandb_mode(self.config.mode),  # type: ignore[arg-type]
            id=run_id,
            resume="allow",
            name=run.name,
            job_type="train",
            config=None if resumed else dict(run.config),
            tags=[t[:_MAX_TAG] for t in tags],
            reinit="create_new",
            settings=settings,
        )
        if resumed:
            self.run.config.update(dict(run.config), allow_val_change=True)
        self.run.define_metric("step")
        self.run.define_metric("epoch")
        for prefix in STEP_PREFIXES:
            self.run.define_metric(f"{prefix}/*", step_metric="step")
        self.run.define_metric("epoch/*", step_metric="epoch")
        return {"id": run_id, "project": self.config.project, "entity": self.config.entity}

    def log(self, point: Point) -> None:
        if point.axis == "final":
            self.run.summary.update(dict(point.metrics))
            return
        axis = {"step": point.index} if point.axis == "step" else {"epoch": point.index}
        self.run.log({**point.metrics, **point.texts, **axis})

    def artifact(self, path: Path, kind: ArtifactKind, *, step: int) -> None:
        import wandb

        names = {"skill": "skill", "best_skill": "best-skill", "run_file": "run-files"}
        art = wandb.Artifact(
            f"{names[kind]}-{self.run.id}", type="run-files" if kind == "run_file" else "skill"
        )
        if path.is_dir():
            art.add_dir(str(path))
        else:
            art.add_file(str(path), name=path.name)
        self.run.log_artifact(art, aliases=[f"step-{step}"])

    def finish(self, status: Status, *, wall_time: float) -> None:
        self.run.summary["skillopt_status"] = status
        self.run.finish(exit_code=1 if status == "failed" else 0)
