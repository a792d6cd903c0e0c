"""structlog setup and the one place where secrets are redacted."""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Any, TextIO, cast

import structlog

from skillopt.durable import append_text

__all__ = ["REDACTED", "LogFile", "configure_logging", "is_secret_key", "redact", "redact_text"]

REDACTED = "***"
_SECRET_KEY = re.compile(r"(api[_-]?key|token|secret|password|authorization|credential)", re.I)
# Shapes of common provider keys, caught even in free text.
_SECRET_VALUE = re.compile(
    r"(sk-[A-Za-z0-9_\-]{16,}|sk-ant-[A-Za-z0-9_\-]{16,}|Bearer\s+[A-Za-z0-9._\-]{16,})"
)


def is_secret_key(key: str) -> bool:
    """Whether a config/log key names a secret (``*_api_key``, ``token``, ``password``...)."""
    return bool(_SECRET_KEY.search(key)) and not key.endswith(("_env", "_file", "_tokens"))


def redact_text(text: str) -> str:
    return _SECRET_VALUE.sub(REDACTED, text)


def redact(value: Any, key: str = "") -> Any:
    """Deep-copy ``value`` with every secret-looking entry masked."""
    if key and is_secret_key(key) and value not in (None, "", 0):
        return REDACTED
    if isinstance(value, Mapping):
        return {k: redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact(v) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value


def _redact_processor(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> dict[str, Any]:
    return {k: redact(v, k) for k, v in event_dict.items()}


def configure_logging(
    *, json: bool = True, level: str = "info", stream: TextIO | LogFile | None = None
) -> None:
    """Configure structlog for the process: JSON lines (services) or console (interactive)."""
    out = stream or sys.stderr
    renderer: Any = (
        structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            _redact_processor,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelNamesMapping()[level.upper()]),
        logger_factory=structlog.PrintLoggerFactory(file=cast(TextIO, out)),  # write + flush is all it uses
        cache_logger_on_first_use=False,
    )


class LogFile:
    """A log destination for :func:`configure_logging`: each line appended whole to ``path``.

    A line the disk has no room for is dropped (counted in :attr:`lost`), never half written,
    and never raised: a log call must not fail a run (or turn into a rollout's error in some
    worker thread) when the disk fills; the run's own writes say so, naming the directory.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lost = 0
        self._pending = ""

    def write(self, text: str) -> int:
        self._pending += text
        if "\n" in self._pending:
            whole, _, self._pending = self._pending.rpartition("\n")
            try:
                append_text(self.path, whole + "\n")
            except OSError:
                self.lost += whole.count("\n") + 1
        return len(text)

    def flush(self) -> None:
        """Lines are written as they end; nothing is buffered past one."""

    def close(self) -> None:
        """Nothing stays open between lines."""
