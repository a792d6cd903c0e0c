"""Trusted grading of one candidate program against an assert-based suite.

The candidate never runs where the tests are: :func:`grade_program` plans the suite on the
trusted side (:func:`~skillopt.envs._code.plan.plan_tests`), runs the candidate in a **fresh**
grading container (``ctx.grading_sandbox``: no network, never held the agent's work) that gets
only the candidate-side expressions (the test inputs), reads back the claimed values, decodes
them strictly (:mod:`.values`) and compares them here with the expected values. Where an
expected value is not a literal of the test (or in trace mode), a **reference run** of the
benchmark's own solution in another fresh container supplies it. Exit codes and printed output
are never read as a verdict.

Failure reasons (the prefix before ``:`` groups failures): ``load-error`` (syntax error,
exception at import, missing function), ``timeout`` (the run exceeded its time), ``memory``
(killed by the memory limit), ``no-results`` (the process ended before reporting, e.g.
``os._exit``), ``tampered`` (the results file holds lines the harness never writes twice),
``wrong-answer`` (some assertion failed; the report names them), ``output-too-large``.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from skillopt.agents.sandbox import ExecOutcome, Sandbox, read_output
from skillopt.envs._code.plan import Probe, TestPlan, compare
from skillopt.envs._code.values import Opaque, decode, has_opaque, same_value, show
from skillopt.errors import OutputLimitExceeded
from skillopt.types import CaseResult

__all__ = ["CodeVerdict", "GradingError", "grade_program", "run_in_fresh"]

FreshSandbox = Callable[[], AbstractContextManager[Sandbox]]

_MAX_RESULTS_BYTES = 16 * 1024 * 1024
_PROBE_TIMEOUT_S = 30.0  # one assertion at most; MBPP 123 needs ~10 s on a loaded 2-core host
#: A test's own limit: this factor times the reference solution's time on it, at least the
#: floor (EvalPlus's way), at most :data:`_PROBE_TIMEOUT_S`. A candidate that hangs is stopped
#: at its first hung test; the rest fail as ``timeout`` without running.
_PROBE_FACTOR = 10.0
_PROBE_FLOOR_S = 3.0
#: Module-level code of the candidate (a loop at import never reaches a test).
_LOAD_TIMEOUT_S = 10.0
_TRACE_FLOOR_S = 5.0
_TIMING_CACHE_MAX = 4096
_REPORT_FAILS = 8


class GradingError(Exception):
    """The benchmark's own reference run failed: the item, not the candidate, is broken."""


@cache
def _harness() -> bytes:
    return (Path(__file__).with_name("harness.py")).read_bytes()


@dataclass(frozen=True, kw_only=True)
class RunOutput:
    """What one grading-container run left: the process outcome and the parsed lines."""

    outcome: ExecOutcome
    lines: list[dict[str, Any]]
    problem: str = ""  # output-too-large / unreadable


@dataclass(frozen=True, kw_only=True)
class CodeVerdict:
    """A candidate graded: pass@1 (``hard``), share of assertions passed (``soft``)."""

    hard: float
    soft: float
    fail_reason: str
    cases: tuple[CaseResult, ...] = ()
    report: str = ""
    metrics: Mapping[str, Any] = field(default_factory=dict)
    exec_outcome: ExecOutcome | None = None


def run_in_fresh(
    fresh: FreshSandbox, solution: str, config: Mapping[str, Any], *, timeout_s: float
) -> RunOutput:
    """Run the harness on ``solution`` in a new grading container and read its claims."""
    with fresh() as box:
        box.write_file("harness.py", _harness())
        box.write_file("solution.py", solution.encode("utf-8"))
        box.write_file("grading.json", json.dumps({**config, "solution": "solution.py"}).encode("utf-8"))
        outcome = box.run_python("harness.py", timeout_s=timeout_s)
        try:
            raw = read_output(box, "results.jsonl", max_bytes=_MAX_RESULTS_BYTES)
        except OutputLimitExceeded:
            return RunOutput(outcome=outcome, lines=[], problem="output-too-large")
    lines: list[dict[str, Any]] = []
    for text in (raw or b"").decode("utf-8", "replace").splitlines():
        try:
            obj = json.loads(text)
        except json.JSONDecodeError:
            return RunOutput(outcome=outcome, lines=lines, problem="tampered")
        if not isinstance(obj, dict):
            return RunOutput(outcome=outcome, lines=lines, problem="tampered")
        lines.append(obj)
    return RunOutput(outcome=outcome, lines=lines)


