"""The simulated target model (``sim-target``, and ``sim-target-noisy`` for ``run.simulate:
noisy``): it answers each vendored sample task right when the skill in its prompt states the
task's rule, else wrong (:mod:`skillopt.testing.simulation` says how, env by env).
"""

from __future__ import annotations

import re

from skillopt.testing.fixtures.code import sim_code_reply
from skillopt.testing.fixtures.qa import sim_reply
from skillopt.testing.fixtures.spreadsheetbench import ScriptKind, solution_code
from skillopt.testing.fixtures.textworld import STEP_HEADER, sim_action
from skillopt.testing.noise import NOISE, draw, harmful_in
from skillopt.testing.package_sim import program_reply, react_reply
from skillopt.testing.scripted import ScriptedRequest
from skillopt.testing.sim_catalogue import (
    CATALOGUE,
    PACKAGE_TASKS,
    normalized,
    package_stated,
    pass_probability,
    simulated_pass,
)

__all__ = ["SIM_NOISY_TARGET", "SIM_TARGET", "SimulatedTarget"]

SIM_TARGET = "sim-target"
SIM_NOISY_TARGET = "sim-target-noisy"

_MISS = (
    "offline simulation: the simulated agent CLIs only know the {n} vendored sample tasks, and this "
    "request is not one of them; use real models (a provider key) for other data"
)
#: What the simulated target answers a task it has no rule for (full datasets on `serve
#: --simulate` hosts): SpreadsheetBench gets a program that saves its input unchanged, the
#: other envs a reply with an empty program and an "unknown" answer. Graded on its merits.
_GENERIC_SPREADSHEET_PROGRAM = """import openpyxl

# Placeholders: the harness strips these two lines and prepends the real paths.
INPUT_PATH = "input.xlsx"
OUTPUT_PATH = "output.xlsx"

# The offline simulation has no rule for this task: save the input unchanged.
wb = openpyxl.load_workbook(INPUT_PATH)
wb.save(OUTPUT_PATH)"""
_GENERIC_REPLY = (
    "The offline simulation has no rule for this task.\n\n```python\npass\n```\n\nAnswer: unknown"
)
_GENERIC_ACTION = "look"
_EXEC_TASK = "Spreadsheet task:"
_SKILL_PATH = re.compile(r"`([^`\s]*SKILL\.md)`")
_DONE = "Done: solution.py written and checked with run_solution.py."
#: In the code envs' CLI prompt (``_code/prompts/exec_prompt.md``).
_CODE_TASK = "Your task: write the Python function `"


def _miss() -> dict:
    return {
        "error": {
            "status": 400,
            "message": _MISS.format(n=len(CATALOGUE.tasks)),
            "type": "invalid_request_error",
        }
    }


