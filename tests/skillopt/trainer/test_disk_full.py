"""The controller's disk fills mid-run: the run stops with a message naming its directory,
nothing it wrote is torn, and ``--resume`` once space is back reaches the decisions of a run
that never stopped.

The run directory is on a small tmpfs mounted by the test (never the machine's own disk; the
sandbox host's state dir has the same test in ``tests/sandbox/test_host_faults.py``). A
callback fills it at a chosen point of the run (a row of a step's batch, a step's end, an
epoch's end): whatever write comes next meets ENOSPC. The same short simulated run as the
resume-parity tests, rolled out in this process (no sandbox).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from skillopt.errors import SkillOptError
from skillopt.trainer.callbacks import Callback, EpochEndEvent, RowEvent, StepEndEvent
from skillopt.trainer.rundir import RunDirectoryFull
from tests.e2e.remote import remote_service
from tests.skillopt.trainer.conftest import assert_no_duplicate_rows, decisions, files, target_spend

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs (root only)")

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def disk(tmp_path) -> Iterator[Path]:
    """A 32 MiB tmpfs (a short run writes ~2 MiB), unmounted afterwards."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32m,nr_inodes=8192", "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def fill(disk: Path) -> Path:
    """Write ``disk/filler`` until the filesystem refuses one more byte."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as fh:
        for chunk in (1 << 20, 1 << 12, 1):
            try:
                while True:
                    fh.write(b"\0" * chunk)
            except OSError:
                pass
    return filler


class FillDisk(Callback):
    """Fills ``disk`` once, at the ``n``-th event of kind ``at`` (``row``, ``step``, ``epoch``)."""

    def __init__(self, disk: Path, at: str, n: int) -> None:
        self.disk, self.at, self.n, self.seen = disk, at, n, 0

    def _tick(self, kind: str) -> None:
        if kind == self.at:
            self.seen += 1
            if self.seen == self.n:
                fill(self.disk)

    def on_rollout_result(self, event: RowEvent) -> None:
        self._tick("row")

    def on_step_end(self, event: StepEndEvent) -> None:
        self._tick("step")

    def on_epoch_end(self, event: EpochEndEvent) -> None:
        self._tick("epoch")


def assert_nothing_torn(run: Path) -> None:
    """Every JSON file of the run parses, and every line of every JSON-lines file; no temp file
    of an interrupted atomic write is left."""
    for path in run.rglob("*"):
        assert not path.name.endswith(".tmp"), path
        if path.suffix in (".json", ".jsonl"):
            text = path.read_text(encoding="utf-8")
            try:
                for line in text.splitlines() if path.suffix == ".jsonl" else [text]:
                    json.loads(line)
            except ValueError as exc:
                raise AssertionError(f"{path} is torn: {exc}") from exc


# Where the disk fills: mid-batch of step 2 (20 baseline rows, then 10 per step), at the end of
# step 3 (mid epoch 2), and at the end of epoch 1 (the slow update and meta skill are next).
POINTS = [("row", 35), ("step", 3), ("epoch", 1)]


@pytest.mark.parametrize(("at", "n"), POINTS)
def test_a_full_disk_stops_the_run_cleanly_and_resume_reaches_the_same_decisions(reference, fit, disk, at, n):
    out = disk / "run"
    with pytest.raises(RunDirectoryFull) as raised:
        fit(out, callbacks=[FillDisk(disk, at, n)])
    message = raised.value.message
    assert str(out) in message and "no space left" in message, message
    assert_nothing_torn(out)
    (disk / "filler").unlink()
    result, _ = fit(out)
    assert result.status == "complete"
    assert decisions(out) == decisions(reference)
    assert files(out) == files(reference)
    assert target_spend(out) == target_spend(reference)
    assert_no_duplicate_rows(out)


def test_skillopt_train_on_a_full_disk_says_so_without_a_traceback(disk):
    """Through the CLI: a run dir on a full filesystem is refused before anything starts (no
    sandbox is started), with its directory named, exit status 1, no traceback."""
    fill(disk)
    out = disk / "run"
    res = subprocess.run(
        [sys.executable, "-m", "controller.cli", "train", "--config", "searchqa_demo", "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert res.returncode == 1, res.stderr[-3000:]
    assert "Traceback" not in res.stderr, res.stderr[-3000:]
    assert f"no space left on the filesystem of the run directory {out}" in res.stderr, res.stderr[-3000:]
    assert issubclass(RunDirectoryFull, SkillOptError)


def _eval(out: Path, remote: list[str]) -> subprocess.Popen:
    skill = REPO / "skillopt" / "envs" / "searchqa" / "skills" / "initial.md"
    return subprocess.Popen(
        [sys.executable, "-m", "controller.cli", "eval", "--config", "searchqa_demo", "--skill", str(skill),
         "--split", "all", "--out", str(out), *remote],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip


def _assert_says_full(res: subprocess.Popen, out: Path) -> None:
    _, stderr = res.communicate(timeout=180)
    assert res.returncode == 1, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    assert f"no space left on the filesystem of the run directory {out}" in stderr, stderr[-3000:]
    assert f"continue with: skillopt eval --resume {out}" in stderr
    assert not (out / "eval_summary.json").exists()


def test_skillopt_eval_on_a_full_disk_stops_with_its_directory_named_and_resumes(disk):
    """``skillopt eval`` like ``train``: a full output filesystem, before it starts or once rows
    arrive, stops it with its directory named (exit 1, no traceback, nothing torn); once there
    is space, ``--resume`` finishes it with every item once. (One sandbox host for the three
    evals: an embedded one would start with each.)"""
    out = disk / "eval"
    with remote_service("evaldisk", pool_size=0) as remote:
        fill(disk)
        _assert_says_full(_eval(out, remote), out)
        assert_nothing_torn(disk)
        (disk / "filler").unlink()
        # Mid-eval: the disk fills once the first rows are on it (polled); the next write meets it.
        res = _eval(out, remote)
        results = out / "eval_all" / "results.jsonl"
        deadline = time.monotonic() + 120
        while res.poll() is None and time.monotonic() < deadline:
            if results.exists() and results.stat().st_size:
                fill(disk)
                break
            time.sleep(0.005)
        _assert_says_full(res, out)
        assert_nothing_torn(out)
        kept = len(results.read_text().splitlines())
        assert 0 < kept < 50, kept
        (disk / "filler").unlink()
        done = subprocess.run(
            [sys.executable, "-m", "controller.cli", "eval", "--resume", str(out), *remote],
            cwd=REPO, capture_output=True, text=True, timeout=180, env={**os.environ, "PYTHONPATH": str(REPO)},
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "eval_summary.json").read_text())
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert summary["n_items"] == 50 and len({r["id"] for r in rows}) == len(rows) == 50