def _config(
    plan: TestPlan,
    entry_point: str,
    exprs: list[str] | None,
    *,
    timeout_s: float,
    probe_limits: list[float] | None = None,
    trace_timeout_s: float | None = None,
) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "entry_point": entry_point,
        "setup": plan.setup,
        "probe_timeout_s": min(_PROBE_TIMEOUT_S, timeout_s),
        "load_timeout_s": min(_LOAD_TIMEOUT_S, timeout_s),
        "trace_timeout_s": min(trace_timeout_s or timeout_s, timeout_s),
    }
    if probe_limits:
        cfg["probe_timeouts_s"] = probe_limits
    if exprs is None:
        cfg["trace"] = plan.trace_src
    else:
        cfg["exprs"] = exprs
    return cfg


def _indexed(lines: list[dict[str, Any]], n: int) -> tuple[dict[int, dict[str, Any]], bool]:
    """Probe index → its line; ``False`` when an index is claimed twice or out of range."""
    out: dict[int, dict[str, Any]] = {}
    for line in lines:
        i = line.get("i")
        if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < n or i in out:
            return out, False
        out[i] = line
    return out, True


def _run_failure(run: RunOutput, timeout_s: float) -> str:
    """The typed reason a run reported nothing usable ("" when it did)."""
    o = run.outcome
    if run.problem == "output-too-large":
        return f"output-too-large: the results exceeded {_MAX_RESULTS_BYTES} bytes"
    if o.timed_out:
        return f"timeout: the tests ran past {timeout_s:.0f}s"
    if o.oom_killed:
        return "memory: the test run was killed by the memory limit"
    return ""


def _reference_values(
    fresh: FreshSandbox, plan: TestPlan, entry_point: str, reference: str, *, timeout_s: float
) -> tuple[dict[int, Any], list[Any], float]:
    """Expected values of the non-literal probes (by probe index) and, in trace mode, the
    reference's recorded calls and how long its run took.

    Raises:
        GradingError: the reference solution failed its own suite's run.
    """
    if plan.mode == "trace":
        run = run_in_fresh(
            fresh, reference, _config(plan, entry_point, None, timeout_s=timeout_s), timeout_s=timeout_s
        )
        records = [decode(line["v"]) for line in run.lines if "t" in line]
        ends = [line["end"] for line in run.lines if "end" in line]
        if ends != ["ok"]:
            raise GradingError(
                f"the reference solution's trace run failed: {ends or _run_failure(run, timeout_s)}"
            )
        return {}, records, run.outcome.duration_s
    wanted = [i for i, p in enumerate(plan.probes) if not p.literal]
    if not wanted:
        return {}, [], 0.0
    exprs = [plan.probes[i].expected_src for i in wanted]
    run = run_in_fresh(
        fresh, reference, _config(plan, entry_point, exprs, timeout_s=timeout_s), timeout_s=timeout_s
    )
    got, ok = _indexed([line for line in run.lines if "i" in line], len(exprs))
    if not ok or len(got) != len(exprs) or any("err" in line for line in got.values()):
        raise GradingError(f"the reference run could not evaluate the expected values: {run.lines[:3]}")
    return {wanted[k]: decode(got[k]["v"]) for k in range(len(exprs))}, [], 0.0


_timings: OrderedDict[tuple[str, ...], list[float]] = OrderedDict()
_timings_lock = threading.Lock()


def _probe_limits(
    fresh: FreshSandbox, plan: TestPlan, entry_point: str, reference: str, *, timeout_s: float
) -> list[float]:
    """Each test's time limit, from the reference solution's time on it (measured once per
    suite and process, in its own container: trusted code, so its timings are too)."""
    exprs = [p.expr for p in plan.probes]
    key = (hashlib.sha256(reference.encode()).hexdigest(), entry_point, plan.setup, *exprs)
    with _timings_lock:
        if key in _timings:
            _timings.move_to_end(key)
            return _timings[key]
    run = run_in_fresh(
        fresh, reference, _config(plan, entry_point, exprs, timeout_s=timeout_s), timeout_s=timeout_s
    )
    got, ok = _indexed([line for line in run.lines if "i" in line], len(exprs))
    limits = []
    for i in range(len(exprs)):
        d = got.get(i, {}).get("d") if ok else None
        if isinstance(d, int | float) and not isinstance(d, bool) and d >= 0:
            limits.append(min(_PROBE_TIMEOUT_S, max(_PROBE_FLOOR_S, _PROBE_FACTOR * d)))
        else:
            limits.append(_PROBE_TIMEOUT_S)
    with _timings_lock:
        _timings[key] = limits
        while len(_timings) > _TIMING_CACHE_MAX:
            _timings.popitem(last=False)
    return limits


