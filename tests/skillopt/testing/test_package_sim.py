"""The simulation's package family (issue 33, item 5) without Docker: its tasks and reference
programs, and the scripted players over the real HTTP server.

The programs are OUR trusted fixtures, so they run in a host subprocess here (with the helper
on ``PYTHONPATH``; in a rollout it is imported from the read-only ``/skill/scripts``). The
rollouts through the real sandbox are in ``tests/e2e/test_package_sim_eval.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import openai
import pytest

from skillopt.config import load_config
from skillopt.envs.registry import load_env_data
from skillopt.envs.spreadsheetbench.evaluator import grade_case
from skillopt.reflection.analyst import analyst_user_message
from skillopt.reflection.step_buffer import StepBuffer, StepEntry
from skillopt.skill.packed import FileSection, join_packed
from skillopt.testing.fixtures.spreadsheetbench.package import (
    PACKAGE_SAMPLE_DIR,
    helper_source,
    load_package_catalogue,
    package_code,
    package_rules,
    package_task_ids,
)
from skillopt.testing.fixtures.spreadsheetbench.verify import case_files, harness_code, load_tasks
from skillopt.testing.simulation import SIM_OPTIMIZER, SIM_TARGET, simulation_server

FISCAL = package_rules()["fiscal-calendar"]
AMOUNTS = package_rules()["european-amounts"]
TASKS = load_tasks(PACKAGE_SAMPLE_DIR)


def _run(code: str, task_id: str, tmp: Path, helper: str | None) -> tuple[int, bool, str]:
    """Run a program on the task's case 1: ``(exit code, graded right, stderr)``."""
    task = TASKS[task_id]
    [(_, input_path, answer_path)] = case_files(PACKAGE_SAMPLE_DIR, task)
    lib = tmp / "lib"
    lib.mkdir(exist_ok=True)
    if helper is not None:
        (lib / "sheet_helpers.py").write_text(helper)
    out = tmp / "output.xlsx"
    (tmp / "run.py").write_text(harness_code(code, input_path, out))
    proc = subprocess.run(
        [sys.executable, str(tmp / "run.py")],
        env={**os.environ, "PYTHONPATH": str(lib)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if proc.returncode != 0:
        return proc.returncode, False, proc.stderr
    verdict = grade_case(out, answer_path, task["answer_position"], None, collect_formulas=False)
    return 0, bool(verdict.ok), proc.stderr


# -- the tasks and their programs --------------------------------------------------------------


def test_the_package_sample_is_a_spreadsheetbench_data_root_chosen_by_an_env_option():
    data = load_env_data("spreadsheetbench", options={"sample": "package"})
    split = {name: [it.id for it in data.split(name)] for name in ("train", "val", "test")}
    assert {k: len(v) for k, v in split.items()} == {"train": 4, "val": 4, "test": 2}
    assert {i for ids in split.values() for i in ids} == set(package_task_ids())
    for ids in split.values():  # both families in every split, so the gate can see both
        assert {load_package_catalogue()["tasks"][i]["rule"] for i in ids} == {FISCAL.id, AMOUNTS.id}
    # The benchmark sample stays the default.
    assert "pkg-fiscal-1" not in {it.id for it in load_env_data("spreadsheetbench").split("train")}


@pytest.mark.parametrize("task_id", package_task_ids())
def test_the_right_program_passes_and_the_one_without_the_package_runs_but_fails(task_id, tmp_path):
    helper = helper_source(AMOUNTS)
    assert _run(package_code(task_id, "solution"), task_id, tmp_path / "s", helper) == (0, True, "")
    rc, ok, err = _run(package_code(task_id, "wrong"), task_id, tmp_path / "w", None)
    assert (rc, ok) == (0, False), err
    uses_helper = "from sheet_helpers import parse_amount" in package_code(task_id, "solution")
    assert uses_helper == (load_package_catalogue()["tasks"][task_id]["rule"] == AMOUNTS.id)


@pytest.fixture(autouse=True)
def _dirs(tmp_path):
    for name in ("s", "w", "b"):
        (tmp_path / name).mkdir()


def test_a_broken_helper_makes_the_importing_program_crash(tmp_path):
    rc, ok, err = _run(
        package_code("pkg-amount-1", "solution"),
        "pkg-amount-1",
        tmp_path / "b",
        helper_source(AMOUNTS, broken=True),
    )
    assert rc != 0 and not ok and "SyntaxError" in err


def test_the_working_helper_passes_its_self_test_and_the_broken_one_does_not_compile(tmp_path):
    good, bad = tmp_path / "sheet_helpers.py", tmp_path / "broken.py"
    good.write_text(helper_source(AMOUNTS))
    bad.write_text(helper_source(AMOUNTS, broken=True))
    assert "--self-test" in good.read_text()
    run = subprocess.run(
        [sys.executable, str(good), "--self-test"], capture_output=True, text=True, check=False
    )
    assert run.returncode == 0 and "self-test ok" in run.stdout
    compiled = subprocess.run(
        [sys.executable, "-m", "py_compile", str(bad)], capture_output=True, text=True, check=False
    )
    assert compiled.returncode != 0 and "SyntaxError" in compiled.stderr


def test_the_demo_config_trains_the_package_family_with_a_tool_using_agent():
    cfg = load_config("spreadsheetbench_package_demo")
    assert cfg.env.name == "spreadsheetbench" and cfg.env.agent == "react"
    assert cfg.env.options["sample"] == "package" and cfg.run.simulate == "auto"


# -- the scripted players ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sim():
    with (
        simulation_server() as server,
        openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0) as client,
    ):
        yield client


_TOOLS = [
    {"type": "function", "function": {"name": n, "parameters": {"type": "object", "properties": {}}}}
    for n in ("bash", "write_file")
]


def _system(body: str, files: dict[str, str]) -> str:
    index = "".join(f"- `/skill/{p}` (1 KiB): {c.splitlines()[0]}\n" for p, c in files.items())
    text = f"## Skill\n{body}\n"
    return text + (f"\n### Files of this skill\nRead them from /skill:\n{index}" if files else "")


def _user(task_id: str) -> str:
    return f"# Instruction\n{TASKS[task_id]['instruction']}\n\nInstruction type: Cell-Level Manipulation\n"


def _react(client, task_id: str, system: str, tool_results: list[str]) -> list:
    """Every turn of a ReAct rollout, feeding ``tool_results`` back in order; the calls made."""
    messages = [{"role": "system", "content": system}, {"role": "user", "content": _user(task_id)}]
    calls = []
    for turn in range(6):
        msg = (
            client.chat.completions.create(model=SIM_TARGET, messages=messages, tools=_TOOLS)
            .choices[0]
            .message
        )
        if not msg.tool_calls:
            return calls
        call = msg.tool_calls[0]
        calls.append((call.function.name, json.loads(call.function.arguments)))
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": f"c{turn}", "type": "function", "function": call.function.model_dump()}
                ],
            }
        )
        result = tool_results[turn] if turn < len(tool_results) else "[exit code 0]"
        messages.append({"role": "tool", "tool_call_id": f"c{turn}", "content": result})
    raise AssertionError(f"no final answer: {calls}")


