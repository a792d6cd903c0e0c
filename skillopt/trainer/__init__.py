"""The trainer: epochs of steps over segments, a run directory it alone writes, typed
records, and callbacks that see events (see :mod:`skillopt.trainer.loop`)."""

from skillopt.trainer.callbacks import Callback, RunControl
from skillopt.trainer.records import StepRecord
from skillopt.trainer.state import RunMode
from skillopt.trainer.summary import EpochRecord, FitResult
from skillopt.trainer.trainer import Trainer

__all__ = ["Callback", "EpochRecord", "FitResult", "RunControl", "RunMode", "StepRecord", "Trainer"]
