"""From a benchmark's assert-based tests to a grading plan the trusted side can judge.

A test suite (HumanEval's ``check(candidate)`` function, MBPP's ``test_list`` assert lines) is
split, with :mod:`ast`, into **probes**: for each ``assert``, the side that calls the candidate
(evaluated inside a fresh grading container, its value serialised) and the expected side with
the comparison (kept on the trusted side). The container therefore only ever sees the *inputs*
of the tests, never an expected value, and the comparison happens outside it on plain values
decoded from JSON, so no object the candidate made (an ``__eq__`` that always says yes) takes
part in it.

Forms understood (``C`` = an expression that calls the candidate, ``E`` = one that does not):

* ``C <op> E`` and ``E <op> C`` for ``==, !=, <, <=, >, >=, is, is not, in, not in``;
* ``abs(C - E) < T`` / ``<= T`` (also ``abs(E - C)``): closeness;
* ``math.isclose(C, E, rel_tol=..., abs_tol=...)``;
* ``C`` (truthy) and ``not C`` (falsy);
* ``assert`` without a candidate call (``assert True``) is dropped.

``E`` is taken literally (:func:`ast.literal_eval`) when it is a literal; otherwise (``sorted(x)``,
``float('inf')``) it is evaluated by a **reference run**: the benchmark's own reference solution
in another fresh container that the candidate never touches.

A suite with anything else (loops, assignments, a comparison of two candidate calls) is graded
in **trace** mode: the test code runs with every assert reduced to its candidate side (so the
expected literals are not in the container), each top-level call of the candidate is recorded,
and the recorded values must equal those of the reference solution run the same way. Limits of
trace mode (documented in ``skillopt/envs/README.md``): the candidate runs next to the test's
own code, so it could read the test's local variables by frame introspection, and a task with
several right answers (HumanEval/32, any root of a polynomial) accepts only the reference's.
"""

from __future__ import annotations

import ast
import math
import operator
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["CANDIDATE", "Probe", "TestPlan", "compare", "plan_tests"]

#: The name the candidate function is bound to in the grading namespace (HumanEval's tests
#: call ``candidate``; MBPP's call the function by name, which is bound too).
CANDIDATE = "candidate"

_OPS: dict[type, str] = {
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Is: "is",
    ast.IsNot: "is not",
    ast.In: "in",
    ast.NotIn: "not in",
}
_FUNCS = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "in": lambda a, b: a in b,
    "not in": lambda a, b: a not in b,
}


@dataclass(frozen=True, kw_only=True)
class Probe:
    """One assertion, decomposed.

    Attributes:
        expr: the candidate side (source, evaluated in the grading container).
        op: ``==`` ... ``not in`` (candidate on the left unless ``cand_right``), ``truthy``,
            ``falsy``, ``close`` (``abs(actual - expected) <``/``<=`` ``tol``) or ``isclose``.
        expected: the expected value when :attr:`literal`.
        expected_src: the expected side (source; "" for truthy/falsy).
        literal: ``expected`` came from the test's literal (else the reference run evaluates
            ``expected_src``).
        cand_right: the candidate is the right operand (``E in C``, ``E == C``).
        tol: ``close``: ``{"tol": T, "strict": bool}``; ``isclose``: its keyword arguments.
        line: the original assert, for the analyst's report.
    """

    expr: str
    op: str
    expected: Any = None
    expected_src: str = ""
    literal: bool = True
    cand_right: bool = False
    tol: dict[str, Any] = field(default_factory=dict)
    line: str = ""


@dataclass(frozen=True, kw_only=True)
class TestPlan:
    """How a suite is graded.

    Attributes:
        mode: ``probes`` or ``trace`` (see the module docstring).
        setup: module-level test code run before the probes (imports, helpers, METADATA).
        probes: the decomposed assertions (``probes`` mode).
        trace_src: the test code with asserts reduced to their candidate side (``trace`` mode).
        why_trace: why the suite could not be decomposed.
    """

    __test__ = False  # not a pytest class

    mode: Literal["probes", "trace"]
    setup: str = ""
    probes: tuple[Probe, ...] = ()
    trace_src: str = ""
    why_trace: str = ""

    @property
    def needs_reference(self) -> bool:
        """Whether grading needs a reference run (trace mode, or a non-literal expected side)."""
        return self.mode == "trace" or any(not p.literal for p in self.probes)


def _calls_candidate(node: ast.AST, names: frozenset[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node))


def _literal(node: ast.AST) -> tuple[bool, Any]:
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def _expected(node: ast.AST) -> dict[str, Any]:
    ok, value = _literal(node)
    return {"expected": value, "expected_src": ast.unparse(node), "literal": ok}


