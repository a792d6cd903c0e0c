"""Where the shared benchmark datasets live (tests and benchmarks read the full sets there)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["shared_datasets"]

_REPO = Path(__file__).resolve().parents[2]
# Beside the checkout in the development layout; the fixed workplace path for clones elsewhere.
_CANDIDATES = (_REPO.parent / "shared" / "datasets", Path("/work/shared/datasets"))


def shared_datasets() -> Path | None:
    """``$SKILLOPT_SHARED_DATASETS``, else the first existing candidate, else None."""
    env = os.environ.get("SKILLOPT_SHARED_DATASETS")
    if env:
        return Path(env)
    return next((p for p in _CANDIDATES if p.is_dir()), None)
