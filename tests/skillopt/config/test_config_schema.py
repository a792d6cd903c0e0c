"""The typed sections: defaults, coercion, validation, aliases, to_dict/from_dict."""

from __future__ import annotations

import json
from pathlib import Path
from typing import get_args

import pydantic
import pytest

from skillopt import gate
from skillopt.config import (
    SECTIONS,
    Config,
    EnvConfig,
    EvaluationConfig,
    GradientConfig,
    ModelConfig,
    ModelPrice,
    OptimizerConfig,
    RunConfig,
    SandboxConfig,
    TrainConfig,
    config_from_dict,
    resolve_config,
)
from skillopt.config.schema import GateMetric
from skillopt.envs.registry import available_envs, env_spec, get_env
from skillopt.errors import ConfigError
from skillopt.testing.shared_data import shared_datasets


def sb(**kw: object) -> Config:
    return resolve_config(Config(env=EnvConfig(name="spreadsheetbench", **kw)))  # type: ignore[arg-type]


def resolved(**sections: object) -> Config:
    """A config of these sections (a spreadsheetbench env unless given), resolved."""
    env = sections.pop("env", EnvConfig(name="spreadsheetbench"))
    return resolve_config(Config(env=env, **sections))  # type: ignore[arg-type]


def env(**kw: object) -> EnvConfig:
    """``EnvConfig(**kw)``, resolved."""
    return resolved(env=EnvConfig(**kw)).env  # type: ignore[arg-type]


def test_defaults_match_the_reference() -> None:
    cfg = sb()
    assert (cfg.model.optimizer, cfg.model.target, cfg.model.reasoning_effort) == (
        "gpt-5.5",
        "gpt-5.5",
        "medium",
    )
    assert cfg.model.rewrite_max_completion_tokens == 64000 and cfg.model.max_completion_tokens == 16384
    assert (cfg.train.num_epochs, cfg.train.batch_size, cfg.train.accumulation, cfg.train.seed) == (
        4,
        40,
        1,
        42,
    )
    assert (cfg.gradient.minibatch_size, cfg.gradient.merge_batch_size, cfg.gradient.analyst_workers) == (
        8,
        8,
        16,
    )
    opt = cfg.optimizer
    assert (opt.learning_rate, opt.min_learning_rate, opt.lr_scheduler, opt.lr_control_mode) == (
        4,
        2,
        "cosine",
        "fixed",
    )
    assert (opt.skill_update_mode, opt.slow_update_samples, opt.longitudinal_pair_policy) == (
        "patch",
        20,
        "mixed",
    )
    ev = cfg.evaluation
    assert (ev.use_gate, ev.gate_metric, ev.gate_mixed_weight, ev.semantic_density_weight) == (
        True,
        "hard",
        0.5,
        0.05,
    )
    assert ev.leading_words[:3] == ("MUST", "ALWAYS", "NEVER") and len(ev.leading_words) == 11
    assert ev.max_regressions is None
    env = cfg.env
    assert (env.agent, env.split_mode, env.split_ratio, env.max_turns) == (
        "codegen_multi",
        "split_file",
        "2:1:7",
        30,
    )
    assert (env.exec_timeout, env.task_timeout, env.workers, env.memory_mb, env.cpus) == (
        120,
        600,
        24,
        1024,
        1.0,
    )
    assert cfg.sandbox.endpoints == () and cfg.sandbox.image == "skillopt-runtime:latest"
    assert (cfg.run.simulate, cfg.run.log_level) == ("off", "info")  # opt-in (issue 9)


def test_defaults_agree_with_gate_module() -> None:
    # Two modules state these; keep them from drifting apart.
    assert {w.lower() for w in EvaluationConfig().leading_words} == set(gate.DEFAULT_LEADING_WORDS)
    assert get_args(GateMetric) == gate.GATE_METRICS


def test_env_agents_come_from_the_env_spec() -> None:
    # One declaration per env (its EnvSpec): config validation and the service read the same.
    for name in available_envs():
        spec = env_spec(name)
        assert env(name=name).agent == spec.default_agent
        assert set(spec.agent_names) == set(get_env(name).agents)
        for agent in spec.agent_names:
            assert env(name=name, agent=agent).agent == agent


def test_sections_are_frozen_and_keyword_only() -> None:
    cfg = sb()
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        cfg.train.batch_size = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        TrainConfig(4)  # type: ignore[misc]
    with pytest.raises(ConfigError, match=r"Config\.train must be a TrainConfig"):
        Config(env=EnvConfig(name="spreadsheetbench"), train={"batch_size": 3})  # type: ignore[arg-type]