class SimulatedTarget:
    """Responder playing the target model (see :mod:`skillopt.testing.simulation`).

    In-service agents (Chat Completions) get the script in one answer. The agent CLIs (Codex
    over Responses, Claude Code over Messages) are driven through their shell tool like a real
    agent: read the skill and the task, write ``solution.py``, run the harness's check (code
    envs: load the module), answer.
    What the script is depends on the skill the CLI read (the first tool output). A task the
    simulation has no rule for (full datasets) gets a generic answer from the in-service agents'
    target, graded on its merits; an agent CLI's request it cannot place is a clear model error
    (HTTP 400), never a silent wrong answer.
    """

    def __call__(self, req: ScriptedRequest):
        if req.model not in (SIM_TARGET, SIM_NOISY_TARGET):
            return None
        if req.api == "chat":
            return self._chat(req)
        if req.api in ("responses", "messages"):
            return self._cli(req)
        return None

    def _chat(self, req: ScriptedRequest):
        user = next((m.text for m in req.messages if m.role == "user"), "")
        game = STEP_HEADER.search(user)
        if game is not None:
            if CATALOGUE.rule_of(game.group(1)) is None:
                return {"text": _GENERIC_ACTION}  # a game outside the seed list
            # A TextWorld step: the skill is the prompt's "## Skill Knowledge" preamble.
            game_id, step = game.group(1), int(game.group(2))
            return {"text": sim_action(game_id, step, solved=_solved(req, game_id, user))}
        instruction = user.split("# Instruction", 1)[-1].split("Instruction type:", 1)[0]
        task_id = CATALOGUE.by_instruction.get(normalized(instruction)[:160])
        if task_id is not None:
            kind: ScriptKind = "solution" if _solved(req, task_id, req.system) else "wrong"
            return {"text": f"```python\n{solution_code(task_id, kind)}\n```"}
        package_task = PACKAGE_TASKS.task_of(instruction)
        if package_task is not None:
            return self._package(req, package_task)
        code_item = CATALOGUE.code_item(user)
        if code_item is not None:
            return {"text": sim_code_reply(code_item, solved=_solved(req, code_item.id, req.system))}
        found = CATALOGUE.qa_item(user)
        if found is None:
            if "# Instruction" in user and "Instruction type:" in user:  # a SpreadsheetBench task
                return {"text": f"```python\n{_GENERIC_SPREADSHEET_PROGRAM}\n```"}
            return {"text": _GENERIC_REPLY}
        env, item = found
        if req.has_tool("grep") and not req.tool_results:
            # A corpus-tools agent (OfficeQA): search the corpus once, as a real agent would.
            return {
                "tool_calls": [
                    {"name": "grep", "arguments": {"pattern": _search_words(item.task.instruction)}}
                ]
            }
        return {"text": sim_reply(env, item, user, solved=_solved(req, item.id, req.system))}

    def _package(self, req: ScriptedRequest, task_id: str):
        """A package task (:mod:`skillopt.testing.package_sim`): a tool-using agent reads,
        writes and runs; a codegen agent answers one program."""
        rule = PACKAGE_TASKS.rule_of(task_id)
        assert rule is not None

        def decide(provided: bool) -> bool:
            return _drawn(req, task_id, provided) if req.model == SIM_NOISY_TARGET else provided

        if req.has_tool("write_file"):
            return react_reply(
                task_id,
                rule,
                system=req.system,
                tool_results=req.tool_results,
                stated=package_stated,
                decide=decide,
            )
        return {"text": program_reply(task_id, rule, system=req.system, decide=decide)}

    def _cli(self, req: ScriptedRequest):
        prompt = next((m.text for m in req.messages if m.role == "user" and _EXEC_TASK in m.text), "")
        task_id = CATALOGUE.task_in(prompt.split(_EXEC_TASK, 1)[-1]) if prompt else None
        if task_id is None:
            code_prompt = next(
                (m.text for m in req.messages if m.role == "user" and _CODE_TASK in m.text), ""
            )
            return self._code_cli(req, code_prompt) if code_prompt else _miss()
        step = len(req.tool_results)
        if step == 0:
            skill = _SKILL_PATH.search(prompt)
            return {"shell": f"cat {skill.group(1) if skill else 'SKILL.md'} task.md"}
        if step == 1:
            script: ScriptKind = "solution" if _solved(req, task_id, req.tool_results[0]) else "wrong"
            code = solution_code(task_id, script)
            return {"shell": f"cat > solution.py <<'SKILLOPT_EOF'\n{code}\nSKILLOPT_EOF"}
        if step == 2:
            return {"shell": "python3 run_solution.py"}
        return {"text": _DONE}

    def _code_cli(self, req: ScriptedRequest, prompt: str):
        """A code env's CLI rollout: read the skill and task.md, write solution.py (the
        reference or the stub, by the skill just read), load it once, answer."""
        step = len(req.tool_results)
        if step == 0:
            skill = _SKILL_PATH.search(prompt)
            return {"shell": f"cat {skill.group(1) if skill else 'SKILL.md'} task.md"}
        item = CATALOGUE.code_item(req.tool_results[0])
        if item is None:
            return _miss()
        if step == 1:
            reply = sim_code_reply(item, solved=_solved(req, item.id, req.tool_results[0]))
            code = reply.split("```python\n", 1)[1].rsplit("\n```", 1)[0]
            return {"shell": f"cat > solution.py <<'SKILLOPT_EOF'\n{code}\nSKILLOPT_EOF"}
        if step == 2:
            return {"shell": "python3 -c 'import solution'"}
        return {"text": "Done: solution.py written and loads."}


def _search_words(question: str) -> str:
    """What the simulated target greps for: the question's longest word."""
    return max(re.findall(r"[A-Za-z]{4,}", question) or ["the"], key=len)


def _solved(req: ScriptedRequest, task_id: str, skill: str) -> bool:
    """Whether this rollout solves ``task_id``: by the rule for the deterministic target; for
    the noisy one, a draw by the rollout's seed against the task's pass probability."""
    if req.model != SIM_NOISY_TARGET:
        return simulated_pass(task_id, skill)
    return draw(_seed(req), task_id) < pass_probability(task_id, skill)


def _seed(req: ScriptedRequest) -> int:
    try:
        return int(req.headers.get("x-skillopt-seed", "0") or 0)
    except ValueError:
        return 0


def _drawn(req: ScriptedRequest, task_id: str, provided: bool) -> bool:
    """The noisy target on a package task: a draw against the pass probability of a task whose
    rule the package does (or does not) provide."""
    return draw(_seed(req), task_id) < NOISE.probability(task_id, provided, harmful_in(req.system))
