"""Loading YAML: shipped configs, _base_ inheritance, merge, strict keys, YAML dialect, secrets."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from skillopt.config import (
    SECTIONS,
    Config,
    EnvConfig,
    builtin_config,
    config_from_dict,
    list_builtin_configs,
    load_config,
    resolve_config,
)
from skillopt.config._yaml import parse_yaml
from skillopt.errors import ConfigError
from skillopt.testing.shared_data import shared_datasets

SECRET = "sk-" + "Zq9" * 12  # shaped like a provider key


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


# ── shipped configs ───────────────────────────────────────────────────────────────────────


def test_builtin_configs_are_listed_and_resolved() -> None:
    envs = [
        "gsm8k",
        "hotpotqa",
        "humaneval",
        "livemathematicianbench",
        "math500",
        "mbpp",
        "officeqa",
        "searchqa",
        "sleep",
        "spreadsheetbench",
        "textworld",
    ]
    # sleep_cli: every mined task kind; the package family of the simulation (issue 33)
    extra = ["sleep_cli", "spreadsheetbench_package_demo"]
    assert list_builtin_configs() == sorted(
        [*(name for env in envs for name in (env, f"{env}_demo")), *extra]
    )
    path = builtin_config("spreadsheetbench_demo")
    assert path.is_file() and path.name == "spreadsheetbench_demo.yaml"
    assert builtin_config("spreadsheetbench_demo.yaml") == path
    assert builtin_config("_base_/default").name == "default.yaml"
    with pytest.raises(ConfigError, match=r"available: gsm8k, gsm8k_demo, .*spreadsheetbench_demo"):
        builtin_config("nope")
    with pytest.raises(ConfigError):
        builtin_config("../config/schema")


def test_default_yaml_lists_every_key_with_the_schema_default() -> None:
    # default.yaml is documentation; it must neither miss a key nor disagree with the schema.
    raw = parse_yaml(builtin_config("_base_/default").read_text(encoding="utf-8"))
    assert list(raw) == list(SECTIONS)
    for name, cls in SECTIONS.items():
        assert list(raw[name]) == list(cls.field_names()), name
    loaded = load_config(builtin_config("_base_/default"), ["env.name=spreadsheetbench"])
    assert loaded == resolve_config(Config(env=EnvConfig(name="spreadsheetbench")))


def test_default_yaml_alone_needs_an_env_name() -> None:
    with pytest.raises(ConfigError, match=r"env\.name.*is required.*spreadsheetbench"):
        load_config("_base_/default")


def test_spreadsheetbench_config() -> None:
    cfg = load_config("spreadsheetbench")
    env = cfg.env
    assert (env.name, env.agent, env.max_turns, env.exec_timeout, env.task_timeout, env.workers) == (
        "spreadsheetbench",
        "codegen_multi",
        30,
        120,
        600,
        24,
    )
    assert env.data_root == "" and cfg.train.train_size == 0
    assert cfg.train.num_epochs == 4  # inherited from default.yaml


def test_spreadsheetbench_demo_config() -> None:
    cfg = load_config(builtin_config("spreadsheetbench_demo"))
    assert (cfg.train.num_epochs, cfg.train.batch_size) == (2, 5)
    assert (cfg.gradient.minibatch_size, cfg.gradient.analyst_workers) == (4, 4)
    assert cfg.optimizer.slow_update_samples == 6
    assert (cfg.env.workers, cfg.env.agent, cfg.env.max_turns) == (4, "codegen_single", 30)
    assert cfg.evaluation.eval_test is True


def test_full_dataset_note_works(monkeypatch: pytest.MonkeyPatch) -> None:
    # The spreadsheetbench.yaml comment says: from the project root, --set env.data_root=../shared/...
    # (relative to wherever the shared data sits from this checkout).
    project_root = Path(__file__).resolve().parents[3]
    monkeypatch.chdir(project_root)
    shared = shared_datasets()
    assert shared is not None, "shared datasets missing"
    rel = os.path.relpath(shared / "spreadsheetbench", project_root)
    cfg = load_config("spreadsheetbench", [f"env.data_root={rel}"])
    assert Path(cfg.env.data_root) == (project_root / rel).resolve()


# ── _base_ inheritance and merge ──────────────────────────────────────────────────────────


def test_base_inheritance_deep_merges_and_lists_replace(tmp_path: Path) -> None:
    write(
        tmp_path,
        "bases/team.yaml",
        """
        _base_: ../root.yaml
        train: {batch_size: 20}
        evaluation: {leading_words: [MUST, NEVER, ONLY]}
        model:
          prices:
            gpt-5.5: {input: 1.25, output: 10}
        """,
    )
    write(
        tmp_path,
        "root.yaml",
        """
        env: {name: spreadsheetbench, workers: 3}
        train: {num_epochs: 7, batch_size: 5}
        model:
          prices:
            "*": {input: 1, output: 2}
        """,
    )
    child = write(
        tmp_path,
        "exp/child.yaml",
        """
        _base_: ../bases/team.yaml
        train: {seed: 7}
        evaluation: {leading_words: [VERIFY]}
        """,
    )
    cfg = load_config(child)
    assert (cfg.train.num_epochs, cfg.train.batch_size, cfg.train.seed) == (7, 20, 7)  # deep merge
    assert cfg.env.workers == 3
    assert cfg.evaluation.leading_words == ("VERIFY",)  # lists replace
    assert set(cfg.model.prices) == {"*", "gpt-5.5"}  # mappings merge


def test_builtin_as_base_of_a_user_file(tmp_path: Path) -> None:
    mine = write(tmp_path, "mine.yaml", "train: {batch_size: 3}\n")
    cfg = load_config(mine, base="spreadsheetbench_demo")
    assert (cfg.train.batch_size, cfg.train.num_epochs, cfg.env.agent) == (3, 2, "codegen_single")
    assert load_config(None, base="spreadsheetbench").env.agent == "codegen_multi"
    with_base = write(tmp_path, "with_base.yaml", f"_base_: {builtin_config('spreadsheetbench')}\n")
    with pytest.raises(ConfigError, match=r"declares _base_.*drop one of them"):
        load_config(with_base, base="spreadsheetbench_demo")


def test_base_cycle_is_detected_with_the_chain(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", "_base_: b.yaml\n")
    write(tmp_path, "b.yaml", "_base_: c.yaml\n")
    write(tmp_path, "c.yaml", "_base_: a.yaml\n")
    with pytest.raises(
        ConfigError, match=r"circular _base_ inheritance: .*a\.yaml -> .*b\.yaml -> .*c\.yaml -> .*a\.yaml"
    ):
        load_config(tmp_path / "a.yaml")
    write(tmp_path, "self.yaml", "_base_: self.yaml\n")
    with pytest.raises(ConfigError, match="circular"):
        load_config(tmp_path / "self.yaml")


def test_base_errors(tmp_path: Path) -> None:
    write(tmp_path, "list.yaml", "_base_: [a.yaml, b.yaml]\n")
    with pytest.raises(ConfigError, match="must be one path string"):
        load_config(tmp_path / "list.yaml")
    write(tmp_path, "gone.yaml", "_base_: gone_base.yaml\n")
    with pytest.raises(ConfigError, match="file not found"):
        load_config(tmp_path / "gone.yaml")
    with pytest.raises(ConfigError, match=r"config file not found: 'nowhere\.yaml'"):
        load_config("nowhere.yaml")


# ── strict keys in files ──────────────────────────────────────────────────────────────────


def test_unknown_key_in_file_names_file_and_suggests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # files are named relative to the cwd
    path = write(tmp_path, "typo.yaml", "env: {name: spreadsheetbench}\ntrain:\n  batch_sise: 10\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert "unknown key 'train.batch_sise' in typo.yaml; did you mean 'train.batch_size'?" in str(info.value)


def test_unknown_key_in_base_file_names_the_base(tmp_path: Path) -> None:
    write(tmp_path, "base.yaml", "env: {name: spreadsheetbench, max_turn: 3}\n")
    child = write(tmp_path, "child.yaml", "_base_: base.yaml\n")
    with pytest.raises(
        ConfigError, match=r"unknown key 'env\.max_turn' in .*base\.yaml; did you mean 'env\.max_turns'"
    ):
        load_config(child)


def test_unknown_key_without_close_match_lists_section_keys(tmp_path: Path) -> None:
    path = write(tmp_path, "x.yaml", "env: {name: spreadsheetbench}\ngradient: {zzz: 1}\n")
    with pytest.raises(ConfigError, match="valid keys of 'gradient' are: minibatch_size, merge_batch_size"):
        load_config(path)


def test_unknown_env_keys_are_not_passed_through(tmp_path: Path) -> None:
    # The reference forwarded every unknown env key to the adapter.
    path = write(tmp_path, "x.yaml", "env: {name: spreadsheetbench, shuffle_choices: true}\n")
    with pytest.raises(ConfigError, match=r"unknown key 'env\.shuffle_choices'"):
        load_config(path)


def test_unknown_section_suggests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # files are named relative to the cwd
    path = write(tmp_path, "x.yaml", "env: {name: spreadsheetbench}\ntrian: {batch_size: 1}\n")
    with pytest.raises(ConfigError, match=r"unknown key 'trian' in x\.yaml; did you mean 'train'\?"):
        load_config(path)


@pytest.mark.parametrize(
    ("flat", "structured"),
    [
        ("batch_size: 10", "train.batch_size"),
        ("edit_budget: 3", "optimizer.learning_rate"),
        ("min_edit_budget: 1", "optimizer.min_learning_rate"),
        ("optimizer_model: gpt-4o", "model.optimizer"),
        ("target_model: gpt-4o", "model.target"),
        ("skill_init: x.md", "env.skill_init"),
        ("use_gate: false", "evaluation.use_gate"),
        ("out_root: out", "run.out_root"),
    ],
)
def test_flat_legacy_key_suggests_structured(tmp_path: Path, flat: str, structured: str) -> None:
    path = write(tmp_path, "flat.yaml", f"env: {{name: spreadsheetbench}}\n{flat}\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    text = str(info.value)
    assert f"flat key '{flat.split(':')[0]}'" in text and f"use {structured}" in text


def test_section_given_as_scalar(tmp_path: Path) -> None:
    path = write(tmp_path, "x.yaml", "env: spreadsheetbench\n")
    with pytest.raises(ConfigError, match=r"section 'env' .*must be a mapping.*did you mean env\.name\?"):
        load_config(path)


def test_retired_max_analyst_rounds(tmp_path: Path) -> None:
    path = write(tmp_path, "x.yaml", "env: {name: spreadsheetbench}\ngradient: {max_analyst_rounds: 3}\n")
    with pytest.raises(ConfigError, match=r"gradient\.max_analyst_rounds .*retired.*never had an effect"):
        load_config(path)
    flat = write(tmp_path, "flat.yaml", "env: {name: spreadsheetbench}\nmax_analyst_rounds: 3\n")
    with pytest.raises(ConfigError, match="retired"):
        load_config(flat)


def test_moved_reference_keys_point_to_new_home(tmp_path: Path) -> None:
    path = write(tmp_path, "x.yaml", "env: {name: spreadsheetbench, mode: multi}\n")
    with pytest.raises(ConfigError, match=r"'env\.mode' .*use env\.agent"):
        load_config(path)
    path = write(tmp_path, "y.yaml", "env: {name: spreadsheetbench}\ntrain: {steps_per_epoch: 3}\n")
    with pytest.raises(ConfigError, match="is derived"):
        load_config(path)


def test_value_error_names_the_file_that_set_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # files are named relative to the cwd
    write(tmp_path, "base.yaml", "env: {name: spreadsheetbench}\ngradient: {merge_batch_size: 1}\n")
    child = write(tmp_path, "child.yaml", "_base_: base.yaml\ntrain: {batch_size: 3}\n")
    with pytest.raises(ConfigError, match=r"gradient\.merge_batch_size \(from base\.yaml\): must be >= 2"):
        load_config(child)


def test_missing_skill_init_file_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # files are named relative to the cwd
    # The reference silently trained from an empty skill.
    path = write(tmp_path, "x.yaml", "env: {name: spreadsheetbench, skill_init: /definitely/not/here.md}\n")
    with pytest.raises(
        ConfigError, match=r"env\.skill_init \(from x\.yaml\): file not found: /definitely/not/here\.md"
    ):
        load_config(path)


# ── secrets ───────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    "text",
    [
        f"env: {{name: spreadsheetbench}}\nmodel:\n  api_key: {SECRET}\n",
        f"env: {{name: spreadsheetbench}}\nmodel:\n  azure_openai_api_key: {SECRET}\n",
        f"env: {{name: spreadsheetbench}}\napi_key: {SECRET}\n",
        f"env: {{name: spreadsheetbench}}\nmodel:\n  password: hunter2-{SECRET}\n",
        f"env: {{name: spreadsheetbench}}\nmodel:\n  api_key: {SECRET}: broken yaml\n",
        f"env: {{name: spreadsheetbench}}\nmodel:\n  api_key: {SECRET}\n  api_key: {SECRET}\n",
    ],
)
def test_secret_value_never_appears_in_the_error(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, "leak.yaml", text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert SECRET not in message and "Zq9Zq9" not in message
    assert "hunter2" not in message


def test_secret_key_error_explains_where_keys_go(tmp_path: Path) -> None:
    path = write(tmp_path, "leak.yaml", f"env: {{name: spreadsheetbench}}\nmodel: {{api_key: {SECRET}}}\n")
    with pytest.raises(ConfigError, match=r"unknown key 'model\.api_key'.*looks like a secret.*api_key_env"):
        load_config(path)


def test_secret_shaped_value_in_a_wrong_type_field_is_redacted(tmp_path: Path) -> None:
    path = write(tmp_path, "x.yaml", f"env: {{name: spreadsheetbench}}\ntrain: {{batch_size: {SECRET}}}\n")
    with pytest.raises(ConfigError, match=r"train\.batch_size .*expected an integer") as info:
        load_config(path)
    assert SECRET not in str(info.value)


# ── YAML dialect ──────────────────────────────────────────────────────────────────────────


def test_yaml_1_1_traps_are_plain_strings(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "x.yaml",
        """
        env: {name: spreadsheetbench, split_mode: ratio, split_ratio: 2:1:7}
        optimizer: {lr_control_mode: off, longitudinal_pair_policy: 10_01}
        run: {simulate: off}
        """,
    )
    cfg = load_config(path)
    assert cfg.env.split_ratio == "2:1:7"  # YAML 1.1 would read 7267
    assert cfg.optimizer.lr_control_mode == "none"  # YAML 1.1 would read False
    assert cfg.optimizer.longitudinal_pair_policy == "changed"  # YAML 1.1 would read 1001
    assert cfg.run.simulate == "off"
    assert parse_yaml("a: 010\nb: 1e3\nc: yes\nd: 2026-01-02") == {
        "a": 10,
        "b": 1000.0,
        "c": "yes",
        "d": "2026-01-02",
    }


def test_duplicate_keys_are_errors(tmp_path: Path) -> None:
    path = write(
        tmp_path, "dup.yaml", "env: {name: spreadsheetbench}\ntrain:\n  batch_size: 1\n  batch_size: 2\n"
    )
    with pytest.raises(ConfigError, match=r"dup\.yaml: invalid YAML: .*duplicate key 'batch_size' \(line 4"):
        load_config(path)


def test_empty_sections_and_files(tmp_path: Path) -> None:
    path = write(tmp_path, "x.yaml", "env: {name: spreadsheetbench}\ntrain:\nrun: {}\n")
    assert load_config(path).train.batch_size == 40
    empty = write(tmp_path, "empty.yaml", "")
    assert load_config(empty, ["env.name=spreadsheetbench"]).env.name == "spreadsheetbench"
    scalar = write(tmp_path, "scalar.yaml", "just text\n")
    with pytest.raises(ConfigError, match="expected a mapping of sections"):
        load_config(scalar)


def test_non_utf8_file(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes("env: {name: caf\xe9}\n".encode("latin-1"))
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(path)


def test_loaded_config_round_trips(tmp_path: Path) -> None:
    cfg = load_config(
        "spreadsheetbench_demo", ["model.prices.gpt-5.5.input=1", "model.prices.gpt-5.5.output=2"]
    )
    saved = tmp_path / "config.json"
    saved.write_text(json.dumps(cfg.to_dict(redacted=True)))
    assert config_from_dict(json.loads(saved.read_text())) == cfg
