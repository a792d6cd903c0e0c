"""The run directory: its layout (:mod:`.layout`), its one writer and reader
(:class:`RunDirectory`, with the stage cache and the committed state), and the rollout
directories inside it (:mod:`.results`, rows as JSON in :mod:`.rowjson`)."""

from skillopt.trainer.rundir import layout
from skillopt.trainer.rundir.results import (
    append_row,
    load_rows,
    prediction_dir,
    read_result_lines,
    set_aside_infra_rows,
    target_prefix_on_disk,
    target_usage_on_disk,
)
from skillopt.trainer.rundir.rowjson import row_from_json, row_to_json, trace_from_json, trace_to_json
from skillopt.trainer.rundir.store import (
    DirStageCache,
    Failpoint,
    RunDirectory,
    RunDirectoryDamaged,
    RunDirectoryFull,
)

__all__ = [
    "DirStageCache",
    "Failpoint",
    "RunDirectory",
    "RunDirectoryDamaged",
    "RunDirectoryFull",
    "append_row",
    "layout",
    "load_rows",
    "prediction_dir",
    "read_result_lines",
    "row_from_json",
    "row_to_json",
    "set_aside_infra_rows",
    "target_prefix_on_disk",
    "target_usage_on_disk",
    "trace_from_json",
    "trace_to_json",
]