def test_direct_construction_coerces_types() -> None:
    train = TrainConfig(batch_size="12", num_epochs=3.0)  # type: ignore[arg-type]
    assert train.batch_size == 12 and isinstance(train.num_epochs, int)
    assert GradientConfig(failure_only="yes").failure_only is True  # type: ignore[arg-type]
    assert EvaluationConfig(leading_words=["MUST", "NEVER"]).leading_words == ("MUST", "NEVER")  # type: ignore[arg-type]
    assert EvaluationConfig(leading_words="MUST, NEVER,").leading_words == ("MUST", "NEVER")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"train\.batch_size: expected an integer, got string 'x'"):
        TrainConfig(batch_size="x")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="expected an integer, got boolean"):
        TrainConfig(batch_size=True)
    with pytest.raises(ConfigError, match="expected an integer"):
        TrainConfig(batch_size=2.5)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="quote it in YAML"):
        ModelConfig(optimizer=5)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r'got null; use "" for an empty string'):
        ModelConfig(optimizer=None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "raw", "canonical"),
    [
        ("lr_control_mode", "manual", "fixed"),
        ("lr_control_mode", "scheduler", "fixed"),
        ("lr_control_mode", "scheduled", "fixed"),
        ("lr_control_mode", "auto", "autonomous"),
        ("lr_control_mode", "optimizer", "autonomous"),
        ("lr_control_mode", "off", "none"),
        ("lr_control_mode", "no_lr", "none"),
        ("lr_control_mode", "  Fixed ", "fixed"),
        ("skill_update_mode", "edits", "patch"),
        ("skill_update_mode", "rewrite", "rewrite_from_suggestions"),
        ("skill_update_mode", "suggestions", "rewrite_from_suggestions"),
        ("skill_update_mode", "rewrite_suggestions", "rewrite_from_suggestions"),
        ("skill_update_mode", "full_rewrite", "full_rewrite_minibatch"),
        ("skill_update_mode", "minibatch_full_rewrite", "full_rewrite_minibatch"),
        ("skill_update_mode", "skill_rewrite_minibatch", "full_rewrite_minibatch"),
        ("longitudinal_pair_policy", "random", "mixed"),
        ("longitudinal_pair_policy", "all", "mixed"),
        ("longitudinal_pair_policy", "default", "mixed"),
        ("longitudinal_pair_policy", "delta", "changed"),
        ("longitudinal_pair_policy", "10_01", "changed"),
        ("longitudinal_pair_policy", "01_10", "changed"),
        ("longitudinal_pair_policy", "change", "changed"),
        ("longitudinal_pair_policy", "same", "unchanged"),
        ("longitudinal_pair_policy", "stable", "unchanged"),
        ("longitudinal_pair_policy", "00_11", "unchanged"),
    ],
)
def test_optimizer_aliases_normalised(field: str, raw: str, canonical: str) -> None:
    assert getattr(OptimizerConfig(**{field: raw}), field) == canonical


def test_run_simulate_and_log_level_aliases() -> None:
    assert RunConfig(simulate=True).simulate == "on"  # type: ignore[arg-type]
    assert RunConfig(simulate="no").simulate == "off"  # type: ignore[arg-type]
    assert RunConfig(log_level="WARN").log_level == "warning"  # type: ignore[arg-type]


def test_unknown_update_mode_is_an_error_not_patch() -> None:
    # The reference silently fell back to patch for unknown strings.
    with pytest.raises(ConfigError) as info:
        OptimizerConfig(skill_update_mode="rewirte")  # type: ignore[arg-type]
    text = str(info.value)
    assert "optimizer.skill_update_mode" in text
    assert "allowed: patch, rewrite_from_suggestions, full_rewrite_minibatch" in text


