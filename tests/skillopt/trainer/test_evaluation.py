"""One evaluation routine and one summary for a run's test evaluations and ``skillopt eval``:
the same rows give the same numbers whoever asks, both files keep the keys their readers use,
and summaries written before they were one (either shape) still read."""

from __future__ import annotations

import json

from skillopt.config import load_config
from skillopt.gate import PairedTest
from skillopt.models.openai_chat import OpenAIChatModel
from skillopt.testing.inprocess import InProcessExecutor
from skillopt.testing.simulation import SIM_PROVIDER, sim_models
from skillopt.trainer.evaluation import compare_rows, evaluate_split
from skillopt.trainer.planning import load_data
from skillopt.trainer.rollouts import Rollouts, RolloutSpec
from skillopt.trainer.rundir import EvalSummary, layout, load_rows
from skillopt.types import Limits, ModelSpec, SkillVersion
from tests.skillopt.trainer.conftest import ENV, config

#: ``eval_summary.json``'s keys before it was shared with the trainer (all still written).
EVAL_KEYS = {
    "skill",
    "split",
    "n_items",
    "n_scored",
    "hard",
    "hard_ci95",
    "soft",
    "soft_ci95",
    "n_infra",
    "max_infra_fraction",
    "ok",
    "by_task_type",
    "env",
    "simulated",
    "mode",
    "sandbox_hosts",
    "environment",
    "against",
    "cacheable_prefix_share",
    "cacheable_prefix",
}
#: A run's test summaries' keys before (all still written, beside the unified ones).
OLD_TEST_KEYS = {"overall", "hard", "hard_ci95", "soft", "soft_ci95", "n", "n_infra", "env_options"}


def test_a_runs_test_summary_is_the_eval_summary_with_its_old_keys(fit, tmp_path):
    # A run of its own, not the shared reference: the reference must be made on a server
    # whose simulated prompt cache is warm, as the later runs it is compared with see it.
    run = tmp_path / "run"
    fit(run, "train.num_epochs=1")
    cfg = config("train.num_epochs=1")
    data = load_data(cfg)
    summary = json.loads((run / layout.TEST_BEST / layout.TEST_SUMMARY).read_text())
    assert set(summary) >= OLD_TEST_KEYS and set(data.task_types()) <= set(summary)
    # Where and how it ran is summary.json's, for the whole run; there is no --against.
    run_keys = {
        "simulated",
        "mode",
        "sandbox_hosts",
        "environment",
        "cacheable_prefix_share",
        "cacheable_prefix",
    }
    assert EVAL_KEYS - set(summary) == run_keys | {"against"}
    parsed = EvalSummary.from_json(summary)
    rows = list(load_rows(run / layout.TEST_BEST).values())
    items = {it.id: it for it in data.split("test")}
    again = EvalSummary.of(
        rows,
        [items[r.id] for r in rows],
        split="test",
        skill=layout.BEST_SKILL,
        config=cfg,
        categories=data.task_types(),
    )
    assert parsed == again  # the same rows, the same numbers, through the JSON and back
    assert summary["n"] == summary["overall"]["total"] == parsed.n_scored
    assert summary["env_options"] == dict(cfg.env.options) == parsed.env["options"]
    result = json.loads((run / layout.SUMMARY).read_text())
    assert result["test_hard"] == parsed.hard and result["test_hard_ci95"] == list(parsed.hard_ci95)


