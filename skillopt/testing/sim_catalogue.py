"""What the offline simulation knows about the vendored sample tasks: the rule each one needs
(from the envs' ``simulation/catalogue.json`` files, :mod:`skillopt.testing.fixtures`), how a
rule counts as stated in a skill (its signature), and so whether the simulated target solves a
task under a skill. The target (:mod:`skillopt.testing.sim_target`), the optimizer
(:mod:`skillopt.testing.sim_optimizer`) and the expected scores of a noisy run
(:mod:`skillopt.testing.truth`) all decide from here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cached_property

from skillopt.envs.base import TaskItem
from skillopt.envs.registry import load_env_data
from skillopt.envs.spreadsheetbench.loader import SAMPLE_ROOT, SpreadsheetBenchData
from skillopt.testing.fixtures import catalogue, simulated_envs
from skillopt.testing.fixtures.code import code_envs
from skillopt.testing.fixtures.qa import qa_envs
from skillopt.testing.fixtures.spreadsheetbench import load_catalogue
from skillopt.testing.fixtures.textworld import game_ids as textworld_games
from skillopt.testing.fixtures.textworld import rule_key as textworld_rule
from skillopt.testing.noise import NOISE, harmful_in
from skillopt.testing.package_sim import PackageTasks

__all__ = [
    "CATALOGUE",
    "COPY_MARK",
    "PACKAGE_TASKS",
    "alias_mined_tasks",
    "normalized",
    "package_stated",
    "pass_probability",
    "rule_signature",
    "simulated_pass",
    "task_of_copy",
]

#: How many of a rule's first words make its signature.
_SIG_WORDS = 7


def normalized(text: str) -> str:
    """``text`` lower-cased, punctuation dropped (``/``, ``.`` and ``_`` kept), spaces collapsed:
    the form in which the simulation compares texts."""
    return " ".join(re.sub(r"[^a-z0-9/._ ]+", " ", text.lower()).split())


def rule_signature(rule_text: str) -> str:
    """The words whose presence makes the simulated target follow a rule."""
    return " ".join(normalized(rule_text).split()[:_SIG_WORDS])


class _Catalogue:
    """Every simulated env's rules and the rule each sample task needs, from the envs'
    ``simulation/catalogue.json`` (:mod:`skillopt.testing.fixtures`). Task ids are unique across
    the samples, so a trajectory id alone names its rule. ``aliases`` maps the id of a task
    that asks a sample question (a mined task, :func:`alias_mined_tasks`) to the sample's."""

    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}

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
        return {normalized(sample.task(tid).instruction)[:160]: tid for tid in load_catalogue()["tasks"]}

    @cached_property
    def qa_items(self) -> list[tuple[str, str, TaskItem]]:
        """``(normalised question prefix, env, item)`` of every QA sample item."""
        out = []
        for env in qa_envs():
            data = load_env_data(env)
            for split in ("train", "val", "test"):
                for item in data.split(split):
                    out.append((normalized(item.task.instruction)[:160], env, item))
        return out

    @cached_property
    def code_items(self) -> list[tuple[str, str, TaskItem]]:
        """``(normalised problem prefix, env, item)`` of every code-env sample item."""
        out = []
        for env in code_envs():
            data = load_env_data(env)
            for split in ("train", "val", "test"):
                for item in data.split(split):
                    out.append((normalized(item.task.instruction)[:160], env, item))
        return out

    def code_item(self, text: str) -> TaskItem | None:
        """The code-env sample item whose problem text appears in ``text`` (longest match)."""
        norm = normalized(text)
        hits = [(len(key), item.id, item) for key, _env, item in self.code_items if key and key in norm]
        return max(hits, key=lambda h: (h[0], h[1]))[2] if hits else None

    def qa_item(self, text: str) -> tuple[str, TaskItem] | None:
        """The QA sample item whose question appears in ``text`` (the longest match wins)."""
        norm = normalized(text)
        hits = [(len(key), env, item) for key, env, item in self.qa_items if key and key in norm]
        if not hits:
            return None
        _, env, item = max(hits, key=lambda h: h[0])
        return env, item

    def task_in(self, text: str) -> str | None:
        """The task whose instruction ``text`` starts with (whitespace and case aside)."""
        norm = normalized(text)
        return next((tid for key, tid in self.by_instruction.items() if norm.startswith(key)), None)

    def rule_of(self, task_id: str) -> str | None:
        entry = self.tasks.get(self.aliases.get(task_id, task_id))
        return entry[1] if entry else None

    def text(self, rule: str) -> str:
        return self.rules[rule]

    def stated(self, rule: str, text: str) -> bool:
        return rule_signature(self.text(rule)) in normalized(text)


#: Every simulated env's rules and tasks (read on first use).
CATALOGUE = _Catalogue()
#: The package family's tasks (:mod:`skillopt.testing.package_sim`).
PACKAGE_TASKS = PackageTasks()


def alias_mined_tasks(items: Iterable[TaskItem]) -> int:
    """Let the simulation play tasks that ask a vendored QA sample question under their own ids
    (``skillopt sleep run --simulate``: tasks mined from sessions that asked those questions):
    each one's rule becomes the sample question's, so the simulated optimizer proposes it for a
    failed one (the simulated target finds the question by its text already). Returns how many
    tasks were aliased."""
    n = 0
    for item in items:
        if item.id in CATALOGUE.tasks:
            continue
        found = CATALOGUE.qa_item(item.task.instruction)
        if found is not None:
            CATALOGUE.aliases[item.id] = found[1].id
            n += 1
    return n


def package_stated(text: str, rule_text: str) -> bool:
    """Whether ``text`` states the rule ``rule_text`` (its signature appears in it)."""
    return rule_signature(rule_text) in normalized(text)


#: A copy of a vendored task (``<id>~copy<k>``, e.g. ``bench/bench_gate.py``'s 100-item
#: selection split) plays the task itself: the same question, rule and pass probability, its
#: own draws (a rollout's seed derives from the copy's id).
COPY_MARK = "~copy"


def task_of_copy(task_id: str) -> str:
    """The vendored task a (copied) item id stands for."""
    return task_id.split(COPY_MARK, 1)[0]


def simulated_pass(task_id: str, skill: str) -> bool:
    """Whether the (deterministic) simulated target solves ``task_id`` under ``skill``."""
    rule = CATALOGUE.rule_of(task_of_copy(task_id))
    return rule is None or CATALOGUE.stated(rule, skill)


def pass_probability(task_id: str, skill: str) -> float:
    """The noisy target's probability of solving ``task_id`` under ``skill``."""
    task_id = task_of_copy(task_id)
    rule = CATALOGUE.rule_of(task_id)
    stated = None if rule is None else CATALOGUE.stated(rule, skill)
    return NOISE.probability(task_id, stated, harmful_in(skill))
