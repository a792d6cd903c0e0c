"""Offline simulation: the scripted model server plays both the target and the optimizer.

Used by the README's main job when no provider key is configured (announced as a simulation),
and by the end-to-end training tests. Everything else is real: the sandbox service, Docker
containers, the trusted grader, the trainer and its gate.

* **Target** (model ``sim-target``): it recognises the vendored sample task of every env that
  keeps a simulation catalogue in its folder (``skillopt/envs/<env>/simulation/catalogue.json``;
  :mod:`skillopt.testing.fixtures`) and answers right when the skill in its system prompt states
  the rule the task needs, else wrong, as the catalogue's family says: SpreadsheetBench answers
  are the task's reference scripts (correct, or plausibly wrong in one rule); question-answering
  envs answer the gold or the catalogue's wrong answer in ``<answer>`` tags; code envs
  (HumanEval, MBPP) the reference solution or a stub returning ``None``; TextWorld games (found
  by the step header of the prompt) are played by their walkthrough, else with ``look`` until
  the step limit. The rule counts as stated when its *signature* (its first words, case- and
  whitespace-insensitive) appears anywhere in the system prompt. Tasks without a catalogue
  entry are always solved.
* **Optimizer** (model ``sim-optimizer``): a failure analyst that proposes the catalogue rule of
  the failed tasks it is shown (the rules not yet in the skill, most frequent first), a success
  analyst that proposes generic advice that changes nothing (so the gate rejects it unless a
  real rule rides along), and merge, ranking, slow-update, meta-skill and probe answers in
  their prompts' JSON schemas. It reads the stage from the ``X-Skillopt-Stage`` header.
* **Package family** (:mod:`skillopt.testing.package_sim`; SpreadsheetBench's
  ``env.options.sample: package``): tasks solved only through a skill package, a rule stated
  in a reference file SKILL.md points to and the agent read, or a helper under ``scripts/``
  the program imports; the optimizer proposes reference files and scripts (a broken script
  first, the working one once a failed check of it is in its prompt).
* **Noisy target and optimizer** (models ``sim-target-noisy``, ``sim-optimizer-noisy``;
  ``run.simulate: noisy``): the same players, but a task passes with a probability (higher
  when the skill states its rule, lower with every harmful statement), drawn per rollout by
  the ``X-Skillopt-Seed`` header, and the optimizer also proposes decoy and harmful edits
  (:mod:`skillopt.testing.noise`). The same server plays both simulations: the run's choice of
  model decides.
"""

from __future__ import annotations

import collections
import contextlib
import json
import re
from collections.abc import Iterator, Sequence
from functools import cached_property

from skillopt.envs.base import TaskItem
from skillopt.envs.registry import load_env_data
from skillopt.envs.spreadsheetbench.loader import SAMPLE_ROOT, SpreadsheetBenchData
from skillopt.jsonx import extract_json_object
from skillopt.testing.fixtures import catalogue, simulated_envs
from skillopt.testing.fixtures.code import code_envs, sim_code_reply
from skillopt.testing.fixtures.qa import qa_envs, sim_reply
from skillopt.testing.fixtures.spreadsheetbench import ScriptKind, load_catalogue, solution_code
from skillopt.testing.fixtures.textworld import STEP_HEADER, sim_action
from skillopt.testing.fixtures.textworld import game_ids as textworld_games
from skillopt.testing.fixtures.textworld import rule_key as textworld_rule
from skillopt.testing.noise import DECOYS, HARMFUL, NOISE, draw, harmful_in
from skillopt.testing.noise import _unit as unit
from skillopt.testing.package_sim import PackageTasks, package_edits, program_reply, react_reply
from skillopt.testing.scripted import Responder, ScriptedModelServer, ScriptedRequest

__all__ = [
    "COPY_MARK",
    "SIM_ANTHROPIC_PROVIDER",
    "SIM_NOISY_OPTIMIZER",
    "SIM_NOISY_TARGET",
    "SIM_OPTIMIZER",
    "SIM_PROVIDER",
    "SIM_TARGET",
    "SimulatedOptimizer",
    "SimulatedTarget",
    "pass_probability",
    "rule_signature",
    "sim_models",
    "simulation_profiles",
    "simulation_server",
    "simulation_target_provider",
    "task_of_copy",
]

