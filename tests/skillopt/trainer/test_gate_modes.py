"""The gate modes on the noisy simulation (in process, no sandbox): decisions reproducible by
seed, the repeat gate's measurements, a resume inside a repeated evaluation that reruns
nothing, the ground truth, and the noisy target drawing at its probabilities."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import pytest

from skillopt.models.base import ChatRequest
from skillopt.models.openai_chat import OpenAIChatModel
from skillopt.testing.noise import true_score
from skillopt.testing.simulation import SIM_NOISY_TARGET, SIM_PROVIDER, pass_probability
from skillopt.testing.truth import gate_truths, read_truth
from skillopt.trainer.callbacks import Callback, RowEvent
from skillopt.trainer.planning import RunPlan, load_data
from skillopt.trainer.rundir import layout
from skillopt.types import Message, skill_hash
from tests.skillopt.trainer.conftest import Crash, assert_no_duplicate_rows, config, decisions

NOISY = ("run.simulate=noisy", "train.seed=7")
REPEAT = (*NOISY, "evaluation.gate_mode=repeat", "evaluation.gate_repeats=3")


def _records(run: Path) -> list[dict]:
    return json.loads((run / layout.HISTORY).read_text())


def test_noisy_decisions_are_reproducible_by_seed(fit, tmp_path):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    fit(a, *NOISY, "evaluation.gate_mode=paired")
    fit(b, *NOISY, "evaluation.gate_mode=paired")
    assert decisions(a) == decisions(b)
    assert read_truth(a) == read_truth(b)
    # Another seed draws other outcomes (the same items, other rows).
    fit(c, "run.simulate=noisy", "train.seed=8", "evaluation.gate_mode=paired")
    rows = lambda run: [  # noqa: E731
        json.loads(line)["hard"]
        for line in (run / layout.BASELINE_SELECTION / layout.RESULTS).read_text().splitlines()
    ]
    assert rows(a) != rows(c)


def test_every_decision_records_its_test_and_the_paired_gate_follows_it(fit, tmp_path):
    n_sel = len(RunPlan.of(config(*NOISY), load_data(config(*NOISY))).selection)
    for mode in ("strict", "paired"):
        out = tmp_path / mode
        fit(out, *NOISY, f"evaluation.gate_mode={mode}", "evaluation.gate_alpha=0.1")
        gated = [r for r in _records(out) if r.get("gate_test")]
        assert gated, "the short run gates candidates"
        for r in gated:
            t = r["gate_test"]
            assert (t["mode"], t["alpha"], t["repeats"], r["gate_mode"]) == (mode, 0.1, 1, mode)
            # Pass/fail scores, one rollout per item, nothing lost: the exact test over every item.
            assert t["name"] == "sign" and t["n"] == n_sel
            lo, hi = t["ci95"]
            assert lo <= t["effect"] <= hi
            significant = t["p_value"] <= 0.1 and t["effect"] > 0
            if mode == "paired":
                assert ("accept" in r["action"]) == significant, r
                assert r["gate_reason"] in ("significant", "not_significant")
            else:  # strict: the means decide, the test only informs
                assert ("accept" in r["action"]) == (r["candidate_gate_score"] > r["current_score_before"])


def test_the_repeat_gate_rolls_each_selection_item_k_times(fit, tmp_path):
    out = tmp_path / "run"
    result, executor = fit(out, *REPEAT)
    assert result.complete
    n_sel = len(RunPlan.of(config(*REPEAT), load_data(config(*REPEAT))).selection)
    for k in (1, 2, 3):
        rows = (
            (out / layout.repeat_dir(layout.BASELINE_SELECTION, k) / layout.RESULTS).read_text().splitlines()
        )
        assert len(rows) == n_sel
    assert not (out / layout.repeat_dir(layout.BASELINE_SELECTION, 4)).exists()
    gated = [r for r in _records(out) if r.get("gate_test")]
    assert gated and all(
        r["gate_test"]["repeats"] == 3 and r["gate_test"]["name"] == "bootstrap" for r in gated
    )
    for r in gated:
        step = layout.step_dir(r["step"])
        if not r["selection_cached"]:
            assert all(
                (out / layout.repeat_dir(f"{step}/{layout.Step.SELECTION}", k)).is_dir() for k in (1, 2, 3)
            )
    # The selection cache keys say how the skills were measured.
    state = json.loads((out / layout.STATE).read_text())
    keys = json.loads(state["gate_cache"]["json"])["entries"]
    assert keys and all(k.endswith("/repeats=3") for k in keys)
    # Every rollout id asked for once.
    ids = Counter(r.rollout_id for r in executor.requests)
    assert max(ids.values()) == 1
    assert_no_duplicate_rows(out)


class CrashInRepeat(Callback):
    """Crash after the third row of the first step's second repeat."""

    def __init__(self) -> None:
        self.rows = 0

    def on_rollout_result(self, event: RowEvent) -> None:
        if event.label.endswith(f"{layout.Step.SELECTION}_r2"):
            self.rows += 1
            if self.rows == 3:
                raise Crash("inside a repeated evaluation")