def _written(calls: list) -> str:
    return next(args["content"] for name, args in calls if name == "write_file")


def test_the_target_reads_the_reference_skill_md_points_to_and_follows_it_only_when_it_states_the_rule(sim):
    doc = FISCAL.reference_document()
    system = _system(f"# Sheets\n{FISCAL.pointer}", {FISCAL.path: doc})
    calls = _react(sim, "pkg-fiscal-1", system, [f"[exit code 0]\n{doc}"])
    assert calls[0] == ("bash", {"cmd": f"cat /skill/{FISCAL.path}"})
    assert _written(calls) == package_code("pkg-fiscal-1", "solution")
    assert calls[-1] == ("bash", {"cmd": "python3 solution.py"})
    # The file says something else: the program is the one without the rule.
    calls = _react(sim, "pkg-fiscal-1", system, ["[exit code 0]\n# Fiscal calendar\nAsk finance.\n"])
    assert _written(calls) == package_code("pkg-fiscal-1", "wrong")


def test_the_rule_in_skill_md_alone_or_a_reference_nothing_points_to_does_not_help(sim):
    in_body = _system(f"# Sheets\n- {FISCAL.text}", {})
    calls = _react(sim, "pkg-fiscal-2", in_body, [])
    assert calls[0][0] == "write_file" and _written(calls) == package_code("pkg-fiscal-2", "wrong")
    unpointed = _system("# Sheets\n", {FISCAL.path: FISCAL.reference_document()})
    calls = _react(sim, "pkg-fiscal-2", unpointed, [])
    assert not any("cat" in str(args) for _, args in calls)
    assert _written(calls) == package_code("pkg-fiscal-2", "wrong")


