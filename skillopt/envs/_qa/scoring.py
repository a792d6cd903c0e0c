"""``skillopt score``: grade one response to one raw item of a question-answering env.

The item goes through the env's own raw-item function (the one its loader uses) and the
response through its trusted evaluator, so the numbers are those a rollout would get.

Usage::

    score_item("gsm8k", {"question": "...", "answer": "... #### 72"}, "<answer>72</answer>")
    # {"env": "gsm8k", "hard": 1.0, "soft": 1.0, "answer": "72", ...}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skillopt.envs._qa.env import QAEnv
from skillopt.envs.registry import env_spec, get_env, resolve
from skillopt.errors import InvalidRequest

__all__ = ["scorable_envs", "score_item"]


def scorable_envs() -> list[str]:
    """The registered envs ``skillopt score`` can grade (those with a raw-item function)."""
    from skillopt.envs.registry import available_envs

    return [name for name in available_envs() if env_spec(name).raw_item]


def score_item(env: str, raw: Mapping[str, Any], response: str) -> dict[str, Any]:
    """Grade ``response`` against ``raw`` (one item exactly as in the env's data files).

    Returns:
        ``env``, ``id``, ``task_type``, ``hard``, ``soft``, ``answer`` (the extracted answer;
        also as ``predicted_answer``, the result rows' name), ``fail_reason`` and the env's
        metrics (``em``, ``f1``, ``sub_em``, ``gold``...).

    Raises:
        InvalidRequest: unknown env, an env without raw items, or a malformed item (the
            message names the field).
    """
    spec = env_spec(env)
    if not spec.raw_item:
        raise InvalidRequest(
            f"env {env!r} has no question-answer items to score; scorable: {', '.join(scorable_envs())}"
            + (
                " (grade a SpreadsheetBench workbook with: skillopt grade)"
                if env == "spreadsheetbench"
                else ""
            )
        )
    options = spec.parse_options(spec.score_options)
    try:
        item = resolve(spec.raw_item)(dict(raw), options=options, position=0, source="item")
    except (ValueError, TypeError, KeyError) as exc:
        raise InvalidRequest(f"{env}: not an item of this env: {exc}") from None
    service_env = get_env(env)
    assert isinstance(service_env, QAEnv)
    task = service_env.parse_task(item.task.attributes)
    gold = service_env.parse_gold(item.grading.attributes)
    verdict = service_env.grade(response, task, gold)
    return {
        "env": env,
        "id": item.id,
        "task_type": item.task_type,
        "hard": verdict.hard,
        "soft": verdict.soft,
        "answer": verdict.answer,
        "predicted_answer": verdict.answer,
        "fail_reason": verdict.fail_reason,
        **dict(verdict.metrics),
    }
