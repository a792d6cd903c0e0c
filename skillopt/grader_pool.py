"""Pre-forked worker processes for trusted grading, off the calling process's threads.

Grading parses untrusted output (an xlsx the generated code saved) with pure-Python parsers.
In the sandbox service that work ran on the rollout threads of one process: it held the GIL
for tens of milliseconds per case while the gRPC threads of every other rollout waited, and a
parser that blew up on a crafted file would have taken the service with it. A
:class:`GraderPool` runs it in worker processes instead:

* workers are started with the pool (before any work arrives) as ``python -m
  skillopt.grader_pool`` processes that import the graders once (``preload``), with a minimal
  environment: no provider key or other secret of the service reaches a process that parses
  untrusted files;
* each worker runs one call at a time, under an address-space limit (``memory_bytes``);
* a call that overruns ``timeout_s`` has its worker killed and replaced, and a worker that
  dies (a crash, the memory limit) is replaced: both raise :class:`GraderFailed`, an
  infrastructure error, never a score;
* exceptions the function raises (e.g. ``GradingDataError`` for broken gold data) come back
  as themselves.

Functions and their arguments cross a socket pair, so they must be picklable (module-level
functions, plain data). Workers exit when the pool's process goes away (their socket closes).
(Not ``multiprocessing``'s pools: a worker that times out cannot be killed alone there, one
that dies breaks the whole pool, and its spawn/forkserver children re-import the parent's
``__main__``, the whole CLI, at every start.)

Usage::

    with GraderPool(workers=2, preload=["skillopt.envs.spreadsheetbench.evaluator"]) as pool:
        verdict = pool.call(grade_case, pred_bytes, gold_bytes, "A1:B3", timeout_s=60)
"""

from __future__ import annotations

import argparse
import contextlib
import os
import queue
import resource
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, TypeVar

import structlog

from skillopt.errors import GraderFailed

__all__ = ["GraderPool", "GraderPoolStats", "default_workers"]

log = structlog.get_logger("skillopt.grader_pool")

T = TypeVar("T")

#: Default address-space cap of a worker: generous for openpyxl on a large workbook, small
#: enough that a decompression or entity bomb that slipped past the checks fails in the worker.
DEFAULT_MEMORY_BYTES = 3 * 1024**3


def default_workers() -> int:
    """A host's default number of grader workers: one per core, at most four."""
    return min(4, os.cpu_count() or 1)


@dataclass(frozen=True, slots=True)
class GraderPoolStats:
    """Counters of a pool's life (for Describe, logs and benchmarks)."""

    workers: int
    calls: int
    timeouts: int
    crashes: int
    restarts: int


