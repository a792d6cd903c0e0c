"""Trusted grading of HumanEval and MBPP programs in fresh grading containers (real Docker).

Every reference solution of the vendored samples passes; hostile candidates fail with a typed
reason, never a pass: exiting early, fake pass markers, patched builtins, objects whose
``__eq__`` always says yes, a forged results file, reading or rewriting the test material,
sleeping past the deadline.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.runtime.fresh import local_grading_sandboxes
from skillopt.envs._code.env import assemble_program
from skillopt.envs._code.grading import grade_program
from skillopt.envs._code.items import CodeGold, CodeTaskPayload
from skillopt.envs._code.plan import plan_tests
from skillopt.envs.base import TaskItem
from skillopt.envs.registry import load_env_data


@pytest.fixture(scope="module")
def fresh(docker_client) -> Iterator:
    with local_grading_sandboxes(warm=2) as factory:
        yield factory


def _sample(env: str) -> dict[str, TaskItem]:
    data = load_env_data(env)
    return {it.id: it for split in ("train", "val", "test") for it in data.split(split)}


SAMPLES = {env: _sample(env) for env in ("humaneval", "mbpp")}


def grade(fresh, item: TaskItem, code: str, *, timeout_s: float = 30.0):
    gold = CodeGold.model_validate(dict(item.grading.attributes))
    task = CodeTaskPayload.model_validate(dict(item.task.attributes))
    plan = plan_tests(
        gold.test, entry_point=task.entry_point, check_function=gold.check_function, imports=gold.test_imports
    )
    return grade_program(
        fresh,
        assemble_program(code, task),
        plan,
        entry_point=task.entry_point,
        reference=gold.reference,
        timeout_s=timeout_s,
    )


@pytest.mark.parametrize("env", ["humaneval", "mbpp"])
def test_every_reference_solution_of_the_sample_passes(fresh, env):
    failed = {}
    for tid, item in SAMPLES[env].items():
        v = grade(fresh, item, item.grading.attributes["reference"])
        if v.hard != 1.0 or v.soft != 1.0:
            failed[tid] = v.fail_reason
    assert not failed, failed


def test_a_wrong_program_fails_with_the_failed_assertions_reported(fresh):
    item = SAMPLES["humaneval"]["HumanEval-0"]
    code = "def has_close_elements(numbers, threshold):\n    return False\n"
    v = grade(fresh, item, code)
    assert v.hard == 0.0 and 0.0 < v.soft < 1.0
    assert v.fail_reason.startswith("wrong-answer:")
    assert "expected == True" in v.report and "got False" in v.report


def test_trace_mode_item_passes_the_reference_and_fails_a_wrong_root(fresh):
    item = SAMPLES["humaneval"]["HumanEval-32"]
    assert grade(fresh, item, item.grading.attributes["reference"]).hard == 1.0
    wrong = "import math\ndef find_zero(xs):\n    return 0.0\n"
    v = grade(fresh, item, wrong)
    assert v.hard == 0.0 and v.metrics["grading_mode"] == "trace"


HE0 = "def has_close_elements(numbers, threshold):\n"
HOSTILE = {
    "sys_exit_at_import": ("import sys\nsys.exit(0)\n", "load-error"),
    "os_exit_at_import": ("import os\nos._exit(0)\n", "no-results"),
    "os_exit_in_the_function": (HE0 + "    import os\n    os._exit(0)\n", "no-results"),
    "sys_exit_in_the_function": (HE0 + "    import sys\n    sys.exit(0)\n", "wrong-answer"),
    "prints_a_pass_marker": (
        'print(\'All tests passed\'); print(\'{"i": 0, "v": ["bool", true]}\')\n'
        + HE0
        + "    print('PASS')\n    return None\n",
        "wrong-answer",
    ),
    "eq_always_true": (
        "class Yes:\n    def __eq__(self, other): return True\n    def __bool__(self): return True\n"
        + HE0
        + "    return Yes()\n",
        "wrong-answer",
    ),
    "int_subclass_eq_always_true": (
        "class Yes(int):\n    def __eq__(self, other): return True\n    __hash__ = int.__hash__\n"
        + HE0
        + "    return Yes(7)\n",
        "wrong-answer",
    ),
    "patches_builtins_and_assert": (
        "import builtins, sys\nbuiltins.AssertionError = type('X', (Exception,), {})\n"
        "builtins.abs = lambda x: 0\nbuiltins.isinstance = lambda *a: True\nsys.exit = lambda *a: None\n"
        'import json\njson.dumps = lambda *a, **k: \'{"i": 0, "v": ["bool", true]}\'\n'
        + HE0
        + "    return True\n",
        "tampered",
    ),
    "forges_the_results_file": (
        "import json\nwith open('results.jsonl', 'a') as f:\n"
        "    for i in range(50): f.write(json.dumps({'i': i, 'v': ['bool', True]}) + '\\n')\n"
        + HE0
        + "    return True\n",
        "tampered",
    ),
    "rewrites_the_test_inputs": (
        "import sys\nframe = sys._getframe(1)\ncfg = frame.f_locals.get('cfg') or {}\n"
        "cfg['exprs'] = ['True'] * len(cfg.get('exprs', []))\n" + HE0 + "    return True\n",
        "wrong-answer",
    ),
    "sleeps_past_the_deadline": (
        "import signal, time\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
        + HE0
        + "    time.sleep(600)\n",
        "timeout",
    ),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_candidates_fail_typed(fresh, name):
    code, reason = HOSTILE[name]
    item = SAMPLES["humaneval"]["HumanEval-0"]
    v = grade(fresh, item, code, timeout_s=8.0)
    assert v.hard == 0.0, v
    assert v.fail_reason.split(":", 1)[0] == reason, v.fail_reason


def test_the_grading_container_holds_no_expected_value(fresh):
    """A candidate that reads every file it can find sees the inputs, never the expectations."""
    item = SAMPLES["mbpp"]["mbpp-11"]
    spy = (
        "import os, json\nseen = ''\n"
        "for root, _, files in os.walk('.'):\n"
        "    for f in files:\n"
        "        try: seen += open(os.path.join(root, f), errors='replace').read()\n"
        "        except OSError: pass\n"
        "def remove_Occ(s, ch):\n    return seen\n"
    )
    v = grade(fresh, item, spy)
    assert v.hard == 0.0
    leaked = [c.reason for c in v.cases]
    # The expected value of the first assertion ("heo") never appears in what the spy read.
    assert all("'heo'" not in r for r in leaked), leaked
    assert any('remove_Occ("hello","l")' in r or "remove_Occ" in r for r in leaked)


def test_truthiness_asserts_accept_an_unserialisable_value_and_equality_does_not(fresh):
    """MBPP 737 returns a ``re.Match``: ``assert f(x)`` tests only its truthiness, which the
    container reports; an equality against such a value could never pass."""
    import json

    from skillopt.envs._code.items import mbpp_item
    from skillopt.testing.shared_data import shared_datasets

    raws = json.loads((shared_datasets() / "mbpp" / "sanitized-mbpp.json").read_text())
    item = mbpp_item(next(r for r in raws if r["task_id"] == 737))
    assert grade(fresh, item, item.grading.attributes["reference"]).hard == 1.0
    always = "import re\ndef check_str(string):\n    return re.search('.*', string)\n"
    v = grade(fresh, item, always)
    assert v.hard == 0.0 and v.metrics["n_pass"] == 2  # the "assert not" one fails


def test_a_hanging_candidate_is_stopped_at_its_first_hung_test(fresh):
    """Each test's limit comes from the reference's time on it (a floor of a few seconds for a
    fast reference, not 30 s per assertion), and the tests after a hang are not run."""
    item = SAMPLES["humaneval"]["HumanEval-0"]
    v = grade(fresh, item, HE0 + "    while True:\n        pass\n")
    assert v.hard == 0.0 and v.fail_reason.startswith("timeout: a test ran more than ")
    reasons = [c.reason for c in v.cases]
    assert reasons[0].startswith("raised timeout: more than ")
    assert all("not run (the candidate hung on test 1)" in r for r in reasons[1:]) and len(reasons) > 1


def test_module_level_code_that_never_finishes_is_a_load_timeout(fresh):
    item = SAMPLES["humaneval"]["HumanEval-0"]
    v = grade(fresh, item, "while True:\n    pass\n" + HE0 + "    return False\n")
    assert v.fail_reason.startswith("load-timeout: module-level code did not finish within")


def test_a_hanging_candidate_in_a_trace_mode_suite_is_a_timeout(fresh):
    item = SAMPLES["humaneval"]["HumanEval-32"]
    v = grade(fresh, item, "import math\ndef find_zero(xs):\n    while True:\n        pass\n")
    assert v.metrics["grading_mode"] == "trace"
    assert v.fail_reason.startswith("timeout: the tests ran more than "), v.fail_reason


def test_local_grading_sandboxes_leave_no_state_dir_behind(docker_client):
    with local_grading_sandboxes() as factory, factory() as box:
        state = Path(box.runtime.state_dir)
        assert state.is_dir()
    assert not state.exists(), state
