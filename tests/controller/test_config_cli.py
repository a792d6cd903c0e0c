"""``skillopt config``: the effective config with the origin of every value, the JSON Schema of
a config file (checked by an independent validator against every shipped config), the list."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from skillopt.config import builtin_config, list_builtin_configs

REPO = Path(__file__).resolve().parents[2]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", "config", *args], cwd=REPO, capture_output=True, text=True
    )


def test_show_says_where_every_value_came_from(tmp_path):
    mine = tmp_path / "mine.yaml"
    mine.write_text("_base_: searchqa_demo.yaml\ntrain:\n  seed: 7\n")
    res = cli("show", "--config", str(mine), "--set", "train.batch_size=10", "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    origins = out["origins"]
    assert out["config"]["train"]["batch_size"] == 10 and origins["train.batch_size"] == "--set"
    assert out["config"]["train"]["seed"] == 7 and origins["train.seed"].startswith("file ")
    assert origins["train.num_epochs"] == "_base_ skillopt/envs/searchqa/configs/searchqa_demo.yaml"
    assert origins["model.optimizer"] == "_base_ skillopt/configs/_base_/default.yaml"
    assert set(origins) == {f"{s}.{k}" for s, keys in out["config"].items() for k in keys}


def test_show_prints_a_readable_listing_and_refuses_a_bad_key():
    res = cli("show", "--config", "searchqa_demo")
    assert res.returncode == 0, res.stderr
    assert (
        "\ntrain:\n" in res.stdout
        and "# file skillopt/envs/searchqa/configs/searchqa_demo.yaml" in res.stdout
    )
    bad = cli("show", "--config", "searchqa_demo", "--set", "train.batch_sise=3")
    assert bad.returncode == 2 and "did you mean 'train.batch_size'" in bad.stderr


@pytest.fixture(scope="module")
def schema() -> dict:
    res = cli("schema")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_the_schema_is_a_valid_json_schema(schema):
    jsonschema.Draft202012Validator.check_schema(schema)
    assert set(schema["properties"]) >= {"_base_", "model", "train", "env", "sandbox", "run"}


@pytest.mark.parametrize("name", list_builtin_configs())
def test_every_shipped_config_validates_against_the_schema(schema, name):
    data = yaml.safe_load(builtin_config(name).read_text())
    jsonschema.validate(data, schema)


@pytest.mark.parametrize(
    ("doc", "where"),
    [
        ({"train": {"batch_sise": 3}}, "batch_sise"),  # an unknown key
        ({"train": {"batch_size": "many"}}, "many"),  # a wrong type
        ({"optimizer": {"lr_scheduler": "weekly"}}, "weekly"),  # not an allowed value
    ],
)
def test_the_schema_catches_what_the_loader_refuses(schema, doc, where):
    with pytest.raises(jsonschema.ValidationError, match=where):
        jsonschema.validate(doc, schema)


def test_list_names_every_shipped_config():
    res = cli("list")
    assert res.returncode == 0
    assert [line.split()[0] for line in res.stdout.splitlines()] == list_builtin_configs()
