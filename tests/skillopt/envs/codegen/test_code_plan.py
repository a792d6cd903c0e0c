"""Test plans of HumanEval and MBPP (trusted side, no container): every real suite decomposes
(or falls back to trace mode), and no expected value of a decomposed suite goes to the
container."""

from __future__ import annotations

import json

import pytest

from skillopt.envs._code.items import humaneval_item, mbpp_item
from skillopt.envs._code.plan import Probe, compare, plan_tests
from skillopt.envs._code.values import Opaque, decode, same_value
from skillopt.envs.registry import load_env_data
from skillopt.testing.shared_data import shared_datasets

_SHARED = shared_datasets()
assert _SHARED is not None, "the shared datasets folder is missing (set SKILLOPT_SHARED_DATASETS)"
HUMANEVAL = _SHARED / "humaneval" / "HumanEval.jsonl"
MBPP = _SHARED / "mbpp" / "sanitized-mbpp.json"


def _plan(item):
    g = item.grading.attributes
    return plan_tests(
        g["test"],
        entry_point=item.task.attributes["entry_point"],
        check_function=g["check_function"],
        imports=g["test_imports"],
    )


def test_every_humaneval_suite_is_planned_and_only_8_need_trace_mode():
    items = [humaneval_item(json.loads(line)) for line in HUMANEVAL.read_text().splitlines()]
    plans = {it.id: _plan(it) for it in items}
    trace = sorted(k for k, p in plans.items() if p.mode == "trace")
    assert len(items) == 164
    assert trace == [f"HumanEval-{n}" for n in (129, 151, 32, 33, 38, 44, 50, 53)]
    assert sum(len(p.probes) for p in plans.values()) > 1000


def test_every_mbpp_suite_decomposes_into_probes():
    items = [mbpp_item(raw) for raw in json.loads(MBPP.read_text())]
    plans = [_plan(it) for it in items]
    assert len(items) == 427
    assert all(p.mode == "probes" for p in plans)
    assert sum(len(p.probes) for p in plans) >= 3 * 427


def test_expected_values_never_reach_the_container_side():
    # HumanEval/0's literals (True/False) and MBPP 2's sets are on the trusted side only.
    plan = plan_tests(
        "def check(candidate):\n    assert candidate([1.0, 2.8], 0.3) == 'SECRET-EXPECTED'\n",
        entry_point="f",
        check_function="check",
    )
    (probe,) = plan.probes
    assert probe.expr == "candidate([1.0, 2.8], 0.3)"
    assert "SECRET" not in probe.expr + plan.setup
    assert probe.literal and probe.expected == "SECRET-EXPECTED"


def test_trace_mode_strips_the_expected_side_of_asserts():
    plan = plan_tests(
        "def check(candidate):\n    x = 3\n    assert candidate(x) == 'SECRET-EXPECTED'\n",
        entry_point="f",
        check_function="check",
    )
    assert plan.mode == "trace"
    assert "SECRET" not in plan.trace_src and "candidate(x)" in plan.trace_src


@pytest.mark.parametrize(
    ("line", "op", "expr"),
    [
        ("assert abs(candidate(1.5) - 0.5) < 1e-6", "close", "candidate(1.5)"),
        ("assert math.isclose(f(2), 3.14, rel_tol=0.001)", "isclose", "f(2)"),
        ("assert not candidate(3)", "falsy", "candidate(3)"),
        ("assert candidate(3)", "truthy", "candidate(3)"),
        ("assert set(f((1, 2))) == set((2, 1))", "==", "set(f((1, 2)))"),
        ("assert 3 in f([1, 2, 3])", "in", "f([1, 2, 3])"),
        ("assert f(None) is None", "is", "f(None)"),
    ],
)
def test_assert_forms(line, op, expr):
    plan = plan_tests(line, entry_point="f", imports=["import math"])
    (probe,) = plan.probes
    assert (probe.op, probe.expr) == (op, expr)


def test_non_literal_expected_side_goes_to_the_reference_run():
    plan = plan_tests("assert f(1) == tuple([1, 2])", entry_point="f")
    assert plan.needs_reference and not plan.probes[0].literal


def test_comparison_runs_on_plain_values_only():
    eq = Probe(expr="f()", op="==", expected=5)
    assert compare(eq, 5, 5) and not compare(eq, 6, 5)
    assert not compare(
        Probe(expr="f()", op="close", expected=1.0, tol={"tol": 1e-6, "strict": True}), "x", 1.0
    )
    assert decode(["tuple", [["int", "1"], ["str", "a"]]]) == (1, "a")
    assert isinstance(decode(["int", "1e5"]), Opaque)  # malformed claims are never equal
    assert isinstance(decode(["set", [["list", []]]]), Opaque)
    assert decode(["opaque", "Weird"]) != decode(["opaque", "Weird"])
    assert same_value([1.0, (2, "a")], [1.0 + 1e-12, (2, "a")]) and not same_value(True, 1)


def test_vendored_samples_are_copies_of_the_shared_data():
    shared_he = {json.loads(line)["task_id"]: json.loads(line) for line in HUMANEVAL.read_text().splitlines()}
    shared_mbpp = {raw["task_id"]: raw for raw in json.loads(MBPP.read_text())}
    for env, shared, key in (("humaneval", shared_he, "source_id"), ("mbpp", shared_mbpp, None)):
        data = load_env_data(env)
        for split in ("train", "val", "test"):
            for item in data.split(split):
                sid = item.task.attributes[key] if key else int(item.id.split("-")[1])
                raw = shared[sid]
                again = (humaneval_item if env == "humaneval" else mbpp_item)(raw)
                assert again == item


def test_an_opaque_claim_keeps_only_its_truthiness():
    value = decode(["opaque", "Match", True])
    assert isinstance(value, Opaque) and value.truth is True and value != value
    assert decode(["opaque", "Match"]).truth is None
