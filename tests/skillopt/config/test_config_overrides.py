"""``--set key=value`` overrides: every field type, coercion, and errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from skillopt.config import Config, load_config, with_overrides
from skillopt.errors import ConfigError

SECRET = "sk-" + "Qx7" * 12


def sb(*overrides: str) -> Config:
    return load_config("spreadsheetbench", list(overrides))


def test_int_float_bool_str_overrides() -> None:
    cfg = sb("train.batch_size=10", "train.num_epochs=3.0", "evaluation.gate_mixed_weight=0.25", "env.cpus=2")
    assert cfg.train.batch_size == 10 and cfg.train.num_epochs == 3
    assert cfg.evaluation.gate_mixed_weight == 0.25 and cfg.env.cpus == 2.0
    cfg = sb("gradient.failure_only=true", "evaluation.use_gate=no", "run.plot=0", "run.progress=False")
    assert cfg.gradient.failure_only is True and cfg.evaluation.use_gate is False
    assert cfg.run.plot is False and cfg.run.progress is False
    # String fields take the text as written: no shell quoting needed.
    cfg = sb("model.target=4", "model.optimizer=gpt-4o", "env.split_ratio=3:1:6", "sandbox.runtime=runsc")
    assert (cfg.model.target, cfg.model.optimizer, cfg.env.split_ratio) == ("4", "gpt-4o", "3:1:6")
    assert cfg.sandbox.runtime == "runsc"
    assert sb("model.reasoning_effort=").model.reasoning_effort == ""


def test_enum_overrides_are_normalised() -> None:
    cfg = sb(
        "optimizer.lr_scheduler=linear",
        "optimizer.lr_control_mode=auto",
        "optimizer.skill_update_mode=full_rewrite",
        "optimizer.longitudinal_pair_policy=00_11",
        "run.simulate=off",
        "run.log_level=DEBUG",
    )
    opt = cfg.optimizer
    assert (opt.lr_scheduler, opt.lr_control_mode, opt.skill_update_mode) == (
        "linear",
        "autonomous",
        "full_rewrite_minibatch",
    )
    assert opt.longitudinal_pair_policy == "unchanged"
    assert (cfg.run.simulate, cfg.run.log_level) == ("off", "debug")


def test_list_overrides() -> None:
    assert sb("evaluation.leading_words=MUST,NEVER").evaluation.leading_words == ("MUST", "NEVER")
    assert sb("evaluation.leading_words=[MUST, NEVER]").evaluation.leading_words == ("MUST", "NEVER")
    assert sb("sandbox.endpoints=[a:1,b:2]").sandbox.endpoints == ("a:1", "b:2")
    assert sb("sandbox.endpoints=a:1,b:2").sandbox.endpoints == ("a:1", "b:2")
    assert sb("sandbox.endpoints=[[::1]:50051, unix:/run/s.sock]").sandbox.endpoints == (
        "[::1]:50051",
        "unix:/run/s.sock",
    )
    assert sb("sandbox.endpoints=a:1", "sandbox.endpoints=[]").sandbox.endpoints == ()
    assert sb("sandbox.endpoints=a:1", "sandbox.endpoints=").sandbox.endpoints == ()


def test_optional_overrides() -> None:
    cfg = sb("model.optimizer_temperature=0.7", "evaluation.max_regressions=2")
    assert cfg.model.optimizer_temperature == 0.7 and cfg.evaluation.max_regressions == 2
    cfg = load_config(
        "spreadsheetbench", ["model.optimizer_temperature=0.7", "model.optimizer_temperature=null"]
    )
    assert cfg.model.optimizer_temperature is None
    assert sb("evaluation.max_regressions=~").evaluation.max_regressions is None


def test_mapping_overrides() -> None:
    cfg = sb(
        "model.prices={gpt-5.5: {input: 1.25, output: 10}}",
        "model.prices.gpt-4o-mini.input=0.15",
        "model.prices.gpt-4o-mini.output=0.6",
    )
    # An unset cache price (None) is priced as input.
    assert cfg.model.price_pairs() == {
        "gpt-5.5": (1.25, 10.0, None, None),
        "gpt-4o-mini": (0.15, 0.6, None, None),
    }
    from skillopt.models.roles import PriceTable
    from skillopt.types import Usage

    cached_use = Usage(prompt_tokens=1_000_000, cached_input_tokens=600_000, cache_write_input_tokens=100_000)
    assert PriceTable(prices=cfg.model.price_pairs()).cost("gpt-5.5", cached_use) == 1.25
    cached = sb("model.prices={m: {input: 3, output: 15, cached_input: 0.3, cache_write: 3.75}}")
    assert cached.model.price_pairs() == {"m": (3.0, 15.0, 0.3, 3.75)}
    cfg = sb("model.prices.*={input: 1, output: 1}")
    assert set(cfg.model.prices) == {"*"}
    with pytest.raises(ConfigError, match=r"model\.prices\.m .*missing output"):
        sb("model.prices.m.input=1")
    with pytest.raises(ConfigError, match=r"train\.batch_size is not a mapping"):
        sb("train.batch_size.x=1")


def test_override_beats_file_and_later_override_wins(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    # A _base_ that is no file next to this one names a shipped config.
    path.write_text("_base_: spreadsheetbench.yaml\ntrain: {batch_size: 5}\n")
    assert load_config(path, ["train.batch_size=6", "train.batch_size=7"]).train.batch_size == 7


@pytest.mark.parametrize(
    ("override", "needles"),
    [
        ("train.batch_size=abc", ["train.batch_size (from --set)", "expected an integer", "'abc'"]),
        ("train.batch_size=1.5", ["expected an integer", "1.5"]),
        ("gradient.failure_only=maybe", ["gradient.failure_only", "expected a boolean", "'maybe'"]),
        ("evaluation.gate_mixed_weight=high", ["expected a number", "'high'"]),
        ("evaluation.gate_mixed_weight=1.5", ["must be in [0, 1]"]),
        ("model.optimizer_temperature=warm", ["expected a number, or null", "'warm'"]),
        ("evaluation.leading_words={a: 1}", ["expected a list of strings"]),
        ("sandbox.endpoints=[localhost]", ['expected "host:port"']),
        ("optimizer.lr_scheduler=cosin", ["allowed: constant, linear, cosine, autonomous"]),
        ("gradient.merge_batch_size=1", ["must be >= 2"]),
        ("train.batch_size=null", ["expected an integer, got null"]),
        ("env.skill_init=no/such/skill.md", ["env.skill_init (from --set): file not found"]),
    ],
)
def test_bad_override_values(override: str, needles: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        sb(override)
    for needle in needles:
        assert needle in str(info.value)


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        ("train.batch_sise=3", "unknown key 'train.batch_sise' in --set; did you mean 'train.batch_size'?"),
        ("trian.batch_size=3", "did you mean 'train'?"),
        ("batch_size=3", "use train.batch_size"),
        ("edit_budget=3", "use optimizer.learning_rate"),
        ("env=spreadsheetbench", "'env' is a section"),
        ("gradient.max_analyst_rounds=2", "retired"),
        ("env.out_root=/tmp/x", "use run.out_root"),
        ("train.batch_size", "expected KEY=VALUE"),
        ("=3", "expected KEY=VALUE"),
    ],
)
def test_bad_override_keys(override: str, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        sb(override)
    assert needle in str(info.value)


@pytest.mark.parametrize(
    "override",
    [
        f"model.api_key={SECRET}",
        f"model.openai_api_key={SECRET}",
        f"api_key={SECRET}",
        f"sandbox.token={SECRET}",
        f"model.api_key {SECRET}",
        "model.password hunter2",
        f"train.batch_size={SECRET}",
    ],
)
def test_override_errors_never_echo_secrets(override: str) -> None:
    with pytest.raises(ConfigError) as info:
        sb(override)
    message = str(info.value)
    assert SECRET not in message and "Qx7Qx7" not in message and "hunter2" not in message


def test_with_overrides_on_a_built_config() -> None:
    cfg = sb()
    changed = with_overrides(cfg, ["run.resume=true", "train.batch_size=8"])
    assert changed.run.resume is True and changed.train.batch_size == 8
    assert cfg.run.resume is False  # the original is untouched
    with pytest.raises(ConfigError, match=r"did you mean 'run\.resume'"):
        with_overrides(cfg, ["run.resum=true"])


def test_a_key_of_a_group_is_set_on_its_own_and_the_group_keeps_its_other_keys(tmp_path: Path) -> None:
    cfg = sb("tracking.mlflow.enabled=true", "tracking.wandb.mode=OFFLINE", "tracking.tensorboard.log_dir=1")
    assert cfg.tracking.mlflow.enabled is True and cfg.tracking.mlflow.experiment == "skillopt"
    assert cfg.tracking.wandb.mode == "offline" and cfg.tracking.wandb.enabled is False
    assert cfg.tracking.tensorboard.log_dir == "1"  # a string field takes the text as written
    assert cfg.tracking.enabled == ("mlflow",)
    path = tmp_path / "c.yaml"
    path.write_text("_base_: spreadsheetbench\ntracking:\n  wandb:\n    enabled: true\n    project: p\n")
    cfg = load_config(path, ["tracking.wandb.project=q"])
    assert (cfg.tracking.wandb.enabled, cfg.tracking.wandb.project) == (True, "q")
    assert with_overrides(cfg, ["tracking.wandb.enabled=false"]).tracking.wandb.project == "q"


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        (
            "tracking.mlflow.enabld=true",
            "unknown key 'tracking.mlflow.enabld' in --set; did you mean 'tracking.mlflow.enabled'?",
        ),
        ("tracking.mlflow.enabled=maybe", "tracking.mlflow.enabled (from --set): expected a boolean"),
        (
            "tracking.wandb.mode=cloud",
            "tracking.wandb.mode (from --set): unknown value 'cloud'; allowed: auto, online, offline",
        ),
        (
            "tracking.mlflow=3",
            "tracking.mlflow (from --set): expected a mapping of keys (enabled, tracking_uri",
        ),
        ("tracking.mlflow.experiment=", "tracking.mlflow.experiment (from --set): must not be empty"),
        ("tracking.flush_timeout_s=-1", "tracking.flush_timeout_s (from --set): must be >= 0 seconds"),
        (
            "tracking.mlflow.tracking_uri=https://bob:pw@mlflow.internal",
            "must not hold a user or password (the config is saved with the run); give them to MLflow as MLFLOW_TRACKING_USERNAME",
        ),
    ],
)
def test_bad_keys_and_values_of_a_group_are_named_in_full(override: str, needle: str) -> None:
    with pytest.raises(ConfigError) as err:
        sb(override)
    assert needle in str(err.value)


def test_an_unknown_key_of_a_group_in_a_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("_base_: spreadsheetbench\ntracking:\n  mlflow:\n    uri: http://x\n")
    with pytest.raises(ConfigError, match=r"unknown key 'tracking\.mlflow\.uri' in .*c\.yaml.*tracking_uri"):
        load_config(path)