@pytest.mark.parametrize(
    ("factory", "needle"),
    [
        (lambda: OptimizerConfig(lr_scheduler="exp"), "allowed: constant, linear, cosine, autonomous"),  # type: ignore[arg-type]
        (lambda: OptimizerConfig(lr_control_mode="x"), "allowed: fixed, autonomous, none"),  # type: ignore[arg-type]
        (lambda: EvaluationConfig(gate_metric="avg"), "allowed: hard, soft, mixed"),  # type: ignore[arg-type]
        (lambda: EvaluationConfig(gate_mode="fast"), "allowed: strict, paired, repeat, sequential"),  # type: ignore[arg-type]
        (lambda: ModelConfig(reasoning_effort="huge"), "allowed: '', none, low, medium, high, xhigh, max"),  # type: ignore[arg-type]
        (lambda: OptimizerConfig(skill_aware_appendix_source="x"), "allowed: both, failure_only"),  # type: ignore[arg-type]
        (lambda: RunConfig(simulate="maybe"), "allowed: auto, on, off"),  # type: ignore[arg-type]
        (lambda: EnvConfig(name="spreadsheetbench", split_mode="split_dir"), "allowed: split_file, ratio"),  # type: ignore[arg-type]
    ],
)
def test_bad_enum_lists_allowed_values(factory: object, needle: str) -> None:
    with pytest.raises(ConfigError, match="unknown value") as info:
        factory()  # type: ignore[operator]
    assert needle in str(info.value)


def test_merge_batch_size_one_rejected() -> None:
    with pytest.raises(ConfigError, match=r"gradient\.merge_batch_size: must be >= 2, got 1.*#194"):
        GradientConfig(merge_batch_size=1)
    assert GradientConfig(merge_batch_size=2).merge_batch_size == 2


@pytest.mark.parametrize("weight", [-0.1, 1.01])
def test_gate_mixed_weight_out_of_range(weight: float) -> None:
    with pytest.raises(ConfigError, match=r"evaluation\.gate_mixed_weight: must be in \[0, 1\]"):
        EvaluationConfig(gate_mixed_weight=weight)
    assert EvaluationConfig(gate_mixed_weight=1).gate_mixed_weight == 1.0


