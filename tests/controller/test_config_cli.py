"""``skillopt config``: the effective config with the origin of every value, the JSON Schema of
a config file (checked by an independent validator against every shipped config), the list."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Annotated, get_args, get_origin

import jsonschema
import pytest
import yaml

from skillopt.config import SECTIONS, builtin_config, config_from_dict, list_builtin_configs
from skillopt.errors import ConfigError
from skillopt.validation import Bounds, unwrap_optional

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
        ({"train": {"batch_size": 0}}, "less than the minimum of 1"),  # a declared bound
        ({"evaluation": {"gate_alpha": 1}}, "greater than or equal to the maximum of 1"),
        ({"model": {"target_temperature": 2.5}}, "greater than the maximum of 2"),
        ({"sandbox": {"model_cache": "bogus"}}, "bogus"),  # a declared choice
    ],
)
def test_the_schema_catches_what_the_loader_refuses(schema, doc, where):
    with pytest.raises(jsonschema.ValidationError, match=where):
        jsonschema.validate(doc, schema)


def _bounded_fields() -> list[tuple[str, str, Bounds]]:
    out = []
    for section, cls in SECTIONS.items():
        for name, field in cls.model_fields.items():
            inner, _ = unwrap_optional(field.rebuild_annotation())
            found = (
                [m for m in get_args(inner)[1:] if isinstance(m, Bounds)]
                if get_origin(inner) is Annotated
                else []
            )
            out += [(section, name, b) for b in found]
    return out


def _just_outside(bounds: Bounds) -> list[float]:
    """A value just past each bound (``ge=1`` → 0, ``gt=0`` → 0, ``le=2`` → 3, ``lt=1`` → 1)."""
    out = []
    if bounds.ge is not None or bounds.gt is not None:
        out.append(bounds.ge - 1 if bounds.ge is not None else bounds.gt)
    if bounds.le is not None or bounds.lt is not None:
        out.append(bounds.le + 1 if bounds.le is not None else bounds.lt)
    return out


@pytest.mark.parametrize(("section", "name", "bounds"), _bounded_fields())
def test_every_declared_bound_binds_the_loader_and_the_schema_alike(schema, section, name, bounds):
    """One declaration, two readers: a value just past a bound is refused by the loader (naming
    the key) and by the JSON Schema an editor uses."""
    for bad in _just_outside(bounds):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({section: {name: bad}}, schema)
        data: dict = {"env": {"name": "spreadsheetbench"}}
        data.setdefault(section, {})[name] = bad
        with pytest.raises(ConfigError, match=rf"^{section}\.{name}: must be "):
            config_from_dict(data)


def test_list_names_every_shipped_config():
    res = cli("list")
    assert res.returncode == 0
    assert [line.split()[0] for line in res.stdout.splitlines()] == list_builtin_configs()
