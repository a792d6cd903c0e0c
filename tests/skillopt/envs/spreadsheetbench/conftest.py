"""Fixtures for the SpreadsheetBench grader tests: real xlsx files built with openpyxl, and the
shared full dataset (which exists on CI too, beside the repository)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sb_xlsx import Sheets, build_xlsx

from skillopt.testing.shared_data import shared_datasets

SHARED_ENV_VAR = "SKILLOPT_SPREADSHEETBENCH_SHARED_ROOT"


@pytest.fixture
def make_xlsx(tmp_path: Path) -> Callable[..., Path]:
    """Write :func:`build_xlsx` output to a file in ``tmp_path`` and return its path."""
    counter = iter(range(10_000))

    def make(sheets: Sheets, *, name: str | None = None, **kwargs: Any) -> Path:
        path = tmp_path / (name or f"wb{next(counter)}.xlsx")
        path.write_bytes(build_xlsx(sheets, **kwargs))
        return path

    return make


@pytest.fixture(scope="session")
def shared_root() -> Path:
    """The full shared SpreadsheetBench folder; missing is an error, not a skip, because CI has it."""
    shared = shared_datasets()
    default = shared / "spreadsheetbench" if shared else Path("../shared/datasets/spreadsheetbench")
    root = Path(os.environ.get(SHARED_ENV_VAR) or default).resolve()
    if not (root / "dataset.json").is_file():
        pytest.fail(
            f"shared SpreadsheetBench data not found at {root}; set {SHARED_ENV_VAR} (or "
            "SKILLOPT_SHARED_DATASETS) to the folder holding it (../shared/datasets beside the repo)"
        )
    return root
