"""TensorBoard (``tracking.tensorboard``): event files written with TensorBoard's own writer (no
TensorFlow needed), under ``<run dir>/tensorboard`` by default.

Scalars: the per-step metrics at the step (0 = the baseline), ``epoch/*`` at the epoch,
``final/*`` at the last step. Texts (the Text tab): ``run/config`` and ``run/tags`` at step
0, ``gate/action`` and ``gate/reason`` per step, each skill version's ``SKILL.md`` as ``skill``
at its step and the best one as ``best_skill``. A resumed run adds an event file to the same
folder; TensorBoard reads them as one run.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from skillopt.tracking._base import ArtifactKind, Backend, Point, RunInfo, Status

if TYPE_CHECKING:
    from skillopt.config.schema import TensorboardTracking

__all__ = ["TensorboardBackend", "log_dir"]


def log_dir(config: TensorboardTracking, out_dir: Path) -> Path:
    """Where the event files go."""
    return Path(config.log_dir) if config.log_dir else out_dir / "tensorboard"


class TensorboardBackend(Backend):
    name: ClassVar[str] = "tensorboard"
    title: ClassVar[str] = "TensorBoard"

    def __init__(self, config: TensorboardTracking) -> None:
        self.config = config
        self.writer: Any = None

    def start(self, run: RunInfo, saved: Mapping[str, Any]) -> Mapping[str, Any]:
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        directory = log_dir(self.config, run.out_dir)
        directory.mkdir(parents=True, exist_ok=True)
        self.writer = EventFileWriter(str(directory))
        if not saved:
            config = json.dumps(dict(run.config), indent=2, ensure_ascii=False)
            self._text("run/config", "```json\n" + config + "\n```", 0, run.wall_time)
            self._text(
                "run/tags", "\n".join(f"- **{k}**: {v}" for k, v in run.tags.items()), 0, run.wall_time
            )
        return {"log_dir": str(directory)}

    def _scalars(self, metrics: Mapping[str, float], step: int, wall_time: float) -> None:
        from tensorboard.compat.proto import event_pb2, summary_pb2

        values = [summary_pb2.Summary.Value(tag=k, simple_value=v) for k, v in metrics.items()]
        self.writer.add_event(
            event_pb2.Event(wall_time=wall_time, step=step, summary=summary_pb2.Summary(value=values))
        )

    def _text(self, tag: str, text: str, step: int, wall_time: float | None = None) -> None:
        from tensorboard.compat.proto import event_pb2, summary_pb2
        from tensorboard.plugins.text import metadata
        from tensorboard.util import tensor_util

        value = summary_pb2.Summary.Value(
            tag=tag,
            metadata=metadata.create_summary_metadata(display_name=tag, description=""),
            tensor=tensor_util.make_tensor_proto(text),
        )
        self.writer.add_event(
            event_pb2.Event(
                wall_time=wall_time or time.time(), step=step, summary=summary_pb2.Summary(value=[value])
            )
        )

    def log(self, point: Point) -> None:
        if point.metrics:
            self._scalars(point.metrics, point.index, point.wall_time)
        for tag, text in point.texts.items():
            self._text(tag, text, point.index, point.wall_time)
        self.writer.flush()

    def artifact(self, path: Path, kind: ArtifactKind, *, step: int) -> None:
        if kind == "run_file":
            return  # the numbers are logged as scalars; TensorBoard keeps no files
        skill = path if path.is_file() else next(iter(sorted(path.rglob("SKILL.md"))), None)
        if skill is None:
            return
        self._text("skill" if kind == "skill" else "best_skill", skill.read_text(encoding="utf-8"), step)
        self.writer.flush()

    def finish(self, status: Status, *, wall_time: float) -> None:
        self._text("run/status", status, 0, wall_time)
        self.writer.close()
