"""Mathematical equivalence of two answers with math-verify, isolated in a worker process.

math-verify (Hugging Face, built on sympy) decides equivalence of fractions, radicals,
intervals, sets, tuples, matrices, percentages, ``\\left``/``\\right``, spacing and ``\\text{}``
units. Its timeouts use ``signal.alarm``, which only works in a process's main thread, and
sympy can take unbounded time on adversarial input (``\\boxed{10^{10^{10^{10}}}}`` never
returns). The sandbox service grades in worker threads and the answer is untrusted model
output, so every check runs in a long-lived worker process
(``python -m skillopt.envs.math500._verify_worker``) that applies math-verify's own timeouts
in its main thread, and is killed and restarted by the caller when a check overruns
``timeout_s`` anyway.

Usage::

    equivalent("\\frac{1}{2}", "0.5")            # True
    equivalent("[2,5)", "[2, 5)")                # True
    equivalent("10^{10^{10^{10}}}", "1", timeout_s=2)   # None: the check timed out
"""

from __future__ import annotations

import atexit
import json
import os
import selectors
import subprocess
import sys
import threading
import time

import structlog

__all__ = ["equivalent", "shutdown"]

log = structlog.get_logger("skillopt.envs.math500")

_lock = threading.Lock()
_proc: subprocess.Popen[str] | None = None
#: Cap on the answer text sent to the checker (a longer "answer" is not one).
MAX_ANSWER_CHARS = 2000


def _start() -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "skillopt.envs.math500._verify_worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        bufsize=1,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def shutdown() -> None:
    """Stop the worker process (it also exits by itself when this process goes away)."""
    global _proc
    with _lock:
        if _proc is not None:
            _proc.kill()
            _proc.wait()
            _proc = None


atexit.register(shutdown)


def _read_line(proc: subprocess.Popen[str], deadline: float) -> str | None:
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(timeout=left):
                return None
            line = proc.stdout.readline()
            return line or None  # "" = the worker died


def equivalent(gold: str, answer: str, *, timeout_s: float = 10.0) -> bool | None:
    """Whether ``answer`` is mathematically equivalent to ``gold`` (both LaTeX, no ``$``).

    Returns:
        ``True``/``False``, or ``None`` when the check did not finish within ``timeout_s`` or the
        checker failed (the caller scores that as wrong and says why).
    """
    global _proc
    if "".join(gold.split()) == "".join(answer.split()):
        return True
    if len(answer) > MAX_ANSWER_CHARS:
        return False
    request = json.dumps({"gold": gold, "answer": answer}) + "\n"
    with _lock:
        for attempt in range(2):  # a worker that died since the last call is restarted once
            if _proc is None or _proc.poll() is not None:
                _proc = _start()
            assert _proc.stdin is not None
            try:
                _proc.stdin.write(request)
                _proc.stdin.flush()
            except (BrokenPipeError, OSError):
                _proc = None
                continue
            # The first call also pays for the worker's imports (sympy: ~1-2 s).
            line = _read_line(_proc, time.monotonic() + timeout_s + (5.0 if attempt == 0 else 0.0))
            if line is None:
                log.warning("math500.verify_timeout", gold=gold[:80], answer=answer[:80], timeout_s=timeout_s)
                _proc.kill()
                _proc.wait()
                _proc = None
                return None
            try:
                reply = json.loads(line)
            except json.JSONDecodeError:
                return None
            if reply.get("error"):
                log.info("math500.verify_error", error=str(reply["error"])[:200])
            return reply.get("equal")
    return None
