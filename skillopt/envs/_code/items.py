"""Payloads of the code-generation envs (HumanEval, MBPP) and their raw-item functions.

``task.attributes`` (:class:`CodeTaskPayload`, what the agent sees): the problem text and the
function to write. ``grading.attributes`` (:class:`CodeGold`, trusted side only): the test
code, the reference solution. The tests never go into the agent's container or prompt.

Per-category breakdown (``task_type``): the length of the reference solution, a difficulty
proxy: ``ref_short`` / ``ref_medium`` / ``ref_long`` (code lines, blank lines and comments
aside; HumanEval counts the body: 1-3 / 4-8 / 9+, MBPP the whole function: 2-3 / 4-6 / 7+, so
each bucket holds about a third of the benchmark).
"""

from __future__ import annotations

import ast
import re
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from skillopt.envs._qa.raw import text_field
from skillopt.envs.base import TaskItem
from skillopt.types import Grading, Task

__all__ = [
    "CATEGORIES",
    "CodeGold",
    "CodeTaskPayload",
    "code_lines",
    "humaneval_item",
    "mbpp_entry_point",
    "mbpp_item",
    "mbpp_split",
]

CATEGORIES = ("ref_short", "ref_medium", "ref_long")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class CodeTaskPayload(BaseModel):
    """``task.attributes`` of a code rollout (what the agent sees)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    benchmark: Literal["humaneval", "mbpp"]
    #: HumanEval: the signature and docstring to complete; MBPP: the problem statement.
    prompt: str = Field(min_length=1, max_length=50_000)
    entry_point: str = Field(pattern=_IDENT.pattern, max_length=200)
    #: MBPP: the function's signature line (``def f(a, b):``), so the name and arity are known.
    signature: str = Field(default="", max_length=2_000)


class CodeGold(BaseModel):
    """``grading.attributes`` (trusted side only)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    test: str = Field(min_length=1, max_length=200_000)
    #: The function holding the asserts (HumanEval: ``check``); "" = asserts at module level.
    check_function: str = Field(default="", max_length=200)
    test_imports: tuple[str, ...] = ()
    #: The benchmark's reference solution (a whole module), for reference runs.
    reference: str = Field(min_length=1, max_length=200_000)


def code_lines(code: str) -> int:
    """Lines of code (blank lines and ``#`` comments aside)."""
    return sum(1 for line in code.splitlines() if line.strip() and not line.strip().startswith("#"))


def _category(lines: int, short: int, medium: int) -> str:
    return CATEGORIES[0] if lines <= short else CATEGORIES[1] if lines <= medium else CATEGORIES[2]


def humaneval_item(
    raw: Mapping[str, Any], *, options: Any = None, position: int = 0, source: str = ""
) -> TaskItem:
    """The task item of one HumanEval record (``task_id, prompt, entry_point,
    canonical_solution, test``).

    Raises:
        ValueError: a field is missing or malformed (the message names it).
    """
    task_id = text_field(raw, "task_id")
    prompt = text_field(raw, "prompt")
    entry = text_field(raw, "entry_point")
    solution = text_field(raw, "canonical_solution")
    test = text_field(raw, "test")
    if not _IDENT.match(entry):
        raise ValueError(f"field 'entry_point' is not a Python name: {entry!r}")
    kind = _category(code_lines(solution), 3, 8)
    payload = CodeTaskPayload(benchmark="humaneval", prompt=prompt, entry_point=entry)
    gold = CodeGold(test=test, check_function="check", reference=prompt + solution)
    task = Task(
        id=task_id.replace("/", "-"),
        instruction=prompt,
        attributes=payload.model_dump() | {"task_type": kind, "source_id": task_id},
    )
    return TaskItem(task=task, grading=Grading(attributes=gold.model_dump(mode="json")), task_type=kind)


def mbpp_entry_point(code: str, tests: Sequence[str]) -> str:
    """The function the tests call among those the reference defines.

    Raises:
        ValueError: none or several match.
    """
    defs = {n.name for n in ast.walk(_parse(code)) if isinstance(n, ast.FunctionDef)}
    called: list[str] = []
    for line in tests:
        for node in ast.walk(_parse(line)):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in defs
                and node.func.id not in called
            ):
                called.append(node.func.id)
    if len(called) != 1:
        raise ValueError(
            f"cannot tell the function under test: the tests call {called or 'none'} of {sorted(defs)}"
        )
    return called[0]


def _parse(code: str) -> ast.Module:
    with warnings.catch_warnings():  # MBPP's code has invalid escapes ('\\w'): not our concern
        warnings.simplefilter("ignore", SyntaxWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        return ast.parse(code)


def _signature(code: str, entry: str) -> str:
    for node in ast.walk(_parse(code)):
        if isinstance(node, ast.FunctionDef) and node.name == entry:
            return f"def {entry}({ast.unparse(node.args)}):"
    return f"def {entry}(...):"


def mbpp_split(task_id: int) -> str:
    """The official MBPP split of a task id: 1-10 prompt, 11-510 test, 511-600 validation,
    601-974 train."""
    if task_id <= 10:
        return "prompt"
    if task_id <= 510:
        return "test"
    if task_id <= 600:
        return "val"
    return "train"


def mbpp_item(
    raw: Mapping[str, Any], *, options: Any = None, position: int = 0, source: str = ""
) -> TaskItem:
    """The task item of one MBPP (sanitized) record (``task_id, prompt, code, test_list,
    test_imports``).

    Raises:
        ValueError: a field is missing or malformed (the message names it).
    """
    task_id = raw.get("task_id")
    if not isinstance(task_id, int) or isinstance(task_id, bool):
        raise ValueError(f"field 'task_id' must be an integer, got {task_id!r}")
    prompt = text_field(raw, "prompt")
    code = text_field(raw, "code")
    tests = raw.get("test_list")
    if not isinstance(tests, list) or not tests or not all(isinstance(t, str) for t in tests):
        raise ValueError("field 'test_list' must be a non-empty list of assert lines")
    imports = raw.get("test_imports") or []
    if not isinstance(imports, list) or not all(isinstance(t, str) for t in imports):
        raise ValueError("field 'test_imports' must be a list of import lines")
    try:
        entry = mbpp_entry_point(code, tests)
    except SyntaxError as exc:
        raise ValueError(f"the code or a test does not parse: {exc}") from exc
    kind = _category(code_lines(code), 3, 6)
    payload = CodeTaskPayload(
        benchmark="mbpp", prompt=prompt, entry_point=entry, signature=_signature(code, entry)
    )
    gold = CodeGold(test="\n".join(tests), test_imports=tuple(imports), reference=code)
    task = Task(
        id=f"mbpp-{task_id}",
        instruction=prompt,
        attributes=payload.model_dump() | {"task_type": kind, "source_split": mbpp_split(task_id)},
    )
    return TaskItem(task=task, grading=Grading(attributes=gold.model_dump(mode="json")), task_type=kind)
