"""Typed records of the run directory's files that had none before: ``config.json``,
``live.json``, ``launch.json`` and ``eval_config.json``, and the reading every record shares
(:func:`parse`, :func:`read_record`). The table of every file, its model and its versions is
in :mod:`skillopt.trainer.rundir`.

The writers build these models and write :meth:`Record.to_json`; every reader gets them back
with ``Model.from_json`` (any version, migrated) and reads fields, never keys::

    config = read_record(run / layout.CONFIG, ConfigRecord.from_json)  # None: no such file
    config.config.env.name, config.derived.total_steps
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, ValidationError

from skillopt.config import Config, config_from_dict
from skillopt.errors import ConfigError
from skillopt.trainer.state import RunMode
from skillopt.trainer.versions import RecordError, json_type, record_version, upgrade

__all__ = [
    "CONFIG_VERSION",
    "EVAL_CONFIG_VERSION",
    "LAUNCH_VERSION",
    "LIVE_VERSION",
    "ConfigRecord",
    "EvalConfigRecord",
    "LaunchRecord",
    "LiveBatch",
    "LiveGate",
    "LiveHost",
    "LiveRecord",
    "LiveStage",
    "Record",
    "RunFacts",
    "SkillRef",
    "parse",
    "read_json",
    "read_record",
]

T = TypeVar("T")

#: ``config.json`` (``derived.schema_version``). 1: versioned; 0 (no version) has the same
#: keys, and runs from before the mode was recorded say only ``derived.simulated``.
CONFIG_VERSION = 1
#: ``live.json`` (``version``): 1 since it was written.
LIVE_VERSION = 1
#: ``launch.json``. 1: versioned; 0 has the same keys.
LAUNCH_VERSION = 1
#: ``eval_config.json``. 1: versioned; 0 has the same keys.
EVAL_CONFIG_VERSION = 1


def read_json(path: Path) -> Any | None:
    """The JSON in ``path``; ``None`` when there is no such file.

    Raises:
        RecordError: the file is there but unreadable, not UTF-8 or not JSON (the message
            names the problem; :mod:`controller.rundir.damage` shows it as it is).
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise RecordError(f"cannot be read ({exc.strerror or exc})") from None
    if not raw.strip():
        raise RecordError(f"is empty ({len(raw)} bytes)")
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise RecordError("is not UTF-8 text") from None
    except (json.JSONDecodeError, RecursionError) as exc:
        # Every file a run writes is one object or array: one that does not end like one was
        # cut off (a full disk, a crash mid-write outside the atomic writes).
        cut = "; cut off: it ends mid-value" if not raw.rstrip().endswith((b"}", b"]")) else ""
        where = (
            f"{exc.msg}, byte {exc.pos} of {len(raw)}"
            if isinstance(exc, json.JSONDecodeError)
            else "too deep"
        )
        raise RecordError(f"is not valid JSON ({where}{cut})") from None


def parse(data: Any, parser: Callable[[Any], T], *, what: str) -> T:
    """``parser(data)``, its failures as one :class:`RecordError` naming ``what`` was expected.

    Raises:
        RecordError: ``data`` is not that record (a missing or mistyped field, a newer version).
    """
    try:
        return parser(data)
    except RecordError:
        raise
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the record"
        raise RecordError(f"is not {what} ({where}: {first['msg']})") from None
    except KeyError as exc:
        raise RecordError(f"is not {what} (no {exc.args[0]!r})") from None
    except (TypeError, ValueError, AttributeError) as exc:
        raise RecordError(f"is not {what} ({exc})") from None


def read_record(path: Path, parser: Callable[[Any], T], *, what: str = "", frozen: bool = False) -> T | None:
    """The record in ``path`` parsed by ``parser``; ``None`` when there is no such file.

    Args:
        frozen: the parsed record is immutable (a frozen model, or a tuple of them), so one
            parse is kept per version of the file (its inode, size and time: every write
            replaces the file whole) and handed to every reader. The runs list reads every
            run's records at each push; a finished run's are parsed once.

    Raises:
        RecordError: the file is unreadable or not that record.
    """
    what = what or f"a {path.name} record"
    if not frozen:
        data = read_json(path)
        return None if data is None else parse(data, parser, what=what)
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise RecordError(f"cannot be read ({exc.strerror or exc})") from None
    key = (str(path), st.st_ino, st.st_mtime_ns, st.st_size, what)
    found = _PARSED.get(key)
    if found is None:
        data = read_json(path)
        if data is None:  # removed since
            return None
        found = _PARSED[key] = parse(data, parser, what=what)
        while len(_PARSED) > _PARSED_MAX:
            del _PARSED[next(iter(_PARSED))]
    return found