SIM_TARGET = "sim-target"
SIM_OPTIMIZER = "sim-optimizer"
SIM_NOISY_TARGET = "sim-target-noisy"
SIM_NOISY_OPTIMIZER = "sim-optimizer-noisy"
#: How often the noisy optimizer's analysts slip a harmful statement into their patch.
_HARM_RATE = 0.25
#: Provider profiles of the simulation, one per wire protocol: in-service agents and Codex
#: speak OpenAI's APIs, Claude Code speaks Anthropic Messages.
SIM_PROVIDER = "sim"
SIM_ANTHROPIC_PROVIDER = "sim-anthropic"
_SIG_WORDS = 7
_TRAJECTORY = re.compile(r"^#+ Trajectory \d+ \(id=([^)\s]+)\)", re.M)
_POOL_LINE = re.compile(r"^\[(\d+)\] .*support=(\d+)", re.M)
_GENERIC_ADVICE = (
    "Re-read the instruction once more before you write the final script.",
    "Keep the script short and readable; name variables after the columns they hold.",
    "Close every workbook you open and save exactly once at the end.",
)


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9/._ ]+", " ", text.lower()).split())


def rule_signature(rule_text: str) -> str:
    """The words whose presence makes the simulated target follow a rule."""
    return " ".join(_norm(rule_text).split()[:_SIG_WORDS])


class _Catalogue:
    """Every simulated env's rules and the rule each sample task needs, from the envs'
    ``simulation/catalogue.json`` (:mod:`skillopt.testing.fixtures`). Task ids are unique across
    the samples, so a trajectory id alone names its rule."""

    @cached_property
    def rules(self) -> dict[str, str]:
        """Rule key → text; SpreadsheetBench keys are bare, the others ``<env>:<rule>``."""
        out = dict(load_catalogue()["rules"])
        for env in (*qa_envs(), *code_envs(), *simulated_envs("textworld")):
            out.update({f"{env}:{k}": v for k, v in catalogue(env)["rules"].items()})
        return out

    @cached_property
    def tasks(self) -> dict[str, tuple[str, str]]:
        """Task id → (env, rule key)."""
        out = {tid: ("spreadsheetbench", e["rule"]) for tid, e in load_catalogue()["tasks"].items()}

        def add(tid: str, env: str, rule: str) -> None:
            if tid in out:
                raise ValueError(f"simulation catalogues: task id {tid!r} appears twice")
            out[tid] = (env, f"{env}:{rule}")

        for env in (*qa_envs(), *code_envs()):
            for tid, e in catalogue(env)["tasks"].items():
                add(tid, env, e["rule"])
        if "textworld" in simulated_envs("textworld"):
            for tid in textworld_games():
                add(tid, "textworld", str(textworld_rule(tid)))
        return out

    @cached_property
    def by_instruction(self) -> dict[str, str]:
        sample = SpreadsheetBenchData(SAMPLE_ROOT)
        return {_norm(sample.task(tid).instruction)[:160]: tid for tid in load_catalogue()["tasks"]}

    @cached_property
    def qa_items(self) -> list[tuple[str, str, TaskItem]]:
        """``(normalised question prefix, env, item)`` of every QA sample item."""
        out = []
        for env in qa_envs():
            data = load_env_data(env)
            for split in ("train", "val", "test"):
                for item in data.split(split):
                    out.append((_norm(item.task.instruction)[:160], env, item))
        return out

    @cached_property
    def code_items(self) -> list[tuple[str, str, TaskItem]]:
        """``(normalised problem prefix, env, item)`` of every code-env sample item."""
        out = []
        for env in code_envs():
            data = load_env_data(env)
            for split in ("train", "val", "test"):
                for item in data.split(split):
                    out.append((_norm(item.task.instruction)[:160], env, item))
        return out

    def code_item(self, text: str) -> TaskItem | None:
        """The code-env sample item whose problem text appears in ``text`` (longest match)."""
        norm = _norm(text)
        hits = [(len(key), item.id, item) for key, _env, item in self.code_items if key and key in norm]
        return max(hits, key=lambda h: (h[0], h[1]))[2] if hits else None

    def qa_item(self, text: str) -> tuple[str, TaskItem] | None:
        """The QA sample item whose question appears in ``text`` (the longest match wins)."""
        norm = _norm(text)
        hits = [(len(key), env, item) for key, env, item in self.qa_items if key and key in norm]
        if not hits:
            return None
        _, env, item = max(hits, key=lambda h: h[0])
        return env, item

    def task_in(self, text: str) -> str | None:
        """The task whose instruction ``text`` starts with (whitespace and case aside)."""
        norm = _norm(text)
        return next((tid for key, tid in self.by_instruction.items() if norm.startswith(key)), None)

    def rule_of(self, task_id: str) -> str | None:
        entry = self.tasks.get(task_id)
        return entry[1] if entry else None

    def text(self, rule: str) -> str:
        return self.rules[rule]

    def stated(self, rule: str, text: str) -> bool:
        return rule_signature(self.text(rule)) in _norm(text)


