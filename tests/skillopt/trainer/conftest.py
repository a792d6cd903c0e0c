"""Fixtures for the trainer tests: the real trainer, in this process, over a question-answering
env whose agent runs no code, so no sandbox is needed.

Everything is real but the sandbox host: the env's own agent and trusted grader
(:class:`skillopt.testing.inprocess.InProcessExecutor`), the scripted model server over HTTP
playing the simulated target and optimizer, the run directory on disk. A crash is a
:class:`Crash` raised just before a chosen write (a :class:`Failpoint`) or from a callback:
nothing of the crashed trainer survives but its files, as after ``kill -9``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from skillopt.config import Config, load_config
from skillopt.testing.inprocess import InProcessExecutor, simulated_trainer
from skillopt.testing.simulation import simulation_server
from skillopt.trainer import FitResult
from skillopt.trainer.callbacks import Callback
from skillopt.trainer.rundir import Failpoint, layout

#: A short run with every kind of work: 2 epochs x 2 steps (20 train items, batches of 10),
#: accepts and rejects, the slow update and meta skill, the test evaluations.
SHORT = ["train.batch_size=10", "run.simulate=on", "run.plot=false", "run.progress=false"]
ENV = "searchqa_demo"

#: Values that differ between two runs of the same decisions (time, usage of retried calls).
VOLATILE = frozenset(
    {
        "timing",
        "timings_s",
        "tokens",
        "wall_time_s",
        "total_wall_time_s",
        "time_s",
        "token_summary",
        "cost_usd",
        "usage",
        "target_usage",  # the state's snapshot at its last commit: the summary has the total
        "t",
        # Spend figures too: a call in flight at a crash is made again (the ledger counts both).
        "cacheable_prefix_share",
        "cacheable_prefix",
    }
)


class Crash(BaseException):
    """A simulated crash (a BaseException: nothing in the trainer catches it)."""


def crash_at(name: str, n: int) -> Failpoint:
    """Crash just before the ``n``-th write of a file called ``name``."""

    def boom() -> None:
        raise Crash(f"{name}:{n}")

    return Failpoint(name, n, crash=boom)


def config(*overrides: str) -> Config:
    return load_config(ENV, [*SHORT, *overrides])


@pytest.fixture(scope="session")
def sim() -> Iterator[Any]:
    with simulation_server(max_records=100) as server:
        yield server


@pytest.fixture(scope="session")
def fit(sim) -> Callable[..., tuple[FitResult, InProcessExecutor]]:
    """``fit(out, *overrides, callbacks=(), failpoint=None)``: train (or resume) in ``out``."""

    def run(
        out: Path, *overrides: str, callbacks: Sequence[Callback] = (), failpoint: Failpoint | None = None
    ) -> tuple[FitResult, InProcessExecutor]:
        trainer, executor = simulated_trainer(
            config(*overrides), out, base_url=sim.base_url, callbacks=callbacks, failpoint=failpoint
        )
        return trainer.fit(), executor

    return run


@pytest.fixture(scope="session")
def reference(tmp_path_factory, fit) -> Path:
    """An uninterrupted short run: what every interrupted and resumed run must reproduce."""
    out = tmp_path_factory.mktemp("reference") / "run"
    result, _ = fit(out)
    assert result.status == "complete"
    return out


def stable(value: Any) -> Any:
    """``value`` without the keys that differ between two runs of the same decisions."""
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


def decisions(run: Path) -> dict[str, Any]:
    """What a resumed run must reproduce: the step records, the epoch stages, the skills."""
    state = json.loads((run / layout.STATE).read_text())
    return {
        "history": stable(json.loads((run / layout.HISTORY).read_text())),
        "epoch_stages": state["epoch_stages"],
        "meta_skill": state["meta_skill"],
        "best_skill": (run / layout.BEST_SKILL).read_text(),
        "skills": {p.name: p.read_text() for p in sorted((run / layout.SKILLS).iterdir())},
    }


def files(run: Path) -> dict[str, Any]:
    """Every file of the run with its content, minus what legitimately differs (timings,
    usage; the order of lines appended by different sessions)."""
    out: dict[str, Any] = {}
    for path in sorted(p for p in run.rglob("*") if p.is_file()):
        rel = str(path.relative_to(run))
        if path.name == layout.OPTIMIZER_LEDGER:
            out[rel] = "ledger"  # a call in flight when the run crashed is made again
        elif path.suffix == ".json":
            out[rel] = stable(json.loads(path.read_text()))
        elif path.suffix == ".jsonl":
            out[rel] = sorted(
                json.dumps(stable(json.loads(x)), sort_keys=True) for x in path.read_text().splitlines()
            )
        else:
            out[rel] = path.read_text()
    return out


def target_spend(run: Path) -> dict[str, Any]:
    """The target's usage in the summary: every row's, counted once whatever the crashes.

    Without the cached-token counts: the scripted server's prompt cache lives as long as the
    test session, so they depend on which runs came before (a run alone found it cold)."""
    usage = json.loads((run / layout.SUMMARY).read_text())["token_summary"]["target"]
    cached = ("cached_input_tokens", "cache_write_input_tokens")
    return {stage: {k: v for k, v in u.items() if k not in cached} for stage, u in usage.items()}


def assert_no_duplicate_rows(run: Path) -> None:
    for path in run.rglob(layout.RESULTS):
        ids = [json.loads(line)["id"] for line in path.read_text().splitlines() if line.strip()]
        assert len(ids) == len(set(ids)), f"duplicate rows in {path}"
