"""The run directory: its layout (:mod:`.layout`), its one writer and reader
(:class:`RunDirectory`, with the stage cache and the committed state), the rollout directories
inside it (:mod:`.results`), and the typed records of its files: one schema that the trainer
writes and every reader (``controller.rundir``, the WebUI, ``skillopt runs``, ``--resume``)
reads back, never walking the JSON itself.

Each record says its version; an older one is migrated on read, a newer one is refused
(:mod:`skillopt.trainer.versions`). Every version since the first run directory reads: run
directories written by each earlier version are kept as test fixtures (``tests/fixtures/rundirs``).

=============================================  =========================  ============================
file                                           model                      version now (key): earlier
=============================================  =========================  ============================
``config.json``                                :class:`ConfigRecord`      1 (``derived.schema_version``): 0
``runtime_state.json``                         ``TrainerState``           2 (``version``): 1
``history.json``, ``steps/*/step_record.json``   ``StepRecord``             2 (``schema_version``): 0, 1
``summary.json``                               ``FitResult``              2 (``schema_version``): 0, 1
``test_eval*/summary.json``,                   :class:`EvalSummary`       1 (``schema_version``): 0
``eval_summary.json``
``results.jsonl``, ``infra_attempts.jsonl``    :class:`ResultRow`         1 (``schema_version``): 0
``eval_config.json``                           :class:`EvalConfigRecord`  1 (``schema_version``): 0
``live.json``                                  :class:`LiveRecord`        1 (``version``)
``launch.json``                                :class:`LaunchRecord`      1 (``schema_version``): 0
=============================================  =========================  ============================

``TrainerState`` is :mod:`skillopt.trainer.state`'s, ``StepRecord`` :mod:`skillopt.trainer.records`'s
and ``FitResult`` :mod:`skillopt.trainer.summary`'s (the trainer builds them as it goes). What
each version changed is written beside its version constant.
"""

from skillopt.trainer.rundir import layout
from skillopt.trainer.rundir.evalsummary import CategoryScore, EvalSummary
from skillopt.trainer.rundir.results import (
    append_row,
    load_rows,
    prediction_dir,
    read_rows,
    set_aside_infra_rows,
    target_prefix_on_disk,
    target_usage_on_disk,
)
from skillopt.trainer.rundir.rowjson import ResultRow, trace_from_json, trace_to_json
from skillopt.trainer.rundir.schema import (
    ConfigRecord,
    EvalConfigRecord,
    LaunchRecord,
    LiveRecord,
    RunFacts,
    SkillRef,
)
from skillopt.trainer.rundir.store import (
    DirStageCache,
    Failpoint,
    RunDirectory,
    RunDirectoryDamaged,
    RunDirectoryFull,
)
from skillopt.trainer.versions import RecordError

__all__ = [
    "CategoryScore",
    "ConfigRecord",
    "DirStageCache",
    "EvalConfigRecord",
    "EvalSummary",
    "Failpoint",
    "LaunchRecord",
    "LiveRecord",
    "RecordError",
    "ResultRow",
    "RunDirectory",
    "RunDirectoryDamaged",
    "RunDirectoryFull",
    "RunFacts",
    "SkillRef",
    "append_row",
    "layout",
    "load_rows",
    "prediction_dir",
    "read_rows",
    "set_aside_infra_rows",
    "target_prefix_on_disk",
    "target_usage_on_disk",
    "trace_from_json",
    "trace_to_json",
]