@pytest.mark.parametrize(
    ("factory", "needle"),
    [
        (lambda: TrainConfig(batch_size=0), "train.batch_size: must be >= 1"),
        (lambda: TrainConfig(accumulation=0), "train.accumulation: must be >= 1"),
        (lambda: TrainConfig(num_epochs=0), "train.num_epochs: must be >= 1"),
        (lambda: TrainConfig(train_size=-1), "train.train_size: must be >= 0"),
        (lambda: OptimizerConfig(learning_rate=2, min_learning_rate=3), "must be <= optimizer.learning_rate"),
        (lambda: ModelConfig(target_temperature=3.0), "model.target_temperature: must be in [0, 2]"),
        (lambda: EvaluationConfig(max_regressions=-1), "evaluation.max_regressions: must be >= 0"),
        (
            lambda: EvaluationConfig(leading_words=["MUST", ""]),
            "evaluation.leading_words[1]: must not be empty",
        ),  # type: ignore[arg-type]
        (lambda: EnvConfig(name="spreadsheetbench", split_ratio="2:1"), "env.split_ratio: expected"),
        (lambda: EnvConfig(name="spreadsheetbench", exec_timeout=700), "exceeds env.task_timeout"),
        (lambda: EnvConfig(name="spreadsheetbench", cpus=0), "env.cpus: must be > 0"),
        (lambda: env(name="spreadsheetbench", agent="nope"), "allowed: codegen_single, codegen_multi"),
        (
            lambda: env(name="nosuchbench"),
            "unknown env 'nosuchbench'; known: gsm8k, hotpotqa, humaneval, livemathematicianbench, math500, mbpp, officeqa, searchqa, sleep, "
            "spreadsheetbench, textworld",
        ),
        (lambda: env(name=""), "env.name: is required"),
        (lambda: SandboxConfig(endpoints=["localhost"]), 'sandbox.endpoints[0]: expected "host:port"'),  # type: ignore[arg-type]
        (lambda: SandboxConfig(endpoints=["h:70000"]), "port 1-65535"),  # type: ignore[arg-type]
        (lambda: SandboxConfig(endpoints=["h:1", "h:1"]), "listed twice"),  # type: ignore[arg-type]
        (lambda: ModelPrice(input=-1, output=0), "expected a number >= 0"),
    ],
)
def test_range_and_cross_field_checks(factory: object, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        factory()  # type: ignore[operator]
    assert needle in str(info.value)


@pytest.mark.parametrize(
    ("factory", "message"),
    [
        # The wording is declared with the bound (Bounds: the bound as written, unit, note) and
        # said by one translation of pydantic's errors; these are the messages of the former
        # hand-written checks, character for character.
        (lambda: TrainConfig(batch_size="0"), "train.batch_size: must be >= 1, got 0"),  # type: ignore[arg-type]
        (lambda: TrainConfig(max_tokens=-1), "train.max_tokens: must be >= 0, got -1 (0 = no limit)"),
        (
            lambda: TrainConfig(max_cost_usd=-1),
            "train.max_cost_usd: must be >= 0.0, got -1.0 (0 = no limit)",
        ),
        (
            lambda: GradientConfig(merge_batch_size=1),
            "gradient.merge_batch_size: must be >= 2, got 1: merging groups of one patch never shrinks the "
            "pool (the reference looped forever, issue #194)",
        ),
        (
            lambda: ModelConfig(optimizer_temperature="3"),  # type: ignore[arg-type]
            "model.optimizer_temperature: must be in [0, 2] or null, got 3.0",
        ),
        (lambda: EvaluationConfig(gate_alpha=1), "evaluation.gate_alpha: must be in (0, 1), got 1.0"),
        (
            lambda: EvaluationConfig(max_infra_fraction=1.5),
            "evaluation.max_infra_fraction: must be in [0, 1], got 1.5",
        ),
        (
            lambda: EvaluationConfig(semantic_density_weight=-1),
            "evaluation.semantic_density_weight: must be >= 0.0, got -1.0",
        ),
        (
            lambda: EvaluationConfig(max_regressions=-1),
            "evaluation.max_regressions: must be >= 0, got -1 (null = off)",
        ),
        (lambda: EnvConfig(name="x", exec_timeout=0), "env.exec_timeout: must be > 0 seconds, got 0.0"),
        (lambda: EnvConfig(name="x", cpus=0), "env.cpus: must be > 0, got 0.0"),
        (lambda: EnvConfig(name="x", memory_mb=8), "env.memory_mb: must be >= 16, got 8"),
        (
            lambda: SandboxConfig(embedded_capacity=-1),
            "sandbox.embedded_capacity: must be >= 0, got -1 (0 = auto)",
        ),
        (
            lambda: SandboxConfig(model_cache="bogus"),
            "sandbox.model_cache: must be off, record or replay, got 'bogus'",
        ),  # type: ignore[arg-type]
        (
            lambda: ModelConfig(prices={"m": {"input": 1, "output": -2}}),  # type: ignore[dict-item]
            "model.prices.m.output: must be >= 0, got -2.0",
        ),
        # Rules between fields stay rules of the section, worded as before.
        (
            lambda: EvaluationConfig(gate_mode="repeat", gate_repeats=1),
            "evaluation.gate_repeats: must be >= 2 with gate_mode: repeat, got 1 (one rollout per item is "
            "gate_mode: paired)",
        ),
        (
            lambda: OptimizerConfig(learning_rate=2, min_learning_rate=3),
            "optimizer.min_learning_rate: must be <= optimizer.learning_rate (2), got 3",
        ),
    ],
)
def test_declared_bounds_say_what_the_hand_written_checks_said(factory: object, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        factory()  # type: ignore[operator]
    assert str(info.value) == message


def test_a_section_is_changed_by_building_a_new_one() -> None:
    train = TrainConfig(batch_size=10)
    changed = train.replace(batch_size=12, seed=7)
    assert (changed.batch_size, changed.seed, changed.num_epochs) == (12, 7, train.num_epochs)
    assert train.batch_size == 10  # the original is untouched
    with pytest.raises(ConfigError, match=r"train\.batch_size: must be >= 1, got 0"):
        train.replace(batch_size=0)  # checked like any new section (model_copy checks nothing)


def test_building_asks_no_registry_and_reads_no_file_resolving_does(tmp_path: Path) -> None:
    # A config is pure data: it builds with an env and paths this machine does not have ...
    pure = Config(
        env=EnvConfig(name="nosuchbench", data_root=str(tmp_path / "nodata")),
        sandbox=SandboxConfig(token_file=str(tmp_path / "token")),
    )
    assert pure.env.agent == "" and pure.env.options == {}
    # ... and the look-ups are one step of their own, with the messages they always had.
    with pytest.raises(ConfigError, match="unknown env 'nosuchbench'; known: gsm8k"):
        resolve_config(pure)
    with pytest.raises(ConfigError, match=r"env\.data_root: directory not found: .*nodata"):
        resolve_config(Config(env=EnvConfig(name="searchqa", data_root=str(tmp_path / "nodata"))))
    with pytest.raises(ConfigError, match=r"sandbox\.token_file: file not found"):
        resolve_config(Config(env=EnvConfig(name="searchqa"), sandbox=pure.sandbox))
    (tmp_path / "token").write_text("t" * 32)
    plain = Config(env=EnvConfig(name="searchqa"), sandbox=SandboxConfig(token_file=str(tmp_path / "token")))
    resolved = resolve_config(plain)
    assert resolved.env.agent == env_spec("searchqa").default_agent and resolved.env.options
    assert plain.env.agent == "" and plain.env.options == {}  # a new config; the given one is as it was
    assert resolve_config(resolved) == resolved  # resolving twice changes nothing


def test_paths_must_exist_and_are_stored_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"env\.skill_init: file not found: .*missing\.md"):
        env(name="spreadsheetbench", skill_init="missing.md")
    (tmp_path / "skill.md").write_text("# skill\n")
    assert env(name="spreadsheetbench", skill_init="skill.md").skill_init == str(tmp_path / "skill.md")
    with pytest.raises(ConfigError, match=r"env\.data_root: directory not found"):
        env(name="spreadsheetbench", data_root="nodata")
    # An Agent Skills package folder is a skill too, checked as it is loaded.
    pkg = tmp_path / "sheet-rules"
    (pkg / "references").mkdir(parents=True)
    (pkg / "SKILL.md").write_text("---\nname: sheet-rules\ndescription: Edit sheets.\n---\nBody\n")
    (pkg / "references" / "r.md").write_text("rules\n")
    assert env(name="spreadsheetbench", skill_init="sheet-rules").skill_init == str(pkg)
    (tmp_path / "data").mkdir()
    with pytest.raises(ConfigError, match=r"no splits\.json"):
        env(name="spreadsheetbench", data_root="data")
    assert env(name="spreadsheetbench", data_root="data", split_mode="ratio").data_root == str(
        tmp_path / "data"
    )
    with pytest.raises(ConfigError, match="must be set together"):
        SandboxConfig(tls_cert_file="skill.md")
    with pytest.raises(ConfigError, match=r"sandbox\.token_file: file not found"):
        resolved(sandbox=SandboxConfig(token_file="token"))
    assert resolved(run=RunConfig(out_root="out")).run.out_root == str(tmp_path / "out")


def test_shared_dataset_root_is_accepted() -> None:
    shared = shared_datasets()
    root = shared / "spreadsheetbench" if shared else Path("missing")
    if not root.is_dir():
        pytest.fail(f"shared dataset missing at {root}")
    assert env(name="spreadsheetbench", data_root=str(root)).data_root == str(root)


def test_derived_helpers() -> None:
    train = TrainConfig(batch_size=10, accumulation=2)
    assert train.effective_batch_size == 20
    assert train.steps_per_epoch(41) == 3 and train.steps_per_epoch(0) == 0
    assert EnvConfig(name="spreadsheetbench", split_ratio="2:1:7").split_fractions == pytest.approx(
        (0.2, 0.1, 0.7)
    )
    prices = ModelConfig(prices={"gpt-5.5": {"input": 1.25, "output": 10}})  # type: ignore[dict-item]
    assert prices.price_pairs() == {"gpt-5.5": (1.25, 10.0, None, None)}


def test_to_dict_round_trips_through_from_dict() -> None:
    cfg = resolved(
        model=ModelConfig(prices={"gpt-5.5": ModelPrice(input=1.25, output=10.0)}, optimizer_temperature=0.2),
        env=EnvConfig(name="spreadsheetbench", agent="codegen_single"),
        evaluation=EvaluationConfig(max_regressions=1, leading_words=("MUST",)),
        sandbox=SandboxConfig(endpoints=("a:1", "b:2")),
    )
    data = cfg.to_dict(redacted=True)
    assert list(data) == list(SECTIONS)
    assert data["sandbox"]["endpoints"] == ["a:1", "b:2"]
    assert data["model"]["prices"] == {"gpt-5.5": {"input": 1.25, "output": 10.0}}
    json.dumps(data)  # plain data
    assert config_from_dict(json.loads(json.dumps(data))) == cfg
    assert config_from_dict(cfg.to_dict(redacted=False)) == cfg


def test_to_dict_redacts_secret_shaped_values() -> None:
    leaked = "sk-" + "a" * 30
    cfg = Config(model=ModelConfig(target=leaked), env=EnvConfig(name="spreadsheetbench"))
    assert leaked not in json.dumps(cfg.to_dict())
    assert cfg.to_dict(redacted=False)["model"]["target"] == leaked
    # Model names in prices are not mistaken for secret keys.
    priced = Config(
        model=ModelConfig(prices={"secret-7b": ModelPrice(input=1, output=2)}),
        env=EnvConfig(name="spreadsheetbench"),
    )
    assert priced.to_dict()["model"]["prices"] == {"secret-7b": {"input": 1.0, "output": 2.0}}


def test_from_dict_is_strict() -> None:
    with pytest.raises(
        ConfigError, match=r"unknown key 'train\.batch_sise' in config; did you mean 'train\.batch_size'\?"
    ):
        config_from_dict({"env": {"name": "spreadsheetbench"}, "train": {"batch_sise": 3}})
    with pytest.raises(ConfigError, match="_base_"):
        config_from_dict({"_base_": "x.yaml", "env": {"name": "spreadsheetbench"}})
    with pytest.raises(ConfigError, match=r"env\.name is required"):
        config_from_dict({})
    with pytest.raises(
        ConfigError,
        match=r"unknown key 'model\.prices\.gpt\.inptu'.*did you mean 'model\.prices\.gpt\.input'",
    ):
        config_from_dict(
            {"env": {"name": "spreadsheetbench"}, "model": {"prices": {"gpt": {"inptu": 1, "output": 1}}}}
        )


def test_alias_tables_point_at_allowed_values() -> None:
    for name, cls in SECTIONS.items():
        for key, aliases in cls.ALIASES.items():
            choices = get_args(cls.field_type(key))
            assert choices, f"{name}.{key} has aliases but is not an enum"
            for alias, canonical in aliases.items():
                assert canonical in choices and alias not in choices, f"{name}.{key}: {alias}→{canonical}"


def test_exported_members() -> None:
    import skillopt.config as package

    public = sorted(
        n for n in vars(package) if not n.startswith("_") and n not in {"builtin", "loader", "schema"}
    )
    assert sorted(package.__all__) == public


def test_a_cost_budget_needs_a_price_for_every_model_in_use() -> None:
    with pytest.raises(ConfigError) as exc:
        config_from_dict({"env": {"name": "searchqa"}, "train": {"max_cost_usd": 5}})
    assert exc.value.message.startswith("train.max_cost_usd")
    assert "'gpt-5.5' (the target and optimizer)" in exc.value.message
    assert "--set model.prices.gpt-5.5.input=" in exc.value.message
    # Two models, one priced: the other one is named, with its role.
    with pytest.raises(ConfigError, match=r"no price for 'small' \(the target\), so the budget"):
        config_from_dict(
            {
                "env": {"name": "searchqa"},
                "train": {"max_cost_usd": 5},
                "model": {"target": "small", "prices": {"gpt-5.5": {"input": 1, "output": 2}}},
            }
        )
    priced = {"input": 1.0, "output": 2.0}
    for prices in ({"gpt-5.5": priced}, {"*": priced}):
        cfg = config_from_dict(
            {"env": {"name": "searchqa"}, "train": {"max_cost_usd": 5}, "model": {"prices": prices}}
        )
        assert cfg.train.max_cost_usd == 5
    # No budget, no price needed (costs are then reported as 0).
    assert config_from_dict({"env": {"name": "searchqa"}}).model.prices == {}


def test_a_bad_skill_package_is_refused_as_the_config_loads_naming_each_file_and_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    pkg = tmp_path / "sheet-rules"
    (pkg / "references").mkdir(parents=True)
    (pkg / "SKILL.md").write_text("---\nname: other-name\ndescription: Edit sheets.\n---\nBody\n")
    (pkg / "references" / "bin.md").write_bytes(b"\xff\xfe")
    (pkg / "references" / "passwd.md").symlink_to("/etc/passwd")
    with pytest.raises(ConfigError) as caught:
        env(name="spreadsheetbench", skill_init="sheet-rules")
    message = caught.value.message
    assert message.startswith("env.skill_init: ")
    assert "references/passwd.md: symlinks are not allowed (-> /etc/passwd) [symlink]" in message
    assert "references/bin.md: not UTF-8 text" in message and "[utf-8]" in message
    assert "SKILL.md: name 'other-name' differs from its folder 'sheet-rules' [name-folder]" in message
    with pytest.raises(ConfigError, match=r"too-many-files"):
        env(name="spreadsheetbench", skill_init="sheet-rules", skill_max_files=1)
