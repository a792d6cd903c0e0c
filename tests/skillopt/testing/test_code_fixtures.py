"""The code-env simulation catalogues: the simulated reply to a catalogued item is the
reference solution when the skill states its rule and a stub otherwise; rules are distinct and
every split needs one (the reply's grading is checked in tests/skillopt/envs/codegen)."""

from __future__ import annotations

import pytest

from skillopt.agents.codegen import extract_code
from skillopt.envs.registry import get_env, load_env_data
from skillopt.testing.fixtures.code import code_envs, load_catalogue, sim_code_reply
from skillopt.testing.sim_catalogue import CATALOGUE, rule_signature, simulated_pass


@pytest.mark.parametrize("env_name", code_envs())
def test_every_split_needs_a_rule_and_rules_are_distinct(env_name):
    catalogue = load_catalogue(env_name)
    data = load_env_data(env_name)
    ids = {it.id for split in ("train", "val", "test") for it in data.split(split)}
    assert set(catalogue["tasks"]) <= ids
    for split in ("train", "val", "test"):
        assert any(it.id in catalogue["tasks"] for it in data.split(split)), split
        assert any(it.id not in catalogue["tasks"] for it in data.split(split)), split
    signatures = [rule_signature(text) for text in catalogue["rules"].values()]
    assert len(set(signatures)) == len(signatures)
    skill = "\n".join(f"- {text}" for text in catalogue["rules"].values())
    assert all(simulated_pass(tid, skill) and not simulated_pass(tid, "") for tid in catalogue["tasks"])


@pytest.mark.parametrize("env_name", code_envs())
def test_replies_are_the_reference_or_a_stub(env_name):
    for item in load_env_data(env_name).split("val"):
        right = extract_code(sim_code_reply(item, solved=True))
        assert right.strip() == str(item.grading.attributes["reference"]).strip()
        wrong = extract_code(sim_code_reply(item, solved=False))
        assert wrong.startswith(f"def {item.task.attributes['entry_point']}(") and "return None" in wrong


@pytest.mark.parametrize("env_name", code_envs())
def test_the_simulated_target_places_every_code_prompt(env_name):
    env = get_env(env_name)
    for split in ("train", "val", "test"):
        for item in load_env_data(env_name).split(split):
            prompt = env.user_prompt(env.parse_task(item.task.attributes))
            found = CATALOGUE.code_item(prompt)
            assert found is not None and found.id == item.id