def test_the_target_imports_the_helper_the_file_index_lists(sim):
    with_helper = _system("# Sheets\n", {AMOUNTS.path: helper_source(AMOUNTS)})
    assert _written(_react(sim, "pkg-amount-3", with_helper, [])) == package_code("pkg-amount-3", "solution")
    without = _system("# Sheets\n", {})
    assert _written(_react(sim, "pkg-amount-3", without, [])) == package_code("pkg-amount-3", "wrong")
    # A codegen agent (no tools) imports the helper too, but can never read a reference.
    reply = sim.chat.completions.create(
        model=SIM_TARGET,
        messages=[
            {"role": "system", "content": with_helper},
            {"role": "user", "content": _user("pkg-amount-3")},
        ],
    )
    assert package_code("pkg-amount-3", "solution") in reply.choices[0].message.content


def _analyst(
    client, *, skill: str, files: dict[str, str], ids: list[str], buffer: StepBuffer | None = None
) -> list:
    """The failure analyst's edits for a prompt built as the trainer builds it."""
    text = join_packed(skill, {p: FileSection(path=p, text=c) for p, c in files.items()})
    trajectories = [f"### Trajectory {i + 1} (id={tid})\nwrong answer" for i, tid in enumerate(ids)]
    user = analyst_user_message(
        text,
        trajectories,
        source_type="failure",
        budget=4,
        step_buffer_text=buffer.format_for_prompt() if buffer else "",
    )
    reply = client.chat.completions.create(
        model=SIM_OPTIMIZER,
        messages=[{"role": "system", "content": "analyst"}, {"role": "user", "content": user}],
        extra_headers={"X-Skillopt-Stage": "analyst"},
    )
    answer = reply.choices[0].message.content
    return json.loads(answer.split("```json\n", 1)[1].rsplit("\n```", 1)[0])["patch"]["edits"]


def test_the_optimizer_proposes_a_reference_with_a_pointer_then_a_broken_script_then_a_working_one(sim):
    edits = _analyst(sim, skill="# Sheets\n", files={}, ids=["pkg-fiscal-1", "pkg-amount-1", "pkg-fiscal-2"])
    assert {"op": "create_file", "file": FISCAL.path, "content": FISCAL.reference_document()} in edits
    assert {"op": "append", "content": FISCAL.pointer} in edits
    script = next(e for e in edits if e.get("file") == AMOUNTS.path)
    assert script["op"] == "create_file" and script["content"] == helper_source(AMOUNTS, broken=True)
    # Told by the step buffer that the check of that script failed, it proposes the working helper.
    buffer = StepBuffer(epoch=1)
    failure = {"path": AMOUNTS.path, "rule": "python-compile", "message": "line 6: SyntaxError: expected ':'"}
    buffer.add(StepEntry(step=1, action="accept", n_total=4, n_fail=4, check_failures=(failure,)))
    have = {FISCAL.path: FISCAL.reference_document()}
    skill = f"# Sheets\n\n## Rules\n{FISCAL.pointer}\n"
    edits = _analyst(sim, skill=skill, files=have, ids=["pkg-amount-2"], buffer=buffer)
    assert edits == [{"op": "create_file", "file": AMOUNTS.path, "content": helper_source(AMOUNTS)}]
    # A new epoch's buffer starts empty: it tries the broken one again (the check drops it again).
    edits = _analyst(sim, skill=skill, files=have, ids=["pkg-amount-2"])
    assert edits == [
        {"op": "create_file", "file": AMOUNTS.path, "content": helper_source(AMOUNTS, broken=True)}
    ]


def test_the_optimizer_fixes_only_what_the_package_lacks(sim):
    have = {FISCAL.path: FISCAL.reference_document(), AMOUNTS.path: helper_source(AMOUNTS)}
    # SKILL.md's own "## " headings are part of the skill (the pointer is found below them).
    skill = f"# Sheets\n\n## Workflow\n1. Explore.\n\n## Rules\n{FISCAL.pointer}\n"
    assert _analyst(sim, skill=skill, files=have, ids=["pkg-fiscal-1", "pkg-amount-1"]) == []
    # The reference without its pointer: the pointer only; a reference lacking the rule: the rule.
    assert _analyst(sim, skill="# Sheets\n", files=have, ids=["pkg-fiscal-1"]) == [
        {"op": "append", "content": FISCAL.pointer}
    ]
    stale = {FISCAL.path: "# Fiscal calendar\n\nAsk finance.\n"}
    assert _analyst(sim, skill=f"# Sheets\n{FISCAL.pointer}\n", files=stale, ids=["pkg-fiscal-3"]) == [
        {"op": "append", "file": FISCAL.path, "content": FISCAL.text}
    ]
