"""The sleep tests' corpus: the two CLI homes written in their real formats (fast, no Docker)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import structlog

from skillopt.sleep import HarvestConfig
from skillopt.testing.sleep_corpus import SleepCorpus, write_corpus

#: The corpus's "now": every session's time is given relative to it.
NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


@pytest.fixture
def corpus(tmp_path) -> SleepCorpus:
    return write_corpus(tmp_path / "homes", now=NOW)


@pytest.fixture
def config(corpus, tmp_path) -> HarvestConfig:
    """Both sources of the corpus, harvested into ``tmp_path/out``."""
    return HarvestConfig(
        roots={"claude-code": corpus.claude_dir / "projects", "codex": corpus.codex_dir / "sessions"},
        out=tmp_path / "out",
    )


@pytest.fixture(autouse=True)
def _logging_restored():
    """A sleep command run in process points structlog at the test's captured stderr, closed
    once the test ends: the next test in the worker that logs would fail on it."""
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)