_CATALOGUE = _Catalogue()
_PACKAGE = PackageTasks()


def _package_stated(text: str, rule_text: str) -> bool:
    return rule_signature(rule_text) in _norm(text)


#: A copy of a vendored task (``<id>~copy<k>``, e.g. ``bench/bench_gate.py``'s 100-item
#: selection split) plays the task itself: the same question, rule and pass probability, its
#: own draws (a rollout's seed derives from the copy's id).
COPY_MARK = "~copy"


def task_of_copy(task_id: str) -> str:
    """The vendored task a (copied) item id stands for."""
    return task_id.split(COPY_MARK, 1)[0]


def simulated_pass(task_id: str, skill: str) -> bool:
    """Whether the (deterministic) simulated target solves ``task_id`` under ``skill``."""
    rule = _CATALOGUE.rule_of(task_of_copy(task_id))
    return rule is None or _CATALOGUE.stated(rule, skill)


def pass_probability(task_id: str, skill: str) -> float:
    """The noisy target's probability of solving ``task_id`` under ``skill``."""
    task_id = task_of_copy(task_id)
    rule = _CATALOGUE.rule_of(task_id)
    stated = None if rule is None else _CATALOGUE.stated(rule, skill)
    return NOISE.probability(task_id, stated, harmful_in(skill))


def sim_models(*, noisy: bool) -> tuple[str, str]:
    """The simulation's ``(target, optimizer)`` model names."""
    return (SIM_NOISY_TARGET, SIM_NOISY_OPTIMIZER) if noisy else (SIM_TARGET, SIM_OPTIMIZER)


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
            "message": _MISS.format(n=len(_CATALOGUE.tasks)),
            "type": "invalid_request_error",
        }
    }