def test_a_resume_inside_a_repeated_evaluation_reruns_nothing_done(fit, tmp_path):
    ref, out = tmp_path / "ref", tmp_path / "run"
    fit(ref, *REPEAT)
    with pytest.raises(Crash):
        fit(out, *REPEAT, callbacks=[CrashInRepeat()])
    step1 = out / layout.step_dir(1)
    done = {
        k: len(
            (out / layout.repeat_dir(f"{layout.step_dir(1)}/{layout.Step.SELECTION}", k) / layout.RESULTS)
            .read_text()
            .splitlines()
        )
        for k in (1, 2, 3)
        if (
            out / layout.repeat_dir(f"{layout.step_dir(1)}/{layout.Step.SELECTION}", k) / layout.RESULTS
        ).exists()
    }
    assert step1.is_dir() and done.get(2) == 3, done
    before = {
        json.loads(line)["rollout_id"]
        for p in out.rglob(layout.RESULTS)
        for line in p.read_text().splitlines()
    }
    result, executor = fit(out, *REPEAT)
    assert result.complete
    again = {r.rollout_id for r in executor.requests} & before
    assert not again, f"rerun after resume: {sorted(again)[:5]}"
    assert decisions(out) == decisions(ref)
    assert_no_duplicate_rows(out)


def test_a_resume_with_another_protocol_measures_the_current_skill_anew(fit, tmp_path):
    out = tmp_path / "run"
    with pytest.raises(Crash):
        fit(out, *NOISY, callbacks=[_CrashAtStep(2)])
    result, _ = fit(out, *REPEAT)
    assert result.complete
    first_gated = next(r for r in _records(out) if r["step"] >= 2 and r.get("gate_test"))
    assert first_gated["gate_test"]["repeats"] == 3
    assert (
        out / layout.step_dir(first_gated["step"]) / layout.Step.SELECTION_CURRENT / layout.RESULTS
    ).exists()