def _probe(test: ast.expr, names: frozenset[str], line: str) -> Probe | None:
    """The probe of one assert's test expression, ``None`` when it is not one of the forms."""
    has = lambda n: _calls_candidate(n, names)  # noqa: E731
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, right, op = test.left, test.comparators[0], _OPS.get(type(test.ops[0]))
        if op is None:
            return None
        # abs(C - E) < T
        if (
            op in ("<", "<=")
            and isinstance(left, ast.Call)
            and isinstance(left.func, ast.Name)
            and left.func.id == "abs"
            and len(left.args) == 1
            and not left.keywords
            and isinstance(left.args[0], ast.BinOp)
            and isinstance(left.args[0].op, ast.Sub)
            and not has(right)
        ):
            ok_tol, tol = _literal(right)
            a, b = left.args[0].left, left.args[0].right
            if ok_tol and isinstance(tol, int | float) and has(a) != has(b):
                cand, exp = (a, b) if has(a) else (b, a)
                return Probe(
                    expr=ast.unparse(cand),
                    op="close",
                    tol={"tol": tol, "strict": op == "<"},
                    line=line,
                    **_expected(exp),
                )
        if has(left) and not has(right):
            return Probe(expr=ast.unparse(left), op=op, line=line, **_expected(right))
        if has(right) and not has(left):
            return Probe(expr=ast.unparse(right), op=op, cand_right=True, line=line, **_expected(left))
        return None
    if (
        isinstance(test, ast.Call)
        and ast.unparse(test.func) in ("math.isclose", "isclose")
        and len(test.args) == 2
        and has(test.args[0]) != has(test.args[1])
    ):
        kw: dict[str, Any] = {}
        for k in test.keywords:
            ok, value = _literal(k.value)
            if k.arg not in ("rel_tol", "abs_tol") or not ok or not isinstance(value, int | float):
                return None
            kw[k.arg] = value
        cand, exp = (test.args[0], test.args[1]) if has(test.args[0]) else (test.args[1], test.args[0])
        return Probe(expr=ast.unparse(cand), op="isclose", tol=kw, line=line, **_expected(exp))
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and has(test.operand):
        return Probe(expr=ast.unparse(test.operand), op="falsy", line=line)
    if has(test):
        return Probe(expr=ast.unparse(test), op="truthy", line=line)
    return None


class _StripAsserts(ast.NodeTransformer):
    """Trace mode: each assert becomes its candidate side (no expected literal left)."""

    def __init__(self, names: frozenset[str]) -> None:
        self.names = names

    def visit_Assert(self, node: ast.Assert) -> ast.stmt:
        test = node.test
        if not _calls_candidate(test, self.names):
            return ast.copy_location(ast.Pass(), node)
        probe = _probe(test, self.names, "")
        keep = ast.parse(probe.expr, mode="eval").body if probe is not None else test
        return ast.copy_location(ast.Expr(value=keep), node)


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)


def plan_tests(
    source: str, *, entry_point: str, check_function: str = "", imports: Sequence[str] = ()
) -> TestPlan:
    """The grading plan of a suite.

    Args:
        source: the test code (HumanEval: the module defining ``check``; MBPP: the assert
            lines joined).
        entry_point: the function under test (also a candidate name).
        check_function: the name of the function holding the asserts (``check``), "" when the
            asserts are at module level.
        imports: extra setup lines (MBPP's ``test_imports``).

    Raises:
        ValueError: the test code does not parse, or holds no assertion on the candidate.
    """
    try:
        with warnings.catch_warnings():  # invalid escapes in benchmark tests are not our concern
            warnings.simplefilter("ignore", SyntaxWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            module = ast.parse(source)
    except SyntaxError as exc:
        raise ValueError(f"the test code does not parse: {exc}") from exc
    names = frozenset({CANDIDATE, entry_point})
    setup_nodes: list[ast.stmt] = [n for line in imports for n in ast.parse(line).body]
    body: list[ast.stmt] = []
    for node in module.body:
        if check_function and isinstance(node, ast.FunctionDef) and node.name == check_function:
            body.extend(n for n in node.body if not _is_docstring(n))
        elif check_function or not isinstance(node, ast.Assert):
            setup_nodes.append(node)
        else:
            body.append(node)
    setup = "\n".join(ast.unparse(n) for n in setup_nodes)
    probes: list[Probe] = []
    why = ""
    for node in body:
        if not isinstance(node, ast.Assert):
            why = f"the test has a {type(node).__name__} statement besides its asserts"
            break
        line = ast.unparse(node)
        if not _calls_candidate(node.test, names):
            continue  # ``assert True``: nothing about the candidate
        probe = _probe(node.test, names, line)
        if probe is None:
            why = f"cannot decompose: {line[:200]}"
            break
        probes.append(probe)
    if not why and not probes:
        raise ValueError("the test holds no assertion that calls the candidate")
    if not why:
        return TestPlan(mode="probes", setup=setup, probes=tuple(probes))
    stripped = _StripAsserts(names).visit(module)
    src = ast.unparse(ast.fix_missing_locations(stripped))
    if check_function:
        src += f"\n{check_function}({CANDIDATE})\n"
    prelude = "\n".join(imports)
    return TestPlan(mode="trace", setup=prelude, trace_src=src, why_trace=why)


def compare(probe: Probe, actual: Any, expected: Any) -> bool:
    """Whether the decoded ``actual`` value passes ``probe`` against ``expected`` (both plain
    values decoded on the trusted side; an error in the comparison is a failure)."""
    op = probe.op
    try:
        if op == "truthy":
            return bool(actual)
        if op == "falsy":
            return not actual
        if op == "close":
            diff = abs(actual - expected)
            tol = probe.tol["tol"]
            return bool(diff < tol) if probe.tol.get("strict", True) else bool(diff <= tol)
        if op == "isclose":
            return math.isclose(actual, expected, **probe.tol)
        if op in ("is", "is not"):
            same = actual is expected if expected in (None, True, False) else actual == expected
            if expected in (None, True, False) and type(actual) is not type(expected):
                same = False
            return same if op == "is" else not same
        left, right = (expected, actual) if probe.cand_right else (actual, expected)
        return bool(_FUNCS[op](left, right))
    except Exception:
        return False
