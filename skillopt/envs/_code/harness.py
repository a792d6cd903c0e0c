"""Grading harness, run INSIDE a fresh grading container (python3 stdlib only; never imported
by the trusted side, which sends this file's text).

Reads ``grading.json`` (the solution file, the entry point, the setup code, the candidate-side
expressions or the trace code), loads the solution, evaluates each expression and appends one
JSON line per value to ``results.jsonl``. Everything it writes is a *claim*: the candidate runs
in this very process and may tamper with any of it; the trusted side decodes the claims
strictly and compares them with expected values this container never sees.

Value encoding (tagged JSON, decoded by :mod:`skillopt.envs._code.values`): ``["none"]``,
``["bool", b]``, ``["int", "digits"]``, ``["float", "repr"]``, ``["complex", "re", "im"]``,
``["str", s]``, ``["bytes", "hex"]``, ``["list"|"tuple"|"set"|"frozenset", [...]]``,
``["dict", [[k, v], ...]]``, ``["opaque", "type name", truthiness]`` (anything else: never
equal; its truthiness, ``bool(value)`` as the container saw it, only counts for ``assert f(x)``
and ``assert not f(x)``, which test nothing more, e.g. MBPP 737's ``re.Match``).
"""

import json
import random
import signal
import sys
import time
from typing import Any

_MAX_DEPTH = 60
_MAX_NODES = 200_000


class _ProbeTimeout(BaseException):
    pass


def _on_alarm(signum, frame):
    raise _ProbeTimeout()


def encode(value, budget=None, depth=0):
    budget = budget if budget is not None else [_MAX_NODES]
    budget[0] -= 1
    if budget[0] < 0 or depth > _MAX_DEPTH:
        return ["opaque", "too large"]
    if value is None:
        return ["none"]
    if value is True or value is False:
        return ["bool", bool(value)]
    if isinstance(value, int):
        return ["int", int.__repr__(value)]
    if isinstance(value, float):
        return ["float", float.__repr__(value)]
    if isinstance(value, complex):
        return ["complex", float.__repr__(value.real), float.__repr__(value.imag)]
    if isinstance(value, str):
        return ["str", str.__str__(value)]
    if isinstance(value, bytes | bytearray):
        return ["bytes", bytes(value).hex()]
    if isinstance(value, dict):
        items = list(dict.items(value))
        return ["dict", [[encode(k, budget, depth + 1), encode(v, budget, depth + 1)] for k, v in items]]
    bases: tuple[tuple[str, Any], ...] = (
        ("list", list),
        ("tuple", tuple),
        ("set", set),
        ("frozenset", frozenset),
    )
    for kind, base in bases:
        if isinstance(value, base):
            return [kind, [encode(v, budget, depth + 1) for v in base.__iter__(value)]]
    try:  # only ``assert f(x)`` / ``assert not f(x)`` read this (a truthiness claim)
        truth = bool(value)
    except BaseException:  # a __bool__ that raises: no truthiness
        truth = None
    return ["opaque", type(value).__name__[:100], truth]


def _error(exc):
    return f"{type(exc).__name__}: {exc}"[:500]


def main():
    with open("grading.json", encoding="utf-8") as fh:
        cfg = json.load(fh)
    out = open("results.jsonl", "w", encoding="utf-8")  # noqa: SIM115 - open for the whole run

    def emit(obj):
        out.write(json.dumps(obj) + "\n")
        out.flush()

    per_probe = float(cfg.get("probe_timeout_s", 10.0))
    # Chosen before the candidate's code runs in this process (it could rebind the names).
    run = _run_trace if cfg.get("trace") else _run_probes
    signal.signal(signal.SIGALRM, _on_alarm)
    random.seed(0)
    ns = _load(cfg, emit, float(cfg.get("load_timeout_s", per_probe)))
    if ns is None:
        return
    entry = cfg["entry_point"]
    fn = ns.get(entry)
    if not callable(fn):
        emit({"load_error": f"the solution defines no function {entry!r}"})
        return
    run(cfg, ns, fn, emit, per_probe)


def _load(cfg, emit, load_timeout):
    """The namespace of the loaded solution (and the suite's setup code), or None once a
    ``load_error`` line says why it did not load."""
    ns = {"__name__": "solution"}
    try:
        with open(cfg["solution"], encoding="utf-8") as fh:
            source = fh.read()
        signal.setitimer(signal.ITIMER_REAL, load_timeout)
        exec(compile(source, "solution.py", "exec"), ns)
        signal.setitimer(signal.ITIMER_REAL, 0)
        if cfg.get("setup"):
            exec(compile(cfg["setup"], "test_setup.py", "exec"), ns)
    except _ProbeTimeout:
        emit({"load_error": f"load-timeout: module-level code did not finish within {load_timeout:g} s"})
        return None
    except BaseException as exc:  # the candidate's failure (SystemExit included) is data
        signal.setitimer(signal.ITIMER_REAL, 0)
        emit({"load_error": _error(exc)})
        return None
    return ns


def _run_trace(cfg, ns, fn, emit, per_probe):
    """Trace mode: run the suite's own test code once, with the entry point wrapped so that the
    value of every outermost call is one ``{"t": n, "v": ...}`` line; then an ``end`` line."""
    depth = [0]
    count = [0]

    def recorder(*args, **kwargs):
        depth[0] += 1
        try:
            value = fn(*args, **kwargs)
        finally:
            depth[0] -= 1
        if depth[0] == 0:
            emit({"t": count[0], "v": encode(value)})
            count[0] += 1
        return value

    ns[cfg["entry_point"]] = recorder
    ns["candidate"] = recorder
    trace_limit = float(cfg.get("trace_timeout_s", 30.0))
    signal.setitimer(signal.ITIMER_REAL, trace_limit)
    try:
        exec(compile(cfg["trace"], "test_trace.py", "exec"), ns)
        signal.setitimer(signal.ITIMER_REAL, 0)
        emit({"end": "ok"})
    except _ProbeTimeout:
        emit({"end": f"timeout: more than {trace_limit:g}s"})
    except BaseException as exc:
        signal.setitimer(signal.ITIMER_REAL, 0)
        emit({"end": _error(exc)})


def _run_probes(cfg, ns, fn, emit, per_probe):
    """Probe mode: evaluate each candidate-side expression under its own time limit, one
    ``{"i": n, "v": ...}`` or ``{"i": n, "err": ...}`` line each."""
    ns["candidate"] = fn
    limits = cfg.get("probe_timeouts_s") or []
    hung = None
    for i, expr in enumerate(cfg["exprs"]):
        if hung is not None:  # a candidate that hung once is not given every test's time again
            emit({"i": i, "err": f"timeout: not run (the candidate hung on test {hung + 1})"})
            continue
        limit = float(limits[i]) if i < len(limits) else per_probe
        started = time.monotonic()
        try:
            signal.setitimer(signal.ITIMER_REAL, limit)
            value = eval(compile(expr, f"probe_{i}", "eval"), ns)
            encoded = encode(value)
            signal.setitimer(signal.ITIMER_REAL, 0)
            emit({"i": i, "v": encoded, "d": round(time.monotonic() - started, 6)})
        except _ProbeTimeout:
            emit({"i": i, "err": f"timeout: more than {limit:g}s"})
            hung = i
        except BaseException as exc:
            signal.setitimer(signal.ITIMER_REAL, 0)
            emit({"i": i, "err": _error(exc)})


if __name__ == "__main__":
    main()
    sys.stdout.flush()
