"""The template env (``skillopt/envs/_template``) stays a working starting point: its spec,
service side and data pass the same checks as a registered env's."""

from __future__ import annotations

from skillopt.envs._template.data import TemplateData
from skillopt.envs._template.env import TemplateEnv
from skillopt.envs._template.spec import SPEC
from skillopt.envs.registry import available_envs
from skillopt.types import ModelSpec, RolloutRequest, SkillVersion


def test_the_template_is_complete_but_not_registered():
    assert SPEC.name not in available_envs()
    env = TemplateEnv()
    data = TemplateData(options=SPEC.parse_options({}))
    assert env.agents == ("qa",) and env.container("qa") == "none"
    items = [it for split in ("train", "val", "test") for it in data.split(split)]
    assert len(items) == 4 and {it.task_type for it in items} <= set(data.task_types())
    assert data.initial_skill().strip()
    for it in items:
        env.validate(
            RolloutRequest(
                rollout_id=f"template/{it.id}",
                env=SPEC.name,
                agent="qa",
                task=it.task,
                grading=it.grading,
                skill=SkillVersion(),
                model=ModelSpec(provider="p", model="m"),
            )
        )
    first = data.split("train")[0]
    task, gold = env.parse_task(first.task.attributes), env.parse_gold(first.grading.attributes)
    assert env.grade("<answer>paris</answer>", task, gold).hard == 1.0
    assert env.grade("<answer>Lyon</answer>", task, gold).hard == 0.0
    assert "{question}" not in env.user_prompt(task)