#: Parsed immutable records by the file version they came from (:func:`read_record`); the
#: oldest go first (a dict keeps insertion order). Shared by the threads of a reader: a race
#: only parses a file twice.
_PARSED: dict[tuple[str, int, int, int, str], Any] = {}
_PARSED_MAX = 4096


# -- pydantic records ---------------------------------------------------------------------------


class Record(BaseModel):
    """Base of the run directory's pydantic records: frozen; keys this version does not know
    (a newer writer's additions) are ignored; JSON in field order."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    def to_json(self) -> dict[str, Any]:
        """The record's JSON form, as written."""
        return self.model_dump(mode="json", by_alias=True)


def _mode(value: Any) -> RunMode | None:
    if value is None or isinstance(value, RunMode):
        return value
    if not isinstance(value, Mapping):
        raise ValueError(f"a run mode is a JSON object, got {type(value).__name__}")
    return RunMode.from_dict(dict(value))


def _mode_json(mode: RunMode | None) -> dict[str, Any] | None:
    return None if mode is None else mode.to_dict()


#: A :class:`RunMode` in its JSON form (``{"simulated", "reason"[, "noisy"]}``).
ModeField = Annotated[RunMode | None, BeforeValidator(_mode), PlainSerializer(_mode_json)]


class RunFacts(Record):
    """``config.json``'s ``derived``: what the run worked out from its config (not config
    keys: never accepted from a user's file)."""

    train_size: int = 0
    selection_size: int = 0
    steps_per_epoch: int = 0
    total_steps: int = 0
    lr_control_mode: str = ""
    simulated: bool = False
    mode: ModeField = None
    #: Where the data came from and the split sizes (``EnvData.describe()``).
    data: dict[str, Any] = Field(default_factory=dict)
    schema_version: int = CONFIG_VERSION


def _mode_from_simulated(derived: dict[str, Any]) -> dict[str, Any]:
    """Config version 0 of runs from before the mode was recorded: ``simulated`` only."""
    if derived.get("mode") is None and "simulated" in derived:
        derived["mode"] = {"simulated": bool(derived["simulated"]), "reason": ""}
    return derived


@dataclass(frozen=True, kw_only=True)
class ConfigRecord:
    """``config.json``: the effective config (redacted) and :class:`RunFacts` as ``derived``.

    ``config`` is built (types, bounds, the rules between fields) but not resolved: the env
    registry and the paths it names are this machine's, so a reader of a run made elsewhere
    still reads it; ``skillopt train --resume`` resolves it (:func:`controller.rundir.runconfig.run_config`).
    """

    config: Config
    derived: RunFacts

    def to_json(self) -> dict[str, Any]:
        return {**self.config.to_dict(redacted=True), "derived": self.derived.to_json()}

    @classmethod
    def from_json(cls, data: Any) -> ConfigRecord:
        """Parse ``config.json`` of any version.

        Raises:
            RecordError: not a config this skillopt reads (the config system's message).
        """
        if not isinstance(data, Mapping):
            raise RecordError(f"holds a JSON {json_type(data)}, not a JSON dict")
        raw = data.get("derived")
        derived = upgrade(
            raw if raw is not None else {},
            key="schema_version",
            current=CONFIG_VERSION,
            steps={0: _mode_from_simulated},
        )
        sections = {k: v for k, v in data.items() if k != "derived"}
        try:
            config = config_from_dict(sections, source="config.json", resolve=False)
        except ConfigError as exc:
            raise RecordError(f"is not a config this skillopt reads: {exc.message}") from None
        return cls(
            config=config, derived=parse(derived, RunFacts.model_validate, what="the run's derived facts")
        )


# -- launch.json ----------------------------------------------------------------------------------


class LaunchRecord(Record):
    """``launch.json``: the last process the WebUI started in this directory."""

    by: str = "webui"
    kind: str = "train"  # train | eval
    env: str = ""
    #: The command line after the interpreter (``controller.cli train --resume ...``).
    argv: tuple[str, ...] = ()
    pid: int = 0
    launched_at: float = 0.0
    #: When the WebUI first started a process here (kept over resumes).
    first_launched_at: float = 0.0
    schema_version: int = LAUNCH_VERSION

    @classmethod
    def from_json(cls, data: Any) -> LaunchRecord:
        """Raises: RecordError: not a launch record (or a newer one)."""
        data = upgrade(data, key="schema_version", current=LAUNCH_VERSION)
        return parse(data, cls.model_validate, what="a launch record")


# -- eval_config.json -----------------------------------------------------------------------------