def _load_error(lines: list[dict[str, Any]]) -> str:
    for line in lines:
        if "load_error" in line:
            return str(line["load_error"])[:500]
    return ""


def grade_program(
    fresh: FreshSandbox,
    program: str,
    plan: TestPlan,
    *,
    entry_point: str,
    reference: str,
    timeout_s: float = 60.0,
) -> CodeVerdict:
    """Grade ``program`` (the whole candidate module) against ``plan``.

    Args:
        fresh: leases a fresh grading container per call.
        plan: the suite's plan (trusted side).
        entry_point: the function under test.
        reference: the benchmark's reference solution (used only when the plan needs it, in
            its own container).
        timeout_s: the candidate run's time limit (and each reference run's).

    Raises:
        GradingError: the reference run failed (the item is broken, not the candidate).
        InfraError: a grading container could not be had or died.
    """
    t0 = time.monotonic()
    expected_by_ref, ref_records, reference_s = (
        _reference_values(fresh, plan, entry_point, reference, timeout_s=timeout_s)
        if plan.needs_reference
        else ({}, [], 0.0)
    )
    if plan.mode == "trace":
        exprs, limits = None, None
        trace_timeout = max(_TRACE_FLOOR_S, _PROBE_FACTOR * reference_s) if reference_s else None
    else:
        exprs = [p.expr for p in plan.probes]
        limits = (
            _probe_limits(fresh, plan, entry_point, reference, timeout_s=timeout_s) if reference else None
        )
        trace_timeout = None
    config = _config(
        plan, entry_point, exprs, timeout_s=timeout_s, probe_limits=limits, trace_timeout_s=trace_timeout
    )
    run = run_in_fresh(fresh, program, config, timeout_s=timeout_s)
    metrics: dict[str, Any] = {"grading_mode": plan.mode, "grade_s": round(time.monotonic() - t0, 3)}
    if plan.mode == "trace":
        return _trace_verdict(run, ref_records, plan, timeout_s, metrics)
    return _probe_verdict(run, plan, expected_by_ref, timeout_s, metrics)


def _probe_verdict(
    run: RunOutput, plan: TestPlan, expected_by_ref: dict[int, Any], timeout_s: float, metrics: dict[str, Any]
) -> CodeVerdict:
    n = len(plan.probes)
    load_error = _load_error(run.lines)
    got, ok_index = _indexed([line for line in run.lines if "load_error" not in line], n)
    problem = run.problem or ("tampered" if not ok_index else "")
    cases: list[CaseResult] = []
    fails: list[str] = []
    for i, probe in enumerate(plan.probes):
        expected = probe.expected if probe.literal else expected_by_ref.get(i, Opaque("expected"))
        line = got.get(i) if not problem else None
        if line is None:
            reason = "no result"
        elif "err" in line:
            reason = f"raised {str(line['err'])[:300]}"
        else:
            actual = decode(line.get("v"))
            if _passes(probe, actual, expected):
                cases.append(CaseResult(name=f"test_{i + 1}", ok=True, stage="eval"))
                continue
            reason = f"got {show(actual)}"
        cases.append(CaseResult(name=f"test_{i + 1}", ok=False, stage="eval", reason=reason))
        fails.append(f"- {probe.line[:300]}\n  {reason}; expected {_expectation(probe, expected)}")
    passed = sum(1 for c in cases if c.ok)
    hard = float(passed == n and not problem)
    soft = 0.0 if problem else passed / n
    hung = next(
        (str(v["err"]) for v in got.values() if str(v.get("err", "")).startswith("timeout: more")), ""
    )
    wrong = f"{n - passed} of {n} assertions failed"
    reason = _fail_reason(
        run, timeout_s, hard=hard, problem=problem, load_error=load_error, reported=bool(got),
        wrong=wrong, hung=f"a test ran {hung.removeprefix('timeout: ')}; the tests after it were not run" if hung else "",
    )  # fmt: skip
    report = _report(reason, passed, n, fails)
    metrics.update({"n_tests": n, "n_pass": passed})
    return CodeVerdict(
        hard=hard,
        soft=soft,
        fail_reason=reason,
        cases=tuple(cases),
        report=report,
        metrics=metrics,
        exec_outcome=run.outcome,
    )


