"""The package family of the offline simulation (issue 33, item 5): tasks that only a skill
package solves, played by the scripted target and fixed by the scripted optimizer.

The tasks and their rules are in :mod:`skillopt.testing.fixtures.spreadsheetbench.package`.
:mod:`skillopt.testing.simulation` hands this module the requests of those tasks.

* **Target, reference rule** (the fiscal calendar): a tool-using agent (SpreadsheetBench's
  ``react``) first ``cat``\\ s the reference files that SKILL.md's body points to
  (``references/….md`` named in the body *and* listed in the prompt's file index), then writes
  the right program only when a tool output states the rule. The rule in SKILL.md alone, or a
  reference nothing points to, does not help; an agent without tools (codegen) never reads a
  reference, so it answers wrong.
* **Target, script rule** (European amounts): when the file index lists the helper
  (``scripts/sheet_helpers.py``), the program imports ``parse_amount`` from ``/skill/scripts``
  and runs for real in the rollout container: a broken helper (or one without the function)
  makes it crash; without the helper the program parses by hand and answers wrong.
* **Optimizer**: for a failed reference task, ``create_file`` of the reference (or an
  ``append`` to it when it lacks the rule) plus a pointer line in SKILL.md; for a failed script
  task, ``create_file`` of the helper: a version with a syntax error until the analyst's prompt
  shows that a check of that script failed, the working one (with a ``--self-test``) after.
  The current package is the prompt's "Current Skill" (SKILL.md, then a section per file); the
  check failures are the step buffer's (so a new epoch, whose buffer starts empty, tries the
  broken one again).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cached_property
from typing import Any

from skillopt.envs.spreadsheetbench.loader import PACKAGE_SAMPLE_ROOT, SpreadsheetBenchData
from skillopt.skill.checks import RULES
from skillopt.skill.packed import split_packed
from skillopt.testing.fixtures.spreadsheetbench.package import (
    PackageRule,
    helper_source,
    load_package_catalogue,
    package_code,
    package_rules,
)

__all__ = [
    "FILES_HEADER",
    "PackageTasks",
    "check_failed",
    "current_skill",
    "listed_files",
    "package_edits",
    "package_files",
    "pointed_references",
    "react_reply",
    "skill_body",
]

#: The heading :func:`skillopt.agents.common.skill_text` puts above a package's file index.
FILES_HEADER = "### Files of this skill"
_LISTED = re.compile(r"`/skill/([^`\s]+)`")
_REFERENCE = re.compile(r"(references/[A-Za-z0-9_./-]+\.md)")
_DONE = "Done: solution.py written and run; output.xlsx checked."

#: ``stated(text, rule_text)``: whether ``text`` states the rule (its signature appears).
Stated = Callable[[str, str], bool]


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9/._ ]+", " ", text.lower()).split())


class PackageTasks:
    """The package family's tasks, found by their instruction as the simulation finds the
    sample's (normalised, first 160 characters)."""

    @cached_property
    def by_instruction(self) -> dict[str, str]:
        data = SpreadsheetBenchData(PACKAGE_SAMPLE_ROOT)
        return {_norm(data.task(tid).instruction)[:160]: tid for tid in load_package_catalogue()["tasks"]}

    def task_of(self, instruction: str) -> str | None:
        """The task whose instruction this is, or None."""
        return self.by_instruction.get(_norm(instruction)[:160])

    def rule_of(self, task_id: str) -> PackageRule | None:
        """The rule a task needs (None: not a package task)."""
        entry = load_package_catalogue()["tasks"].get(task_id)
        return package_rules()[entry["rule"]] if entry else None


# -- the target ----------------------------------------------------------------------------------


def listed_files(system: str) -> list[str]:
    """The package paths the prompt's file index lists (``scripts/x.py``, …)."""
    _, header, index = system.partition(FILES_HEADER)
    return _LISTED.findall(index) if header else []


def pointed_references(system: str) -> list[str]:
    """The reference files SKILL.md's body points to that the package holds, in the body's
    order: a harness's agent reads these when the task is about them."""
    body = system.partition(FILES_HEADER)[0]
    listed = set(listed_files(system))
    return list(dict.fromkeys(p for p in _REFERENCE.findall(body) if p in listed))