class _CrashAtStep(Callback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_start(self, event) -> None:
        if event.step == self.step:
            raise Crash(f"before step {self.step}")


def test_the_ground_truth_is_the_mean_pass_probability(fit, tmp_path):
    out = tmp_path / "run"
    fit(out, *NOISY, "evaluation.gate_mode=paired")
    truth = read_truth(out)
    assert truth is not None and "SIMULATION ONLY" in truth["ground_truth"]
    plan = RunPlan.of(config(*NOISY), load_data(config(*NOISY)))
    skills = {skill_hash(p.read_text()): p.read_text() for p in (out / layout.SKILLS).iterdir()}
    checked = 0
    for key, entry in truth["skills"].items():
        if key in skills:
            assert entry["selection"] == pytest.approx(
                true_score(skills[key], plan.selection, pass_probability)
            )
            assert entry["test"] == pytest.approx(true_score(skills[key], plan.test, pass_probability))
            checked += 1
    assert checked >= 1
    gates = gate_truths(out)
    assert [g.origin for g in gates][: len(_records(out))] and all(0 <= g.true_candidate <= 1 for g in gates)
    assert truth["initial"] == skill_hash((out / layout.skill_file(0)).read_text())


def test_the_noisy_target_passes_at_its_probability(sim):
    """Over the real HTTP API: one QA task asked under 400 rollout seeds passes about as often
    as its probability says (and the same seed always gives the same answer)."""
    from skillopt.envs.registry import load_env_data
    from skillopt.testing.fixtures.qa import right_answer

    item = next(
        it for it in load_env_data("searchqa").split("train") if 0.2 < pass_probability(it.id, "") < 0.8
    )
    p = pass_probability(item.id, "")
    model = OpenAIChatModel(SIM_PROVIDER, base_url=sim.base_url, api_key="", max_retries=0)
    prompt = f"Question: {item.task.instruction}"
    gold = right_answer("searchqa", item, prompt)

    def ask(seed: int) -> bool:
        req = ChatRequest(model=SIM_NOISY_TARGET, messages=(Message(role="user", content=prompt),), seed=seed)
        return f"<answer>{gold}</answer>" in model.complete(req).text

    n = 400
    passes = sum(ask(seed) for seed in range(1, n + 1))
    sigma = (p * (1 - p) / n) ** 0.5
    assert abs(passes / n - p) < 4 * sigma, (passes / n, p)
    assert [ask(5) for _ in range(3)] in ([True] * 3, [False] * 3)


class _Notices(Callback):
    def __init__(self) -> None:
        self.notices: tuple[str, ...] = ()

    def on_fit_start(self, event) -> None:
        self.notices = event.notices


def test_a_paired_gate_that_cannot_reach_alpha_says_so_before_the_run_spends_anything(fit, tmp_path):
    seen = _Notices()
    out = tmp_path / "run"
    fit(out, *NOISY, "evaluation.gate_mode=paired", "evaluation.sel_env_num=4", callbacks=[seen])
    (notice,) = seen.notices
    assert "over 4 selection items" in notice and "smallest p-value it can reach is 0.062" in notice
    assert "can never accept" in notice and "evaluation.gate_mode=repeat" in notice
    assert all("accept" not in r["action"] for r in _records(out))  # as it said
    # On a split where it can accept it says what it detects; strict and repeat say nothing.
    seen = _Notices()
    fit(tmp_path / "b", *NOISY, "evaluation.gate_mode=paired", callbacks=[seen])
    (notice,) = seen.notices
    assert "with 80% power" in notice and "can never accept" not in notice
    for mode in ("strict", "repeat"):
        seen = _Notices()
        fit(tmp_path / mode, *NOISY, f"evaluation.gate_mode={mode}", callbacks=[seen])
        assert seen.notices == ()


# -- the sequential gate ------------------------------------------------------------------------

#: Seed 8 of the short run, three rounds of every selection item (the first release's
#: rounds; the default's half rounds: the tests after): the sequential gate accepts at its
#: second look, rejects at the round budget and for no improvement, and measures the current
#: skill's later rounds.
SEQUENTIAL = (
    "run.simulate=noisy",
    "train.seed=8",
    "evaluation.gate_mode=sequential",
    "evaluation.gate_max_rounds=3",
    "evaluation.gate_round_fraction=1",
)


@pytest.fixture(scope="module")
def sequential_run(tmp_path_factory, fit) -> tuple[Path, list]:
    """One uninterrupted sequential run (and the rollouts it asked for)."""
    out = tmp_path_factory.mktemp("sequential") / "run"
    result, executor = fit(out, *SEQUENTIAL)
    assert result.complete
    return out, list(executor.requests)


def test_the_sequential_gate_measures_rounds_records_its_looks_and_decides_by_seed(sequential_run):
    out, requests = sequential_run
    gated = [r for r in _records(out) if r.get("gate_test")]
    assert gated
    for r in gated:
        t = r["gate_test"]
        assert (t["mode"], t["name"], t["max_looks"], t["spending"]) == (
            "sequential",
            "group_sequential",
            3,
            "pocock",
        )
        assert 1 <= t["looks"] <= 3 and t["boundary"] in ("accept", "futility", "budget")
        assert ("accept" in r["action"]) == (t["boundary"] == "accept") == (t["z"] >= t["bound"])
        assert (
            r["gate_reason"]
            == {"accept": "significant", "futility": "no_improvement", "budget": "round_budget"}[
                t["boundary"]
            ]
        )
        assert t["n"] <= 15 * t["looks"] and t["p_value"] == pytest.approx(
            0.5 * math.erfc(t["z"] / math.sqrt(2))
        )
        step = layout.step_dir(r["step"])
        # Round k of the candidate in <selection_eval>_r<k>, exactly the rounds looked at.
        for k in range(2, 5):
            assert (out / layout.repeat_dir(f"{step}/{layout.Step.SELECTION}", k)).is_dir() == (
                k <= t["looks"] and not r["selection_cached"]
            ), (r["step"], k)
    looks = [r["gate_test"]["looks"] for r in gated]
    assert max(looks) == 3 and {1, 2} & set(looks)
    assert "round_budget" in {r["gate_reason"] for r in gated}
    # Every round measured is kept under its own key; the current skill's later rounds are
    # measured once and then reused (never twice: every rollout id asked for once).
    keys = json.loads(json.loads((out / layout.STATE).read_text())["gate_cache"]["json"])["entries"]
    assert any(k.endswith("/round=2") for k in keys) and any(k.endswith("/round=3") for k in keys)
    assert max(Counter(r.rollout_id for r in requests).values()) == 1
    assert_no_duplicate_rows(out)
    # The same seed decides the same: the next test's run, crashed and resumed, matches it.


class CrashInRound(Callback):
    """Crash after the first row of a second round: the first round done, the second begun."""

    def __init__(self) -> None:
        self.label = ""

    def on_rollout_result(self, event: RowEvent) -> None:
        if event.label.endswith("_r2"):
            self.label = event.label
            raise Crash(f"between rounds 1 and 2 of {event.label}")


def test_a_crash_between_two_rounds_resumes_without_rerunning_a_rollout(sequential_run, fit, tmp_path):
    ref, _ = sequential_run
    out = tmp_path / "run"
    crash = CrashInRound()
    with pytest.raises(Crash):
        fit(out, *SEQUENTIAL, callbacks=[crash])
    round1 = out / crash.label.removesuffix("_r2")
    assert (round1 / layout.RESULTS).is_file() and (out / crash.label / layout.RESULTS).is_file()
    before = {
        json.loads(line)["rollout_id"]
        for p in out.rglob(layout.RESULTS)
        for line in p.read_text().splitlines()
    }
    result, executor = fit(out, *SEQUENTIAL)
    assert result.complete
    again = {r.rollout_id for r in executor.requests} & before
    assert not again, f"rerun after resume: {sorted(again)[:5]}"
    assert decisions(out) == decisions(ref)
    assert_no_duplicate_rows(out)


def test_a_copied_task_plays_its_task_with_its_own_draws():
    """``bench/bench_gate.py``'s 100-item profile: ``<id>~copy<k>`` has its task's probability,
    and its rollouts their own seeds."""
    from skillopt.envs.registry import load_env_data
    from skillopt.testing.simulation import COPY_MARK, task_of_copy
    from skillopt.trainer.rollouts import rollout_seed

    item = load_env_data("searchqa").split("train")[0]
    copy = f"{item.id}{COPY_MARK}3"
    assert task_of_copy(copy) == item.id and task_of_copy(item.id) == item.id
    for skill in ("", "Answer from memory first and consult the material only when you are unsure."):
        assert pass_probability(copy, skill) == pass_probability(item.id, skill)
    assert rollout_seed(1, "selection_eval", copy) != rollout_seed(1, "selection_eval", item.id)


def test_on_a_deterministic_target_a_reproduced_round_lets_the_means_decide_as_strict(fit, tmp_path):
    # A tiny alpha puts the first look's bound out of reach of 15 items, so the clear
    # improvement of step 1 needs a second round, which the deterministic target reproduces.
    strict, seq = tmp_path / "strict", tmp_path / "sequential"
    _, strict_ex = fit(strict, "run.simulate=on")
    _, seq_ex = fit(seq, "run.simulate=on", "evaluation.gate_mode=sequential", "evaluation.gate_alpha=0.0001")
    assert [r["action"] for r in _records(seq)] == [r["action"] for r in _records(strict)]
    reproduced = [r for r in _records(seq) if (r.get("gate_test") or {}).get("boundary") == "reproduced"]
    assert reproduced and all(r["gate_test"]["looks"] == 2 for r in reproduced)
    assert {r["gate_reason"] for r in reproduced} <= {"above_current", "no_improvement"}
    assert "accept" in reproduced[0]["action"] and reproduced[0]["gate_reason"] == "above_current"
    # One more round of both skills for each such decision, nothing else.
    n_sel = len(RunPlan.of(config("run.simulate=on"), load_data(config("run.simulate=on"))).selection)
    assert len(seq_ex.requests) <= len(strict_ex.requests) + 2 * n_sel * len(reproduced)


def test_later_rounds_draw_the_splits_unused_items_first_then_repeat_by_seed():
    plan = RunPlan.of(config("evaluation.sel_env_num=10"), load_data(config("evaluation.sel_env_num=10")))
    assert len(plan.selection) == 10 and plan.selection_reserve
    reserve = {it.id for it in plan.selection_reserve}
    selection = {it.id for it in plan.selection}
    rounds = [[it.id for it in plan.round_items(k, seed=3, fraction=0.5)] for k in range(1, 6)]
    assert rounds[0] == [it.id for it in plan.selection]
    # Five items a round: the reserve first (every item once), then the selection items.
    drawn = [i for r in rounds[1:] for i in r]
    assert all(len(r) == 5 and len(set(r)) == 5 for r in rounds[1:])
    assert set(drawn[: len(reserve)]) == reserve and set(drawn[len(reserve) :]) <= selection
    assert rounds == [[it.id for it in plan.round_items(k, seed=3, fraction=0.5)] for k in range(1, 6)]
    assert rounds != [[it.id for it in plan.round_items(k, seed=4, fraction=0.5)] for k in range(1, 6)]


@pytest.mark.parametrize("choice", ["discordant", "fixed"])
def test_a_sequential_run_with_short_rounds_measures_each_round_on_its_items_and_resumes(
    choice, fit, tmp_path
):
    # The defaults: 7 rounds, later ones of a third of the items, chosen where the skills disagreed.
    over = (*SEQUENTIAL[:3], "evaluation.sel_env_num=10", f"evaluation.gate_round_items={choice}")
    ref, out = tmp_path / "ref", tmp_path / "run"
    fit(ref, *over)
    # Crashed in its first second round, then resumed.
    crash = CrashInRound()
    with pytest.raises(Crash):
        fit(out, *over, callbacks=[crash])
    before = {
        json.loads(line)["rollout_id"]
        for p in out.rglob(layout.RESULTS)
        for line in p.read_text().splitlines()
    }
    result, executor = fit(out, *over)
    assert result.complete and not {r.rollout_id for r in executor.requests} & before
    assert decisions(out) == decisions(ref)
    cfg = config(*over)
    plan = RunPlan.of(cfg, load_data(cfg))
    e = cfg.evaluation
    size = plan.round_size(e.gate_round_fraction)
    assert (e.gate_max_rounds, size) == (7, 3)
    measured = 0
    for rec in _records(out):
        step = layout.step_dir(rec["step"])
        for rel in (layout.Step.SELECTION, layout.Step.SELECTION_CURRENT):
            for k in range(2, e.gate_max_rounds + 1):
                path = out / layout.repeat_dir(f"{step}/{rel}", k) / layout.RESULTS
                if path.is_file():
                    ids = {json.loads(line)["id"] for line in path.read_text().splitlines()}
                    if choice == "fixed":
                        assert ids == {
                            it.id for it in plan.round_items(k, seed=8, fraction=e.gate_round_fraction)
                        }
                    else:  # the draws this decision lacked, of the round's items
                        assert 0 < len(ids) <= size and ids <= {it.id for it in plan.round_order(8)}
                    measured += 1
        if rec.get("gate_test"):
            assert (rec["gate_test"]["futility"], rec["gate_test"]["max_looks"]) == ("binding", 7)
            assert rec["gate_test"]["n"] <= 10 + size * (rec["gate_test"]["looks"] - 1)
    assert measured
    assert_no_duplicate_rows(out)