def _passes(probe: Probe, actual: Any, expected: Any) -> bool:
    if probe.op in ("truthy", "falsy") and isinstance(actual, Opaque) and actual.truth is not None:
        return actual.truth if probe.op == "truthy" else not actual.truth
    if has_opaque(actual) or has_opaque(expected):
        return False
    return compare(probe, actual, expected)


def _expectation(probe: Probe, expected: Any) -> str:
    if probe.op == "truthy":
        return "a true value"
    if probe.op == "falsy":
        return "a false value"
    if probe.op == "close":
        return f"within {probe.tol['tol']} of {show(expected)}"
    if probe.op == "isclose":
        return f"close to {show(expected)} ({probe.tol or 'default tolerance'})"
    return f"{probe.op} {show(expected)}"


def _report(reason: str, passed: int, n: int, fails: list[str]) -> str:
    head = f"[EVALUATION RESULT]\nPassed {passed} of {n} tests; pass@1={int(passed == n and not reason)}"
    if reason:
        head += f"\nFailure: {reason}"
    if fails:
        head += "\nFailed assertions:\n" + "\n".join(fails[:_REPORT_FAILS])
        if len(fails) > _REPORT_FAILS:
            head += f"\n... and {len(fails) - _REPORT_FAILS} more"
    return head


def _fail_reason(
    run: RunOutput,
    timeout_s: float,
    *,
    hard: float,
    problem: str,
    load_error: str,
    reported: bool,
    wrong: str,
    hung: str = "",
) -> str:
    """The row's ``fail_reason`` for a grading run ("" when it passed), the same in probe and
    trace mode: tampering first, then the run's own failure, a load error, no report at all,
    and only then wrong answers."""
    if hard:
        return ""
    if problem == "tampered":
        return "tampered: the results file holds claims the harness never writes"
    if problem:
        return _run_failure(run, timeout_s)
    if load_error:
        return load_error if load_error.startswith("load-timeout:") else f"load-error: {load_error}"
    if not reported:
        return _run_failure(run, timeout_s) or (
            f"no-results: the test run ended before reporting anything (exit {run.outcome.exit_code})"
        )
    return _run_failure(run, timeout_s) or (f"timeout: {hung}" if hung else f"wrong-answer: {wrong}")


def _trace_verdict(
    run: RunOutput, ref: list[Any], plan: TestPlan, timeout_s: float, metrics: dict[str, Any]
) -> CodeVerdict:
    load_error = _load_error(run.lines)
    records: list[dict[str, Any]] = [line for line in run.lines if "t" in line]
    in_order = all(line.get("t") == k for k, line in enumerate(records))
    problem = run.problem or ("tampered" if not in_order or len(records) > len(ref) else "")
    n = len(ref)
    cases: list[CaseResult] = []
    fails: list[str] = []
    for k, expected in enumerate(ref):
        if problem or k >= len(records):
            cases.append(CaseResult(name=f"call_{k + 1}", ok=False, stage="eval", reason="no result"))
            continue
        actual = decode(records[k].get("v"))
        if same_value(actual, expected):
            cases.append(CaseResult(name=f"call_{k + 1}", ok=True, stage="eval"))
        else:
            reason = f"got {show(actual)}"
            cases.append(CaseResult(name=f"call_{k + 1}", ok=False, stage="eval", reason=reason))
            fails.append(
                f"- call {k + 1} of the candidate in the test: {reason}; the reference returned {show(expected)}"
            )
    passed = sum(1 for c in cases if c.ok)
    hard = float(n > 0 and passed == n and not problem)
    soft = 0.0 if problem or n == 0 else passed / n
    ends = [str(line.get("end")) for line in run.lines if "end" in line]
    hung = ends[0].removeprefix("timeout: ") if ends and ends[0].startswith("timeout: more") else ""
    reason = _fail_reason(
        run, timeout_s, hard=hard, problem=problem, load_error=load_error, reported=bool(records) or bool(hung),
        wrong=f"{n - passed} of {n} calls differ from the reference",
        hung=f"the tests ran {hung}; the rest were not run" if hung else "",
    )  # fmt: skip
    metrics.update({"n_tests": n, "n_pass": passed, "why_trace": plan.why_trace})
    return CodeVerdict(
        hard=hard,
        soft=soft,
        fail_reason=reason,
        cases=tuple(cases),
        report=_report(reason, passed, n, fails),
        metrics=metrics,
        exec_outcome=run.outcome,
    )
