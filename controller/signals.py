"""SIGTERM for the CLI commands that hold local containers (``score``, ``grade``, ``sandbox
exec``): by default SIGTERM ends a Python process without unwinding it, so the fresh grading
containers it holds would stay behind. While such a command runs, SIGTERM raises
``SystemExit(143)`` in the main thread instead, so its ``with`` blocks remove what they created,
exactly as on Ctrl-C.

Usage::

    @unwinds_on_sigterm
    def run(args): ...
"""

from __future__ import annotations

import functools
import signal
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["unwinds_on_sigterm"]

F = TypeVar("F", bound=Callable[..., Any])


def _raise(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def unwinds_on_sigterm(fn: F) -> F:
    """Run ``fn`` with SIGTERM raising ``SystemExit`` (main thread only; the previous handler
    is restored afterwards)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is not threading.main_thread():
            return fn(*args, **kwargs)
        previous = signal.signal(signal.SIGTERM, _raise)
        try:
            return fn(*args, **kwargs)
        finally:
            signal.signal(signal.SIGTERM, previous)

    return wrapper  # type: ignore[return-value]  # functools.wraps keeps fn's signature, mypy cannot see it