def _worker_main(conn: Connection, memory_bytes: int | None, preload: Sequence[str]) -> None:
    """A worker: run ``(fn, args, kwargs)`` requests from ``conn`` until it closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when workers stop
    for name in preload:
        __import__(name)
    if memory_bytes:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    while True:
        try:
            fn, args, kwargs = conn.recv()
        except (EOFError, OSError):
            return
        except Exception as exc:  # e.g. a function this worker cannot import
            conn.send(("crash", f"the grader could not load the call: {type(exc).__name__}: {exc}"))
            continue
        try:
            reply: tuple[str, Any] = ("ok", fn(*args, **kwargs))
        except MemoryError:
            reply = ("crash", "the grader ran out of memory")
        except BaseException as exc:  # the caller gets the function's own exception
            reply = ("raise", exc)
        try:
            conn.send(reply)
        except Exception as exc:  # an unpicklable result or exception: say what it was
            conn.send(("crash", f"the grader's reply could not be sent: {type(exc).__name__}: {exc}"))


#: The only variables a worker inherits: enough to find Python and its packages.
_ENV_KEEP = ("PATH", "VIRTUAL_ENV", "LANG", "LC_ALL", "TZ", "HOME", "TMPDIR")


def _worker_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in _ENV_KEEP}
    # The worker imports functions by name: give it the caller's import path.
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))
    return env


class _Worker:
    def __init__(self, memory_bytes: int | None, preload: Sequence[str]) -> None:
        mine, theirs = socket.socketpair()
        argv = [sys.executable, "-m", "skillopt.grader_pool", "--fd", str(theirs.fileno())]
        argv += ["--preload", ",".join(preload), "--memory-bytes", str(memory_bytes or 0)]
        try:
            self.proc = subprocess.Popen(
                argv,
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                env=_worker_env(),
                start_new_session=True,  # a Ctrl-C on the terminal is the parent's to handle
            )
        finally:
            theirs.close()
        self.conn = Connection(mine.detach())

    def kill(self) -> None:
        with contextlib.suppress(Exception):
            self.proc.kill()
        with contextlib.suppress(Exception):
            self.proc.wait(5)
        with contextlib.suppress(Exception):
            self.conn.close()

    def exit_reason(self) -> str:
        try:
            code = self.proc.wait(1)
        except subprocess.TimeoutExpired:
            return "the grader worker stopped answering"
        if code < 0:
            with contextlib.suppress(ValueError):
                return f"the grader worker was killed by {signal.Signals(-code).name}"
        return f"the grader worker exited with status {code}"


class GraderPool:
    """A fixed number of worker processes running trusted grading functions.

    Args:
        workers: processes (each runs one call at a time; callers beyond that wait).
        preload: modules the fork server imports once, so workers start with them loaded.
        memory_bytes: address-space limit of each worker (``None``: no limit).
        timeout_s: default time one call may take.
    """

    def __init__(
        self,
        workers: int,
        *,
        preload: Sequence[str] = (),
        memory_bytes: int | None = DEFAULT_MEMORY_BYTES,
        timeout_s: float = 120.0,
    ) -> None:
        if workers < 1:
            raise ValueError(f"a grader pool needs at least one worker, got {workers}")
        self.workers = workers
        self.memory_bytes = memory_bytes
        self.timeout_s = timeout_s
        self.preload = tuple(preload)
        self._idle: queue.SimpleQueue[_Worker | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._all: set[_Worker] = set()
        self._closed = False
        self._calls = self._timeouts = self._crashes = self._restarts = 0
        for _ in range(workers):
            self._idle.put(self._spawn())

    def _spawn(self) -> _Worker:
        worker = _Worker(self.memory_bytes, self.preload)
        with self._lock:
            self._all.add(worker)
        return worker

    def _replace(self, worker: _Worker) -> _Worker | None:
        """A new worker in ``worker``'s place (``None`` once the pool is closed)."""
        worker.kill()
        with self._lock:
            self._all.discard(worker)
            closed = self._closed
            self._restarts += 0 if closed else 1
        return None if closed else self._spawn()

    def _retire(self, worker: _Worker) -> None:
        # The replacement is made now, by this caller, so the pool keeps its size.
        self._idle.put(self._replace(worker))

    def call(self, fn: Callable[..., T], /, *args: Any, timeout_s: float | None = None, **kwargs: Any) -> T:
        """Run ``fn(*args, **kwargs)`` in a worker and return its result.

        Raises:
            GraderFailed: the call overran ``timeout_s`` (the worker is killed), the worker
                died or ran out of memory, or the pool is closed.
            Exception: whatever ``fn`` raised, re-raised here.
        """
        limit = self.timeout_s if timeout_s is None else timeout_s
        worker = self._idle.get()
        if worker is not None and worker.proc.poll() is not None:
            # It died while idle (the OOM killer, an operator's kill): not this call's fault.
            worker = self._replace(worker)
        if worker is None or self._closed:
            self._idle.put(None)  # wake the next waiter too
            raise GraderFailed("the grader pool is closed (the host is shutting down)")
        healthy = False  # whether the worker goes back to the pool after this call
        try:
            try:
                worker.conn.send((fn, args, kwargs))
            except (EOFError, OSError) as exc:
                raise self._crashed(worker, exc) from exc
            except Exception:  # the call did not pickle: nothing was sent, the worker is fine
                healthy = True
                raise
            if not worker.conn.poll(max(0.0, limit)):
                with self._lock:
                    self._timeouts += 1
                log.warning("grader.timeout", fn=getattr(fn, "__name__", "?"), limit_s=limit)
                raise GraderFailed(f"grading took longer than {limit:g}s; its worker was killed")
            try:
                kind, value = worker.conn.recv()
            except (EOFError, OSError) as exc:
                raise self._crashed(worker, exc) from exc
            except Exception as exc:  # the reply arrived whole but does not unpickle here
                healthy = True
                raise GraderFailed(
                    f"the grader's reply could not be read: {type(exc).__name__}: {exc}"
                ) from exc
            if kind == "crash":
                with self._lock:
                    self._crashes += 1
                log.warning("grader.failed", fn=getattr(fn, "__name__", "?"), reason=str(value)[:300])
                raise GraderFailed(f"grading failed: {value}")
            healthy = True
            with self._lock:
                self._calls += 1
        finally:
            if healthy:
                self._idle.put(worker)
            else:
                self._retire(worker)
        if kind == "raise":
            raise value
        return value

    def _crashed(self, worker: _Worker, exc: BaseException) -> GraderFailed:
        with self._lock:
            self._crashes += 1
        reason = worker.exit_reason()
        log.warning("grader.worker_died", reason=reason, error=type(exc).__name__)
        return GraderFailed(f"grading failed: {reason}")

    def stats(self) -> GraderPoolStats:
        with self._lock:
            return GraderPoolStats(
                workers=self.workers,
                calls=self._calls,
                timeouts=self._timeouts,
                crashes=self._crashes,
                restarts=self._restarts,
            )

    def pids(self) -> list[int]:
        """Process ids of the live workers (for tests and diagnostics)."""
        with self._lock:
            return [w.proc.pid for w in self._all]

    def close(self) -> None:
        """Stop every worker; calls waiting for one fail with :class:`GraderFailed`."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            workers = list(self._all)
            self._all.clear()
        for w in workers:
            w.kill()
        self._idle.put(None)

    def __enter__(self) -> GraderPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"GraderPool(workers={self.workers}, pid={os.getpid()})"


def _main() -> None:
    parser = argparse.ArgumentParser(description="a GraderPool worker (started by the pool)")
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--preload", default="")
    parser.add_argument("--memory-bytes", type=int, default=0)
    args = parser.parse_args()
    conn = Connection(args.fd)
    _worker_main(conn, args.memory_bytes or None, [m for m in args.preload.split(",") if m])


if __name__ == "__main__":
    _main()