class SkillRef(Record):
    """A skill an eval runs: where it was and the hash of its files then."""

    path: str
    tree_sha256: str = ""


@dataclass(frozen=True, kw_only=True)
class EvalConfigRecord:
    """``eval_config.json``: what ``skillopt eval`` runs, so that ``--resume`` continues it."""

    config: Config
    split: str
    skill: SkillRef
    against: SkillRef | None
    mode: RunMode | None
    #: The training run whose config it evaluates with (``--run``), ``""`` for ``--config``.
    run: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "config": self.config.to_dict(redacted=True),
            "split": self.split,
            "skill": self.skill.to_json(),
            "against": self.against.to_json() if self.against is not None else None,
            "mode": self.mode.to_dict() if self.mode is not None else None,
            "run": self.run,
            "schema_version": EVAL_CONFIG_VERSION,
        }

    @classmethod
    def from_json(cls, data: Any) -> EvalConfigRecord:
        """Parse ``eval_config.json`` of any version.

        Raises:
            RecordError: not an eval's record (no config or skill, or a config this skillopt
                does not read).
        """
        data = upgrade(data, key="schema_version", current=EVAL_CONFIG_VERSION)
        if not isinstance(data.get("config"), Mapping):
            raise RecordError("is not an eval's record (no config)")
        try:
            config = config_from_dict(data["config"], source="eval_config.json", resolve=False)
        except ConfigError as exc:
            raise RecordError(f"holds a config this skillopt does not read: {exc.message}") from None
        against = data.get("against")
        return cls(
            config=config,
            split=str(data.get("split") or "test"),
            skill=parse(data.get("skill"), SkillRef.model_validate, what="an eval's record (skill)"),
            against=None
            if against is None
            else parse(against, SkillRef.model_validate, what="an eval's record (against)"),
            mode=parse(data.get("mode"), _mode, what="an eval's record (mode)"),
            run=str(data.get("run") or ""),
        )


# -- live.json ------------------------------------------------------------------------------------


class LiveStage(Record):
    """A stage of the current step (or epoch end) that ended, and its wall time."""

    name: str
    seconds: float = 0.0


class LiveBatch(Record):
    """The batch of rollouts in progress: its rows done, passed, failed, lost to infrastructure."""

    label: str
    total: int = 0
    done: int = 0
    #: Rows that were on disk already when the batch started (a resumed batch).
    resumed: int = 0
    #: Stored as ``pass`` (a Python keyword).
    passed: int = Field(default=0, validation_alias="pass", serialization_alias="pass")
    fail: int = 0
    infra: int = 0


class LiveGate(Record):
    """The gate's last decision."""

    step: int
    origin: str = ""
    action: str = ""
    candidate_score: float | None = None
    current_score: float | None = None
    best_score: float | None = None
    reason: str = ""


class LiveHost(Record):
    """A sandbox host of the running session and its rollouts in flight."""

    address: str = ""
    host: str = ""
    health: str = ""
    capacity: int = 0
    in_flight: int = 0


class LiveRecord(Record):
    """``live.json``: where a running session stands (``controller.rundir.live.LiveStatus``
    writes it, throttled; only meaningful while the run's lock is held)."""

    version: int = LIVE_VERSION
    pid: int = 0
    session_started_at: float = 0.0
    #: starting, baseline, training, epoch_end, test, done, stopped, failed.
    phase: str = "starting"
    epoch: int = 0
    num_epochs: int = 0
    step: int = 0
    total_steps: int = 0
    stage: str = ""
    stage_started_at: float | None = None
    stages: tuple[LiveStage, ...] = ()
    batch: LiveBatch | None = None
    last_gate: LiveGate | None = None
    baseline_score: float | None = None
    #: Why the session is failing (phase ``failed``), secrets masked.
    error: str = ""
    resume_from: int = 0
    simulated: bool | None = None
    #: ``RunMode.describe()`` of the session.
    mode: str = ""
    last_completed_step: int = 0
    #: The fit's status when it ended (complete, stopped).
    status: str = ""
    hosts: tuple[LiveHost, ...] = ()
    #: Rollouts in flight over every host.
    running: int = 0
    #: Tokens and cost so far (None until the fit started).
    tokens: int | None = None
    cost_usd: float | None = None
    updated_at: float | None = None

    @classmethod
    def from_json(cls, data: Any) -> LiveRecord:
        """Raises: RecordError: not a live record (or a newer one)."""
        if isinstance(data, Mapping):
            record_version(data, key="version", current=LIVE_VERSION)
        return parse(data, cls.model_validate, what="a live status")
