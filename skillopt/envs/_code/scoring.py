"""``skillopt score`` for the code envs: grade one response (the model's whole reply, or a bare
program) to one raw item, in fresh grading containers, exactly as a rollout would.

The caller supplies the grading sandboxes (``fresh``: the controller opens them on the local
Docker engine, see :mod:`sandbox.runtime.fresh`), so this module stays free of Docker.

Usage::

    with local_grading_sandboxes() as fresh:
        score_code_item("mbpp", raw, "```python\\ndef f(x): ...\\n```", fresh)
        # {"env": "mbpp", "hard": 1.0, "soft": 1.0, "answer": "<the program>", ...}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skillopt.agents.codegen import extract_code
from skillopt.envs._code.env import CodeEnv, assemble_program
from skillopt.envs._code.grading import FreshSandbox, grade_program
from skillopt.envs.registry import env_spec, get_env, resolve
from skillopt.errors import InvalidRequest

__all__ = ["is_code_env", "score_code_item"]


def is_code_env(env: str) -> bool:
    """Whether ``env`` is graded by running code (HumanEval, MBPP)."""
    return isinstance(get_env(env), CodeEnv)


def score_code_item(
    env: str, raw: Mapping[str, Any], response: str, fresh: FreshSandbox, *, timeout_s: float = 60.0
) -> dict[str, Any]:
    """Grade ``response`` against ``raw`` (one item exactly as in the env's data files).

    Returns:
        ``env``, ``id``, ``task_type``, ``hard`` (pass@1), ``soft`` (share of tests passed),
        ``answer``/``predicted_answer`` (the program graded), ``fail_reason``, ``n_tests``,
        ``n_pass``, ``grading_mode`` and ``cases`` (per test: name, ok, reason).

    Raises:
        InvalidRequest: not a code env, or a malformed item (the message names the field).
        InfraError: a grading container could not be had.
    """
    spec = env_spec(env)
    service_env = get_env(env)
    if not isinstance(service_env, CodeEnv):
        raise InvalidRequest(f"env {env!r} is not a code env")
    try:
        item = resolve(spec.raw_item)(dict(raw), options=spec.parse_options({}), position=0, source="item")
    except (ValueError, TypeError, KeyError, SyntaxError) as exc:
        raise InvalidRequest(f"{env}: not an item of this env: {exc}") from None
    task = service_env.parse_task(item.task.attributes)
    gold = service_env.parse_gold(item.grading.attributes)
    code = extract_code(response)
    out: dict[str, Any] = {"env": env, "id": item.id, "task_type": item.task_type}
    if not code.strip():
        return {
            **out,
            "hard": 0.0,
            "soft": 0.0,
            "answer": "",
            "predicted_answer": "",
            "fail_reason": "empty-code-block",
            "cases": [],
        }
    program = assemble_program(code, task)
    verdict = grade_program(
        fresh,
        program,
        service_env.plan(task, gold),
        entry_point=task.entry_point,
        reference=gold.reference,
        timeout_s=timeout_s,
    )
    return {
        **out,
        "hard": verdict.hard,
        "soft": verdict.soft,
        "answer": program,
        "predicted_answer": program,
        "fail_reason": verdict.fail_reason,
        **dict(verdict.metrics),
        "cases": [{"name": c.name, "ok": c.ok, "reason": c.reason} for c in verdict.cases],
    }