def test_evaluate_split_is_resumable_and_compares_on_the_same_items(sim, tmp_path):
    cfg = load_config(ENV, ["run.simulate=on"])
    data = load_data(cfg)
    items = data.split("selection")[:6]
    target, _ = sim_models(noisy=False)
    executor = InProcessExecutor(
        OpenAIChatModel(SIM_PROVIDER, base_url=sim.base_url, api_key="", max_retries=0)
    )
    spec = RolloutSpec(
        run_id="eval",
        env=cfg.env.name,
        agent=cfg.env.agent,
        model=ModelSpec(provider=SIM_PROVIDER, model=target),
        limits=Limits(),
    )
    rollouts = Rollouts(executor, spec)

    def run(skill: str, name: str) -> tuple[EvalSummary, list]:
        return evaluate_split(
            rollouts,
            items,
            SkillVersion(content=skill),
            tmp_path / name,
            label=name,
            split="val",
            skill_name=name,
            config=cfg,
            categories=data.task_types(),
        )

    a, rows_a = run(data.initial_skill(), "a")
    asked = len(executor.requests)
    assert (a.n_items, a.n_scored, a.n_infra) == (6, 6, 0) and a.ok
    assert sum(c.total for c in a.categories.values()) == a.n_scored
    again, _ = run(data.initial_skill(), "a")
    assert again == a and len(executor.requests) == asked  # resumed from disk: nothing ran twice
    b, rows_b = run("# An empty skill\n", "b")
    diff = compare_rows(rows_a, rows_b, metric="hard", mixed_weight=0.5)
    assert diff.n == 6 and diff.wins - diff.losses == round(6 * (a.hard - b.hard))
    assert compare_rows(rows_a, [], metric="hard", mixed_weight=0.5).name == "none"

    both = EvalSummary.from_json(
        {**a.to_json(), "against": {**b.to_json(), "difference": {**diff.to_json(), "metric": "hard"}}}
    )
    assert both.against == b and both.difference == diff and both.metric == "hard"


def test_summaries_written_before_they_were_one_still_read():
    old_test = {
        "easy": {"total": 1, "hard_acc": 1.0, "hard_acc_ci95": [0.2, 1.0]},
        "hard_qs": {"total": 1, "hard_acc": 0.0, "hard_acc_ci95": [0.0, 0.8]},
        "overall": {"total": 2, "hard_acc": 0.5, "hard_acc_ci95": [0.1, 0.9]},
        "hard": 0.5,
        "hard_ci95": [0.1, 0.9],
        "soft": 0.75,
        "soft_ci95": [0.4, 1.0],
        "n": 2,
        "n_infra": 1,
        "env_options": {"grading": "strict"},
    }
    s = EvalSummary.from_json(old_test)
    assert (s.n_items, s.n_scored, s.n_infra, s.hard, s.hard_ci95) == (3, 2, 1, 0.5, (0.1, 0.9))
    assert sorted(s.categories) == ["easy", "hard_qs"] and s.categories["easy"].hard_ci95 == (0.2, 1.0)
    assert s.env == {"options": {"grading": "strict"}}

    old_eval = {
        "skill": "/x/best_skill.md",
        "split": "val",
        "n_items": 4,
        "n_scored": 4,
        "hard": 0.75,
        "hard_ci95": [0.3, 0.95],
        "soft": 0.8,
        "soft_ci95": [0.4, 0.96],
        "n_infra": 0,
        "max_infra_fraction": 0.2,
        "ok": True,
        "by_task_type": {"a": {"total": 4, "hard_acc": 0.75, "hard_acc_ci95": [0.3, 0.95]}},
        "env": {"name": "searchqa", "agent": "qa", "options": {}},
        "simulated": True,
        "mode": {"simulated": True, "reason": "test"},
        "sandbox_hosts": ["h1"],
        "environment": {"data": {}},
        "against": {
            "skill": "/x/skill_v0000.md",
            "n_scored": 4,
            "hard": 0.25,
            "hard_ci95": [0.05, 0.7],
            "soft": 0.3,
            "soft_ci95": [0.1, 0.7],
            "n_infra": 0,
            "difference": {
                "name": "sign",
                "p_value": 0.125,
                "effect": 0.5,
                "ci95": [0.0, 1.0],
                "n": 4,
                "wins": 2,
                "losses": 0,
                "metric": "hard",
            },
        },
        "cacheable_prefix_share": 0.5,
        "cacheable_prefix": {"target": {}},
    }
    s = EvalSummary.from_json(old_eval)
    assert s.ok and s.against is not None and s.against.hard == 0.25 and s.against.n_items == 4
    assert s.difference == PairedTest(
        name="sign", p_value=0.125, effect=0.5, ci95=(0.0, 1.0), n=4, wins=2, losses=0
    )
    assert s.metric == "hard" and s.sandbox_hosts == ("h1",) and s.cacheable_prefix_share == 0.5
    out = s.to_json()
    assert set(out) >= EVAL_KEYS and out["against"]["difference"]["metric"] == "hard"
    assert {k: out[k] for k in old_eval if k != "against"} == {
        k: v for k, v in old_eval.items() if k != "against"
    }
    assert EvalSummary.from_json(out) == s
