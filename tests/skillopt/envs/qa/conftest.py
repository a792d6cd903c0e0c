"""Real items of the shared datasets, looked up by id (or position for id-less files)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from skillopt.testing.shared_data import shared_datasets


@cache
def shared_file(env: str, name: str) -> list[dict[str, Any]]:
    root = shared_datasets()
    if root is None:
        pytest.fail("the shared datasets are missing: set SKILLOPT_SHARED_DATASETS", pytrace=False)
    path = Path(root) / env / name
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return json.loads(path.read_text(encoding="utf-8"))


def by_id(
    env: str, names: tuple[str, ...], prefix: str, key: str = "id", *, exact: bool = False
) -> dict[str, Any]:
    """The one raw item whose id starts with ``prefix`` (is ``prefix`` when ``exact``)."""
    hits = [
        x
        for name in names
        for x in shared_file(env, name)
        if (str(x[key]) == prefix if exact else str(x[key]).startswith(prefix))
    ]
    assert len(hits) == 1, (env, prefix, len(hits))
    return hits[0]
