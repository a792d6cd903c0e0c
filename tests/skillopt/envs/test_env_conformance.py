"""The env contract, checked the same way for every registered env (STYLE §1: one protocol,
one conformance suite run against every provider)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from skillopt.agents.context import AgentContext
from skillopt.config import Config, EnvConfig, list_builtin_configs, load_config, resolve_config
from skillopt.envs.base import EARLIER_ATTEMPT, TaskItem
from skillopt.envs.registry import available_envs, env_dir, env_spec, get_env, load_env_data, resolve
from skillopt.envs.splits import RATIO_NAMES
from skillopt.errors import ConfigError, InvalidRequest
from skillopt.models.openai_chat import OpenAIChatModel
from skillopt.testing.fixtures import catalogue, simulated_envs
from skillopt.testing.fixtures.qa import load_catalogue as load_qa_catalogue
from skillopt.testing.scripted import ScriptedModelServer
from skillopt.types import Grading, Limits, ModelSpec, RolloutRequest, SkillVersion, Task

ENVS = available_envs()
REPO = Path(__file__).resolve().parents[3]


def request(env: str, agent: str, item: TaskItem, **kw) -> RolloutRequest:
    return RolloutRequest(
        rollout_id=f"conformance/{env}/{item.id}"[:200],
        env=env,
        agent=agent,
        task=item.task,
        grading=item.grading,
        skill=SkillVersion(content="# Skill\n- be careful\n"),
        model=ModelSpec(provider="scripted", model="m"),
        **kw,
    )


def test_the_registry_lists_the_benchmarks():
    assert set(ENVS) >= {
        "spreadsheetbench",
        "searchqa",
        "livemathematicianbench",
        "gsm8k",
        "math500",
        "hotpotqa",
        "humaneval",
        "mbpp",
        "textworld",
    }


@pytest.mark.parametrize("name", ENVS)
def test_spec_declares_agents_and_the_service_env_agrees(name):
    spec = env_spec(name)
    assert spec.name == name and env_dir(name).name == name
    assert spec.default_agent in spec.agent_names
    env = get_env(name)
    assert env.name == name and tuple(env.agents) == spec.agent_names
    for agent in spec.agents:
        assert agent.sandbox in ("none", "isolated", "gateway")
        assert env.container(agent.name) == agent.sandbox
        assert (agent.sandbox == "gateway") == bool(agent.api), agent  # a CLI speaks one wire API
        assert env.agent_apis.get(agent.name, "") == agent.api
        assert isinstance(env.skill_file(agent.name, "# Skill\n- rule\n"), str)
    assert resolve_config(Config(env=EnvConfig(name=name))).env.agent == spec.default_agent


@pytest.mark.parametrize("name", ENVS)
def test_options_are_typed_and_unknown_keys_are_refused(name):
    spec = env_spec(name)
    defaults = spec.parse_options({})
    assert spec.parse_options(defaults.model_dump(mode="json")) == defaults
    with pytest.raises(ConfigError, match=r"env\.options\.no_such_option: unknown option"):
        spec.parse_options({"no_such_option": 1})
    with pytest.raises(ConfigError, match=r"env\.options\.no_such_option"):
        resolve_config(Config(env=EnvConfig(name=name, options={"no_such_option": 1})))
    assert resolve_config(Config(env=EnvConfig(name=name))).env.options == defaults.model_dump(
        mode="json"
    )  # stored with defaults


@pytest.mark.parametrize("name", ENVS)
def test_the_folder_has_prompts_initial_skill_and_an_attributed_sample(name):
    folder = env_dir(name)
    for rel in ("prompts/analyst_error.md", "prompts/analyst_success.md", "skills/initial.md"):
        assert (folder / rel).is_file() and (folder / rel).read_text().strip(), rel
    readme = (folder / "data" / "sample" / "README.md").read_text()
    assert "licen" in readme.lower() and "attribution" in readme.lower()


@pytest.mark.parametrize("name", ENVS)
def test_the_folder_ships_its_configs_and_its_simulation(name):
    """A benchmark is one folder: its configs and the offline simulation's catalogue live in it
    (so every env-looping test and the demo find them with no file edited elsewhere)."""
    configs = {p.stem for p in (env_dir(name) / "configs").glob("*.yaml")}
    assert {name, f"{name}_demo"} <= configs
    for config in (name, f"{name}_demo"):
        cfg = load_config(config)
        assert cfg.env.name == name and cfg.env.agent in env_spec(name).agent_names
        assert config in list_builtin_configs()
    assert load_config(f"{name}_demo").run.simulate == "auto"
    family = catalogue(name)["family"]
    assert name in simulated_envs(family)
    if family == "qa":
        assert "qa" in env_spec(name).agent_names
        assert load_qa_catalogue(name)["answer"]["format"] in ("plain", "boxed", "option_label")


@pytest.mark.parametrize("name", ENVS)
def test_sample_splits_items_and_categories(name):
    data = load_env_data(name)
    seen: set[str] = set()
    for split in RATIO_NAMES:
        items = data.split(split)
        assert items, split
        ids = [it.id for it in items]
        assert len(set(ids)) == len(ids) and not seen & set(ids)
        seen |= set(ids)
        for it in items:
            assert it.task_type in data.task_types(), (it.id, it.task_type)
            # Gold travels only on the grading side: gold files are never task files, and a QA
            # env's gold fields are never task attributes. (SpreadsheetBench's answer position
            # is public: the prompt shows it.)
            task_files = {f.name for c in it.task.cases for f in c.files}
            assert not task_files & {f.name for c in it.grading.cases for f in c.files}, it.id
            if env_spec(name).raw_item:
                assert not set(it.grading.attributes) & set(it.task.attributes), it.id
    assert data.split("valid_seen") == data.split("val") and data.split("valid_unseen") == data.split("test")
    with pytest.raises(ConfigError, match="unknown split"):
        data.split("nope")
    json.dumps(data.describe())
    assert data.initial_skill().strip()


@pytest.mark.parametrize("name", ENVS)
def test_every_sample_item_is_a_valid_request_and_a_broken_one_is_refused(name):
    spec, env = env_spec(name), get_env(name)
    items = [it for split in RATIO_NAMES for it in load_env_data(name).split(split)]
    for agent in spec.agent_names:
        for it in items[:3]:
            env.validate(request(name, agent, it))
    broken = TaskItem(task=Task(id="broken", instruction="?"), grading=Grading())
    with pytest.raises(InvalidRequest, match=name):
        env.validate(request(name, spec.default_agent, broken))
    with pytest.raises(InvalidRequest, match="no agent"):
        env.validate(request(name, "no-such-agent", items[0]))


def _split_file_envs() -> list[str]:
    """Envs whose data are split files of raw items (QAData); OfficeQA's data root has its own
    layout and its own version of this test (tests/skillopt/envs/qa/test_officeqa.py)."""
    from skillopt.envs._qa.data import QAData

    return [n for n in ENVS if env_spec(n).raw_item and issubclass(resolve(env_spec(n).data), QAData)]


@pytest.mark.parametrize("name", _split_file_envs())
def test_the_loader_uses_the_one_raw_item_function(name):
    spec = env_spec(name)
    data = load_env_data(name)
    from skillopt.envs._qa.data import read_items, split_files

    make = resolve(spec.raw_item)
    options = spec.parse_options({})
    for stem, path in split_files(data.root).items():
        raws = read_items(path)
        built = [make(raw, options=options, position=i, source=stem) for i, raw in enumerate(raws)]
        assert built == data.split(stem)


@pytest.fixture(scope="module")
def model_server():
    with ScriptedModelServer() as srv:
        srv.add_responder(lambda req: {"text": "Step by step...\n<answer>42</answer>"})
        yield srv


@pytest.mark.parametrize(
    ("name", "agent"),
    [(n, a.name) for n in ENVS for a in env_spec(n).agents if a.sandbox == "none"],
)
def test_an_agent_declared_without_sandbox_runs_without_one(name, agent, model_server):
    """The service leases no container for these agents; they must not need one."""
    item = load_env_data(name).split("val")[0]
    item = item.with_earlier_attempt("My earlier answer was 41.")
    req = request(name, agent, item, diagnostic_instruction="State the quantity you compute first.")
    model = OpenAIChatModel("scripted", base_url=model_server.base_url, api_key="", max_retries=0)
    ctx = AgentContext(
        request=req,
        sandbox=None,
        model=model,
        limits=Limits(wall_time_s=60, max_turns=1),
        emit=lambda event: None,
        deadline=time.monotonic() + 60,
    )
    row = get_env(name).run(agent, ctx)
    assert row.infra_error is None and row.agent_ok and row.n_turns == 1
    assert 0.0 <= row.soft <= 1.0 and row.hard in (0.0, 1.0)
    assert row.metrics["task_type"] == item.task_type and "predicted_answer" in row.metrics
    assert row.trace.messages[-1].content.startswith("[EVALUATION RESULT]")  # for the analyst
    # The deep-reflect parts reach the prompt; the gold (in the evaluation result) does not.
    user = row.trace.user_prompt
    assert "My earlier answer was 41." in user and "State the quantity you compute first." in user
    assert "[EVALUATION RESULT]" not in user and EARLIER_ATTEMPT not in user
    sent = json.dumps(model_server.requests[-1].body)
    assert "[EVALUATION RESULT]" not in sent and "My earlier answer was 41." in sent


def test_specs_import_no_heavy_dependency():
    code = (
        "import sys\n"
        "from skillopt.envs.registry import available_envs, find_spec\n"
        "from skillopt.config import Config, EnvConfig, resolve_config\n"
        "for n in available_envs():\n"
        "    find_spec(n); resolve_config(Config(env=EnvConfig(name=n)))\n"
        "print(sorted(m for m in ('openpyxl', 'math_verify', 'sympy', 'docker', 'grpc') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_a_request_with_a_stray_earlier_attempt_type_is_refused():
    item = load_env_data("searchqa").split("val")[0]
    bad = replace(item, task=replace(item.task, attributes={**item.task.attributes, EARLIER_ATTEMPT: 3}))
    with pytest.raises(InvalidRequest, match=EARLIER_ATTEMPT):
        get_env("searchqa").validate(request("searchqa", "qa", bad))