class SimulatedTarget:
    """Responder playing the target model (see the module docstring).

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
            if _CATALOGUE.rule_of(game.group(1)) is None:
                return {"text": _GENERIC_ACTION}  # a game outside the seed list
            # A TextWorld step: the skill is the prompt's "## Skill Knowledge" preamble.
            game_id, step = game.group(1), int(game.group(2))
            return {"text": sim_action(game_id, step, solved=_solved(req, game_id, user))}
        instruction = user.split("# Instruction", 1)[-1].split("Instruction type:", 1)[0]
        task_id = _CATALOGUE.by_instruction.get(_norm(instruction)[:160])
        if task_id is not None:
            kind: ScriptKind = "solution" if _solved(req, task_id, req.system) else "wrong"
            return {"text": f"```python\n{solution_code(task_id, kind)}\n```"}
        package_task = _PACKAGE.task_of(instruction)
        if package_task is not None:
            return self._package(req, package_task)
        code_item = _CATALOGUE.code_item(user)
        if code_item is not None:
            return {"text": sim_code_reply(code_item, solved=_solved(req, code_item.id, req.system))}
        found = _CATALOGUE.qa_item(user)
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
        rule = _PACKAGE.rule_of(task_id)
        assert rule is not None

        def decide(provided: bool) -> bool:
            return _drawn(req, task_id, provided) if req.model == SIM_NOISY_TARGET else provided

        if req.has_tool("write_file"):
            return react_reply(
                task_id,
                rule,
                system=req.system,
                tool_results=req.tool_results,
                stated=_package_stated,
                decide=decide,
            )
        return {"text": program_reply(task_id, rule, system=req.system, decide=decide)}

    def _cli(self, req: ScriptedRequest):
        prompt = next((m.text for m in req.messages if m.role == "user" and _EXEC_TASK in m.text), "")
        task_id = _CATALOGUE.task_in(prompt.split(_EXEC_TASK, 1)[-1]) if prompt else None
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
        item = _CATALOGUE.code_item(req.tool_results[0])
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


def _section(text: str, title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}[^\n]*\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    return match.group(1) if match else ""


class SimulatedOptimizer:
    """Responder playing the optimizer model (see the module docstring); ``noisy``: the noisy
    simulation's, whose analysts also propose decoy and harmful edits."""

    def __init__(self, *, noisy: bool = False) -> None:
        self.noisy = noisy
        self.model = SIM_NOISY_OPTIMIZER if noisy else SIM_OPTIMIZER

    def __call__(self, req: ScriptedRequest):
        if req.model != self.model:
            return None
        stage = req.headers.get("x-skillopt-stage", "")
        user = req.last_user_text
        handler = getattr(self, f"_{stage}", None)
        body = handler(user, req) if handler else {"reasoning": f"no simulated answer for stage {stage!r}"}
        return {"text": "```json\n" + json.dumps(body, ensure_ascii=False) + "\n```"}

    # -- analysts ----------------------------------------------------------------------------

    def _analyst(self, user: str, req: ScriptedRequest) -> dict:
        skill = _section(user, "Current Skill")
        ids = _TRAJECTORY.findall(user)
        budget = int(m.group(1)) if (m := re.search(r"L=(\d+)", user)) else 4
        if "## Failed Trajectories" in user or "## Original" in user:
            counts = collections.Counter(
                r for r in (_CATALOGUE.rule_of(i) for i in ids) if r and not _CATALOGUE.stated(r, skill)
            )
            edits = [
                {"op": "append", "content": f"- {_CATALOGUE.text(rule)}"}
                for rule, _ in counts.most_common(budget)
            ]
            package = collections.Counter(r for r in map(_PACKAGE.rule_of, ids) if r is not None)
            summary = []
            for prule, n in package.most_common():
                fix = package_edits(prule, prompt=user, stated=_package_stated)
                if fix:
                    edits += fix
                    summary.append(
                        {
                            "failure_type": "rule_missing",
                            "count": n,
                            "description": f"tasks need the {prule.kind} {prule.path}: {prule.text}",
                        }
                    )
            if self.noisy:
                covered = [i for i in ids if (r := _CATALOGUE.rule_of(i)) and _CATALOGUE.stated(r, skill)]
                edits += self._noise_edits(ids, skill, decoy=bool(covered))
            return {
                "batch_size": len(ids),
                "failure_summary": [
                    {
                        "failure_type": "rule_missing",
                        "count": n,
                        "description": f"tasks need the rule '{rule.rsplit(':', 1)[-1]}'",
                    }
                    for rule, n in counts.most_common()
                ]
                + summary,
                "patch": {
                    "reasoning": f"{len(ids)} failures; {len(counts) + len(summary)} missing rules",
                    "edits": edits,
                },
            }
        # Deterministic (a resumed run must get the same answer): chosen by the ids shown.
        if self.noisy:
            success_edits = self._noise_edits(ids, skill, decoy=True)
        else:
            advice = _GENERIC_ADVICE[sum(map(ord, "".join(ids))) % len(_GENERIC_ADVICE)]
            success_edits = [{"op": "append", "content": f"- {advice}"}] if advice not in skill else []
        return {
            "batch_size": len(ids),
            "success_patterns": ["the agent followed the stated rules"],
            "patch": {"reasoning": "successful runs share careful reading", "edits": success_edits},
        }

    @staticmethod
    def _noise_edits(ids: list[str], skill: str, *, decoy: bool) -> list[dict]:
        """The noisy analyst's extra edits, fixed by the trajectories shown: a decoy (it
        explains a failure the skill covers already, or a success, by advice that changes
        nothing) and, one time in four, a harmful statement."""
        out = []
        norm = _norm(skill)
        if decoy:
            fresh = [d for d in DECOYS if _norm(d) not in norm]
            if fresh:
                out.append({"op": "append", "content": f"- {fresh[int(unit('decoy', *ids) * len(fresh))]}"})
        if unit("harm", *ids) < _HARM_RATE:
            fresh = [h for h in HARMFUL if _norm(h) not in norm]
            if fresh:
                out.append({"op": "append", "content": f"- {fresh[int(unit('which', *ids) * len(fresh))]}"})
        return out

    # -- aggregate / select --------------------------------------------------------------------

    def _merge(self, user: str, req: ScriptedRequest) -> dict:
        seen: dict[str, dict] = {}
        for block in re.findall(r"```json\n(.*?)\n```", user, re.S):
            try:
                pools = json.loads(block)
            except json.JSONDecodeError:
                continue
            for pool in pools if isinstance(pools, list) else [pools]:
                for edit in pool.get("edits", []) if isinstance(pool, dict) else []:
                    key = _edit_key(edit)
                    if key in seen:
                        seen[key]["support_count"] = seen[key].get("support_count", 1) + edit.get(
                            "support_count", 1
                        )
                    else:
                        seen[key] = dict(edit)
        return {"reasoning": f"deduplicated to {len(seen)} edits", "edits": list(seen.values())}

    def _ranking(self, user: str, req: ScriptedRequest) -> dict:
        pool = [(int(i), int(s)) for i, s in _POOL_LINE.findall(user)]
        order = [i for i, _ in sorted(pool, key=lambda p: (-p[1], p[0]))]
        return {"reasoning": "highest support first", "selected_indices": order}

    def _lr_autonomous(self, user: str, req: ScriptedRequest) -> dict:
        return {"learning_rate": 2, "reasoning": "moderate step", "confidence": "medium", "risk_notes": ""}

    def _rewrite(self, user: str, req: ScriptedRequest) -> dict:
        skill = _section(user, "Current Skill").strip()
        return {"reasoning": "kept the skill", "change_summary": [], "new_skill": skill + "\n"}

    # -- epoch stages ----------------------------------------------------------------------------

    def _slow_update(self, user: str, req: ScriptedRequest) -> dict:
        regressions = user.count("regressed")
        return {
            "reasoning": f"{regressions} mentions of regressions in the comparison",
            "slow_update_content": "Apply every rule of this skill on every task before you write the final script.",
        }

    def _meta_skill(self, user: str, req: ScriptedRequest) -> dict:
        return {
            "reasoning": "concrete rules moved the score; generic advice did not",
            "meta_skill_content": "- Prefer concrete do/don't rules tied to a failure pattern over generic advice.",
        }

    def _probe(self, user: str, req: ScriptedRequest) -> dict:
        # The diagnostic-design prompt asks for a "diagnostic_instruction" field; the probe
        # analyst's prompt only talks about the instruction (and wants a patch).
        if '"diagnostic_instruction"' in req.system:
            return {
                "reasoning": "ask the target to state its assumptions",
                "diagnostic_instruction": "Before the code, add a comment that lists the sheets and header cells you rely on.",
            }
        return self._analyst(user.replace("## Original", "## Failed Trajectories"), req)

    def _appendix_consolidate(self, user: str, req: ScriptedRequest) -> dict:
        obj = extract_json_object(user) or {}
        return {"reasoning": "unchanged", "notes": obj.get("notes", [])}


