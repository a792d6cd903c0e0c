"""MLflow (``tracking.mlflow``): one MLflow run per skillopt run, through ``MlflowClient``
(no global active run, so several runs in one process do not mix).

The config becomes the run's parameters (``train.batch_size``...), the tags are ``env``,
``agent``, ``gate_mode``, ``simulated``, ``mode``; metrics are logged with the step (the
``epoch/*`` ones with the epoch) as MLflow's step; each step record is the artifact
``steps/step_NNNN.json``, each skill version ``skills/vNNNN/<name>/``, the best skill
``best_skill/<name>/``. With no tracking URI, the store is local: ``mlflow.db`` (SQLite) and
``mlartifacts/`` in the run directory's parent folder, so the runs kept there are compared in
one ``mlflow ui``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import urlsplit, urlunsplit

from skillopt.logs import redact_text
from skillopt.tracking._base import ArtifactKind, Backend, Point, RunInfo, Status

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

    from skillopt.config.schema import MlflowTracking

__all__ = ["MlflowBackend", "local_store", "public_uri"]

#: MLflow's HTTP client retries a failing server for minutes by default; a tracker gives up
#: sooner (a user's own setting of these variables wins).
HTTP_DEFAULTS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "20",
}
_STATUS = {"complete": "FINISHED", "stopped": "KILLED", "failed": "FAILED"}
#: MLflow's limits per ``log_batch`` call.
_MAX_PARAMS, _MAX_METRICS = 100, 1000
#: MLflow keeps parameter values up to 6000 characters.
_MAX_PARAM_CHARS = 6000


def public_uri(uri: str) -> str:
    """``uri`` without a user or password (``http://bob:pw@host`` → ``http://host``), secret-
    shaped text masked: what may be written to the run directory."""
    parts = urlsplit(uri)
    if parts.username or parts.password:
        host = parts.hostname or ""
        netloc = f"[{host}]" if ":" in host else host
        netloc += f":{parts.port}" if parts.port else ""
        uri = urlunsplit(parts._replace(netloc=netloc))
    return redact_text(uri)


def local_store(out_dir: Path) -> tuple[str, str]:
    """The local store beside ``out_dir``: (tracking URI, artifact location)."""
    parent = out_dir.resolve().parent
    return f"sqlite:///{parent / 'mlflow.db'}", (parent / "mlartifacts").as_uri()


class MlflowBackend(Backend):
    name: ClassVar[str] = "mlflow"
    title: ClassVar[str] = "MLflow"

    def __init__(self, config: MlflowTracking) -> None:
        self.config = config
        self.client: MlflowClient | None = None
        self.run_id = ""

    def _store(self, out_dir: Path) -> tuple[str, str | None]:
        uri = self.config.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI", "")
        return (uri, None) if uri else local_store(out_dir)

    def start(self, run: RunInfo, saved: Mapping[str, Any]) -> Mapping[str, Any]:
        for name, value in HTTP_DEFAULTS.items():
            os.environ.setdefault(name, value)
        for name in ("mlflow.store.db.utils", "alembic.runtime.migration"):
            logging.getLogger(name).setLevel(logging.WARNING)  # "Creating initial MLflow database tables..."
        from mlflow.exceptions import MlflowException
        from mlflow.tracking import MlflowClient

        uri, artifact_location = self._store(run.out_dir)
        client = MlflowClient(tracking_uri=uri)
        run_id = ""
        if saved.get("run_id") and saved.get("tracking_uri") == public_uri(uri):
            try:
                existing = client.get_run(str(saved["run_id"]))
            except MlflowException as exc:
                if exc.error_code != "RESOURCE_DOES_NOT_EXIST":
                    raise
            else:
                run_id = existing.info.run_id
                client.update_run(run_id, status="RUNNING")
                have = existing.data.params
                self._params(client, run_id, {k: v for k, v in run.params.items() if k not in have})
        if not run_id:
            experiment = client.get_experiment_by_name(self.config.experiment)
            experiment_id = (
                experiment.experiment_id
                if experiment is not None
                else client.create_experiment(self.config.experiment, artifact_location=artifact_location)
            )
            created = client.create_run(
                experiment_id,
                start_time=int(run.wall_time * 1000),
                run_name=self.config.run_name or run.name,
                tags={**run.tags, "skillopt.run_dir": str(run.out_dir.resolve())},
            )
            run_id = created.info.run_id
            self._params(client, run_id, run.params)
        self.client, self.run_id = client, run_id
        return {"run_id": run_id, "tracking_uri": public_uri(uri), "experiment": self.config.experiment}

    def _params(self, client: MlflowClient, run_id: str, params: Mapping[str, str]) -> None:
        from mlflow.entities import Param

        items = [Param(k, v[:_MAX_PARAM_CHARS]) for k, v in params.items()]
        for chunk in _chunks(items, _MAX_PARAMS):
            client.log_batch(run_id, params=chunk)

    def log(self, point: Point) -> None:
        from mlflow.entities import Metric

        assert self.client is not None
        at = int(point.wall_time * 1000)
        metrics = [Metric(k, v, at, point.index) for k, v in point.metrics.items()]
        for chunk in _chunks(metrics, _MAX_METRICS):
            self.client.log_batch(self.run_id, metrics=chunk)
        if point.record is not None:
            self.client.log_dict(self.run_id, dict(point.record), f"steps/step_{point.index:04d}.json")

    def artifact(self, path: Path, kind: ArtifactKind, *, step: int) -> None:
        assert self.client is not None
        if kind == "skill":
            dest: str | None = f"skills/v{step:04d}"
        elif kind == "best_skill":
            dest = "best_skill"
        else:
            dest = None
        if path.is_dir():
            self.client.log_artifacts(self.run_id, str(path), dest)
        else:
            self.client.log_artifact(self.run_id, str(path), dest)

    def finish(self, status: Status, *, wall_time: float) -> None:
        assert self.client is not None
        self.client.set_terminated(self.run_id, status=_STATUS[status], end_time=int(wall_time * 1000))


def _chunks(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]