def _call(name: str, **arguments: Any) -> dict:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def react_reply(
    task_id: str,
    rule: PackageRule,
    *,
    system: str,
    tool_results: tuple[str, ...],
    stated: Stated,
    decide: Callable[[bool], bool],
) -> dict:
    """The next turn of a tool-using target on a package task: read the pointed references
    (when there are any), write ``solution.py``, run it, answer.

    Args:
        task_id: the task.
        rule: the rule it needs.
        system: the system prompt (the skill's body and file index).
        tool_results: the tool results so far (one per earlier turn).
        stated: whether a text states a rule.
        decide: turns "the package provides the rule" into "this rollout solves the task"
            (the deterministic target: itself; the noisy one: a draw).
    """
    refs = pointed_references(system)
    steps = (["read"] if refs else []) + ["write", "run", "done"]
    step = steps[min(len(tool_results), len(steps) - 1)]
    if step == "read":
        return _call("bash", cmd="cat " + " ".join(f"/skill/{p}" for p in refs))
    if step == "write":
        if rule.kind == "reference":
            provided = any(stated(text, rule.text) for text in tool_results)
        else:
            provided = rule.path in listed_files(system)
        code = package_code(task_id, "solution" if decide(provided) else "wrong")
        return _call("write_file", path="solution.py", content=code)
    if step == "run":
        return _call("bash", cmd="python3 solution.py")
    return {"text": _DONE}


def program_reply(task_id: str, rule: PackageRule, *, system: str, decide: Callable[[bool], bool]) -> str:
    """A codegen target's one program: it cannot read a reference, so only the script rule
    can be provided (by the helper the file index lists)."""
    provided = rule.kind == "script" and rule.path in listed_files(system)
    code = package_code(task_id, "solution" if decide(provided) else "wrong")
    return f"```python\n{code}\n```"


# -- the optimizer -------------------------------------------------------------------------------


#: The sections that follow "## Current Skill" in an optimizer prompt
#: (:func:`skillopt.reflection.analyst.analyst_user_message`).
_AFTER_SKILL = re.compile(r"\n\n## (?:Package Files|Edits Budget|Suggestions Budget|Update Format)\n")


def current_skill(prompt: str) -> str:
    """The prompt's current skill: the package's text (SKILL.md, then its file sections)."""
    _, header, rest = prompt.partition("## Current Skill\n")
    if not header:
        return ""
    end = _AFTER_SKILL.search(rest)
    return rest[: end.start()] if end else rest


def package_files(skill: str) -> dict[str, str]:
    """The package's editable files other than SKILL.md, from its text (the trainer's
    ``<!-- SKILL_FILE path="…" -->`` sections)."""
    return {path: section.text for path, section in split_packed(skill)[1].items()}


def skill_body(skill: str) -> str:
    """SKILL.md of the package's text (the file sections taken out)."""
    return split_packed(skill)[0]


def check_failed(prompt: str, path: str) -> bool:
    """Whether the prompt reports a failed sandbox check of the script at ``path``: the step
    buffer's "Scripts that failed their check" lines, ``- <path> [<rule>]: <message>``."""
    rules = "|".join(map(re.escape, RULES))
    return re.search(rf"^\s*- {re.escape(path)} \[(?:{rules})\]", prompt, re.M) is not None


def package_edits(rule: PackageRule, *, prompt: str, stated: Stated) -> list[dict]:
    """The edits that give the package ``rule``, against the prompt's current package (none
    when it has the rule already).

    Args:
        rule: the rule failed tasks need.
        prompt: the analyst's prompt (the current package, the step buffer's check failures).
        stated: whether a text states a rule.
    """
    skill = current_skill(prompt)
    files = package_files(skill)
    if rule.kind == "reference":
        edits = []
        if rule.path not in files:
            edits.append({"op": "create_file", "file": rule.path, "content": rule.reference_document()})
        elif not stated(files[rule.path], rule.text):
            edits.append({"op": "append", "file": rule.path, "content": rule.text})
        if rule.path not in skill_body(skill):
            edits.append({"op": "append", "content": rule.pointer})
        return edits
    if rule.path in files:
        return []  # it passed its check on the way in; a missing function is not simulated
    broken = not check_failed(prompt, rule.path)
    return [{"op": "create_file", "file": rule.path, "content": helper_source(rule, broken=broken)}]
