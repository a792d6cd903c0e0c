"""TextWorld's pieces that need no container: the reply parser, the seed list and its game
cache, the splits, and the request checks. The game itself is played in a container in
``tests/sandbox/test_textworld_rollouts.py``."""

from __future__ import annotations

import dataclasses
import json

import pytest

from skillopt.envs.registry import get_env, load_env_data
from skillopt.envs.textworld.agents import MAX_ACTION_CHARS, clean_action, parse_reply
from skillopt.envs.textworld.games import GAMES_FILE, GameSpec, ensure_game, load_game_specs
from skillopt.errors import ConfigError, InvalidRequest
from skillopt.types import File, ModelSpec, RolloutRequest, SkillVersion, TestCase


@pytest.mark.parametrize(
    ("reply", "action"),
    [
        ("<think>north first</think><action>go north</action>", "go north"),
        ("<action>take coin</action> and then <action>go west</action>", "go west"),  # the last tag
        ("I would go north.", "look"),  # no tag: look (reference §5.2)
        ("", "look"),
        ("<action>   </action>", "look"),
        ("<action>\n  open fridge \n take milk</action>", "open fridge"),  # one line only
        ("<action>'examine cookbook'</action>", "examine cookbook"),
        ("<action>go\x00 north\x1b[2J</action>", "go north[2J"),  # control characters dropped
        ("<ACTION>Go  East</ACTION>", "Go East"),
    ],
)
def test_the_reply_parser_takes_one_clean_action(reply, action):
    assert parse_reply(reply)[0] == action


def test_a_long_action_is_cut_and_reasoning_is_kept():
    action, reasoning = parse_reply(f"<think>plan</think><action>{'x' * 500}</action>")
    assert len(action) == MAX_ACTION_CHARS and reasoning == "plan"
    assert clean_action("$(rm -rf /); take coin") == "$(rm -rf /); take coin"  # data, never a shell word


def test_the_seed_list_has_unique_ids_and_every_category_in_every_split():
    specs = load_game_specs(GAMES_FILE)
    assert len({s.id for s in specs}) == len(specs) == 18
    cats = {s.category for s in specs}
    for split in ("train", "val", "test"):
        assert {s.category for s in specs if s.split == split} == cats
    assert cats == set(load_env_data("textworld").task_types())


def test_a_bad_seed_list_is_a_config_error(tmp_path):
    bad = tmp_path / "games.json"
    bad.write_text(json.dumps({"games": [{"challenge": "tw-nope", "level": 1, "seed": 1, "split": "train"}]}))
    with pytest.raises(ConfigError, match="unknown challenge"):
        load_env_data("textworld", data_root=str(tmp_path))
    game = {"challenge": "tw-coin_collector", "level": 1, "seed": 1, "split": "train"}
    bad.write_text(json.dumps({"games": [game, game]}))
    with pytest.raises(ConfigError, match="lists games twice"):
        load_env_data("textworld", data_root=str(tmp_path))
    bad.write_text(json.dumps({"games": [{**game, "split": "extra"}]}))
    with pytest.raises(ConfigError, match="split 'extra'"):
        load_env_data("textworld", data_root=str(tmp_path))
    with pytest.raises(ConfigError, match="tw-cooking levels"):
        GameSpec(challenge="tw-cooking", level=9, seed=1, split="train")


def test_a_game_is_generated_once_per_seed_and_reproducibly(tmp_path):
    spec = GameSpec(challenge="tw-coin_collector", level=1, seed=101, split="train")
    a = ensure_game(spec, tmp_path / "a")
    again = ensure_game(spec, tmp_path / "a")  # read from the cache
    b = ensure_game(spec, tmp_path / "b")  # generated afresh elsewhere
    assert again == a and (a.folder / "meta.json").is_file() and a.generation_s > 0
    assert a.z8.read_bytes() == b.z8.read_bytes() and a.walkthrough == b.walkthrough == ("take coin",)
    assert a.max_score == 1 and "coin" in a.objective
    assert [p.name for p in a.folder.parent.iterdir()] == [spec.id]  # no temporary folder left


def test_a_ratio_split_pools_the_seed_list(tmp_path):
    data = load_env_data("textworld", split_mode="ratio", split_ratio="1:1:1", split_seed=3)
    ids = [it.id for s in ("train", "val", "test") for it in data.split(s)]
    assert len(ids) == len(set(ids)) == 18 and data.describe()["counts"] == {"train": 6, "val": 6, "test": 6}


def _request(item, **changes) -> RolloutRequest:
    req = RolloutRequest(
        rollout_id="t/1",
        env="textworld",
        agent="play",
        task=item.task,
        grading=item.grading,
        skill=SkillVersion(content=""),
        model=ModelSpec(provider="p", model="m"),
    )
    return dataclasses.replace(req, **changes)


def test_malformed_game_payloads_are_refused_with_the_field_named():
    env = get_env("textworld")
    item = load_env_data("textworld").split("val")[0]
    env.validate(_request(item))
    task, grading = item.task, item.grading
    files = {f.name: f for f in task.cases[0].files}
    cases = [
        (dataclasses.replace(task, cases=()), grading, "exactly one case 'game'"),
        (
            dataclasses.replace(task, cases=(TestCase(name="game", files=(files["game.z8"],)),)),
            grading,
            "must hold exactly",
        ),
        (
            dataclasses.replace(
                task,
                cases=(
                    TestCase(
                        name="game", files=(files["game.json"], File(name="game.z8", content=b"\x05abc"))
                    ),
                ),
            ),
            grading,
            "Z-machine version 8",
        ),
        (task, dataclasses.replace(grading, attributes={"walkthrough": []}), "max_score"),
        (task, dataclasses.replace(grading, cases=(TestCase(name="game"),)), "grading holds no files"),
        (
            dataclasses.replace(task, attributes={**task.attributes, "history_length": "all"}),
            grading,
            r"task\.attributes\.history_length",
        ),
    ]
    for t, g, message in cases:
        with pytest.raises(InvalidRequest, match=message):
            env.validate(_request(item, task=t, grading=g))
