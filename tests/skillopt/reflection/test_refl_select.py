"""Select / clip by optimizer ranking, and the autonomous learning rate."""

from __future__ import annotations

import json

import pytest

from skillopt.errors import ModelError
from skillopt.reflection.select import autonomous_budget, format_pool, rank_and_select
from skillopt.skill import Edit
from skillopt.trainer.rundir import RunDirectory

SKILL = "# Skill\n- a rule\n"
POOL = tuple(Edit("append", f"- e{i}", target="", support_count=i + 1) for i in range(5))


def test_within_budget_no_call(fake) -> None:
    chat, model = fake([])
    sel = rank_and_select(SKILL, POOL, budget=5, model=model)
    assert sel.items == POOL and not sel.used_model and not sel.fallback
    assert rank_and_select(SKILL, POOL, budget=None, model=model).items == POOL
    assert rank_and_select(SKILL, (), budget=0, model=model).items == ()
    assert chat.calls == 0


def test_budget_zero_selects_nothing(fake) -> None:
    chat, model = fake(['{"reasoning": "x", "selected_indices": [2]}'])
    sel = rank_and_select(SKILL, POOL, budget=0, model=model)
    assert sel.items == () and chat.calls == 0


def test_negative_budget_rejected(fake) -> None:
    _, model = fake([])
    with pytest.raises(ValueError):
        rank_and_select(SKILL, POOL, budget=-1, model=model)


def test_pool_format_and_prompt(fake) -> None:
    chat, model = fake(['{"reasoning": "impact", "selected_indices": [3, 1]}'])
    pool = (Edit("replace", "new 'q'\nline", target="- a rule", support_count=4), *POOL)
    sel = rank_and_select(SKILL, pool, budget=2, model=model, meta_skill_text="- lesson")
    assert sel.items == (pool[3], pool[1])
    assert sel.reasoning == "impact [optimizer-ranked: selected 2/6 edits]"
    assert sel.ranking_details["selected_indices"] == [3, 1] and sel.used_model and not sel.fallback
    user = chat.user()
    assert "[0] op=replace target='- a rule' content='new \\'q\\'\\nline' support=4" in user
    assert "[1] op=append target='' content='- e0' support=1" in user
    assert "Select at most k=2 of the 6 edits" in user
    assert user.startswith("## Optimizer Meta Skill")
    assert chat.requests[0].stage == "ranking"
    assert chat.system().startswith("You select which edits")


def test_index_validation(fake) -> None:
    _chat, model = fake(['{"reasoning": "r", "selected_indices": [4, 4, -1, 99, true, "2", 1.5, 0, 3]}'])
    sel = rank_and_select(SKILL, POOL, budget=3, model=model)
    assert [e.content for e in sel.items] == ["- e4", "- e2", "- e0"]
    assert sel.ranking_details["invalid_indices"] == [4, -1, 99, True, 1.5]


@pytest.mark.parametrize(
    "reply",
    [
        ModelError("down"),
        "no json",
        '{"selected_indices": []}',
        '{"selected_indices": [77]}',
        '{"selected_indices": "0,1"}',
    ],
)
def test_fallback_takes_first_budget_items(fake, reply) -> None:
    _chat, model = fake([reply])
    sel = rank_and_select(SKILL, POOL, budget=2, model=model)
    assert sel.items == POOL[:2] and sel.fallback and sel.used_model
    assert sel.ranking_details["fallback"] is True


def test_rewrite_mode_uses_ranking_rewrite(fake) -> None:
    chat, model = fake(['{"selected_indices": [1]}'])
    items = [
        {"type": "add_rule", "title": f"t{i}", "instruction": f"do {i}", "support_count": 2} for i in range(3)
    ]
    sel = rank_and_select(SKILL, items, budget=1, model=model, update_mode="rewrite")
    assert sel.items == (items[1],)
    assert chat.system().startswith("You select which revision suggestions")
    assert "[0] type=add_rule title='t0' instruction='do 0' priority=medium support=2" in chat.user()


def test_rank_cache(fake, tmp_path) -> None:
    path = tmp_path / "ranked_edits.json"
    _chat, model = fake(['{"reasoning": "r", "selected_indices": [2, 0]}'])
    cache = RunDirectory(tmp_path).slot("", "ranked_edits.json")
    first = rank_and_select(SKILL, POOL, budget=2, model=model, cache=cache)
    again_chat, again = fake([])
    second = rank_and_select(SKILL, POOL, budget=2, model=again, cache=cache)
    assert again_chat.calls == 0 and second.items == first.items
    assert json.loads(path.read_text())["ranking_details"]["selected_indices"] == [2, 0]
    third_chat, third = fake(['{"selected_indices": [1]}'])
    rank_and_select(SKILL, POOL, budget=1, model=third, cache=cache)
    assert third_chat.calls == 1


def test_format_pool_handles_candidates() -> None:
    text = format_pool([{"title": "v2", "change_summary": ["a"], "new_skill": "# x"}])
    assert text.startswith("[0] title='v2'")


# ── autonomous learning rate ──────────────────────────────────────────────────────────────


def _decide(fake, reply, n: int = 4):
    chat, model = fake([reply])
    decision = autonomous_budget(
        SKILL,
        POOL[:n],
        model=model,
        rollout_n=40,
        rollout_hard=0.5,
        rollout_soft=0.6,
        step_buffer_text="Avoid X.",
        meta_skill_text="- lesson",
    )
    return chat, decision


@pytest.mark.parametrize(
    ("raw", "expected", "clamped"),
    [
        (2, 2, False),
        ("3 edits", 3, False),
        (2.0, 2, False),
        (99, 4, True),
        (-2, 0, True),
        ("about -1", 0, True),
        (0, 0, False),
    ],
)
def test_autonomous_coercion_and_clamp(fake, raw, expected: int, clamped: bool) -> None:
    chat, d = _decide(
        fake, json.dumps({"learning_rate": raw, "reasoning": "r", "confidence": "high", "risk_notes": ["x"]})
    )
    assert d.learning_rate == expected and d.clamped is clamped and not d.fallback
    assert d.raw_learning_rate == raw and d.available_update_items == 4
    assert d.confidence == "high" and d.risk_notes == ("x",)
    user = chat.user()
    for piece in (
        "- rollout_n: 40",
        "- rollout_hard: 0.5000",
        "- available update items: 4",
        "append=4",
        "## Previous Steps in This Epoch\nAvoid X.",
        "## Optimizer Meta Skill",
    ):
        assert piece in user
    assert chat.requests[0].stage == "lr_autonomous"


@pytest.mark.parametrize("raw", [True, False, None, "many", [3], {"n": 2}, 10**400])
def test_autonomous_rejects_non_integers(fake, raw) -> None:
    body = (
        '{"learning_rate": '
        + (str(raw) if isinstance(raw, int) and not isinstance(raw, bool) else json.dumps(raw))
        + "}"
    )
    _, d = _decide(fake, body)
    assert d.learning_rate == 0 and d.fallback and d.error


@pytest.mark.parametrize("reply", [ModelError("x"), "prose only"])
def test_autonomous_fallback(fake, reply) -> None:
    _, d = _decide(fake, reply)
    assert d.learning_rate == 0 and d.fallback
    assert json.dumps(d.to_dict())  # JSON-safe record


def test_autonomous_empty_pool_makes_no_call(fake) -> None:
    chat, model = fake([])
    d = autonomous_budget(SKILL, [], model=model, rollout_n=1, rollout_hard=0, rollout_soft=0)
    assert d.learning_rate == 0 and not d.fallback and chat.calls == 0