def _edit_key(edit: dict) -> str:
    """What makes two proposed edits the same for the merge: the content, and for an edit of
    another file than SKILL.md (or a whole-file one) the file and the operation too."""
    key = _norm(str(edit.get("content", "")))
    file, op = edit.get("file") or "SKILL.md", edit.get("op")
    return key if file == "SKILL.md" and op not in ("create_file", "delete_file") else f"{file}|{op}|{key}"


def simulation_profiles(server: ScriptedModelServer) -> list[str]:
    """``--provider`` specs that point a sandbox host at ``server`` (both wire protocols)."""
    return [
        f"{SIM_PROVIDER}=openai_compatible,base_url={server.base_url},max_retries=0",
        f"{SIM_ANTHROPIC_PROVIDER}=anthropic,base_url={server.anthropic_base_url},max_retries=0",
    ]


def simulation_target_provider(api: str) -> str:
    """The simulation's provider profile for an agent speaking ``api`` (``openai`` or
    ``anthropic``; see the env's ``agent_apis``)."""
    return SIM_ANTHROPIC_PROVIDER if api == "anthropic" else SIM_PROVIDER


@contextlib.contextmanager
def simulation_server(*, before: Sequence[Responder] = (), **kwargs) -> Iterator[ScriptedModelServer]:
    """A scripted model server answering as the simulated target and optimizer.

    Args:
        before: responders asked first (a test's provider faults: an answer, or ``None`` to
            let the simulation answer).
        kwargs: for :class:`ScriptedModelServer`.
    """
    with ScriptedModelServer(
        responders=[
            *before,
            SimulatedTarget(),
            SimulatedOptimizer(),
            SimulatedOptimizer(noisy=True),
            _unknown_model,
        ],
        **kwargs,
    ) as server:
        yield server


def _unknown_model(req: ScriptedRequest) -> dict:
    """Anything the simulation does not play gets a clear model error (not test-harness words)."""
    return {
        "error": {
            "status": 400,
            "type": "invalid_request_error",
            "message": (
                f"offline simulation: no simulated model {req.model!r} ({req.api} API); the simulation plays "
                f"{SIM_TARGET!r} (the target) and {SIM_OPTIMIZER!r} (the optimizer), and their noisy "
                f"versions {SIM_NOISY_TARGET!r} and {SIM_NOISY_OPTIMIZER!r}"
            ),
        }
    }
