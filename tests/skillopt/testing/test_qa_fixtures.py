"""The QA simulation catalogues: every catalogued item's wrong answer is graded wrong and the
simulated right answer right, by the env's own evaluator; rules are distinct."""

from __future__ import annotations

import pytest

from skillopt.envs.registry import envs_with_agent, get_env, load_env_data
from skillopt.testing.fixtures.qa import load_catalogue, sim_reply
from skillopt.testing.simulation import rule_signature, simulated_pass


@pytest.mark.parametrize("env_name", envs_with_agent("qa"))
def test_right_answers_pass_and_wrong_ones_fail(env_name):
    env = get_env(env_name)
    data = load_env_data(env_name)
    catalogue = load_catalogue(env_name)
    items = [it for split in ("train", "val", "test") for it in data.split(split)]
    assert set(catalogue["tasks"]) <= {it.id for it in items}
    for item in items:
        task, gold = env.parse_task(item.task.attributes), env.parse_gold(item.grading.attributes)
        prompt = env.user_prompt(task)
        assert env.grade(sim_reply(env_name, item, prompt, solved=True), task, gold).hard == 1.0, item.id
        if item.id in catalogue["tasks"]:
            wrong = env.grade(sim_reply(env_name, item, prompt, solved=False), task, gold)
            assert wrong.hard == 0.0, (item.id, wrong.answer)
            assert catalogue["tasks"][item.id]["rule"] in catalogue["rules"]
            assert not simulated_pass(item.id, "")  # the empty skill states no rule
        else:
            assert simulated_pass(item.id, "")


@pytest.mark.parametrize("env_name", envs_with_agent("qa"))
def test_every_split_needs_a_rule_and_rules_are_distinct(env_name):
    catalogue = load_catalogue(env_name)
    data = load_env_data(env_name)
    for split in ("train", "val", "test"):
        assert any(it.id in catalogue["tasks"] for it in data.split(split)), split
    signatures = [rule_signature(text) for text in catalogue["rules"].values()]
    assert len(set(signatures)) == len(signatures)
    skill = "\n".join(f"- {text}" for text in catalogue["rules"].values())
    assert all(simulated_pass(tid, skill) for tid in catalogue["tasks"])
