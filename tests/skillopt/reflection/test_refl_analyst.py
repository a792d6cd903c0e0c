"""Minibatch reflection: composition, prompts, parsing, failures, resume cache."""

from __future__ import annotations

import json
import random
import re

import pytest

from skillopt.errors import ConfigError, ModelError, ModelTimeout
from skillopt.reflection.analyst import (
    AnalystReplyError,
    RawPatch,
    ReflectParams,
    analyst_user_message,
    make_minibatches,
    parse_analyst_reply,
    reflect,
)
from skillopt.reflection.longitudinal import meta_skill_block
from skillopt.skill import Edit
from skillopt.trainer.rundir import RunDirectory

SKILL = "# Skill\n- read every sheet\n"


def _answer(n_edits: int = 1, **extra) -> str:
    edits = [{"op": "append", "content": f"- rule {i}"} for i in range(n_edits)]
    body = {
        "batch_size": 2,
        "failure_summary": [{"failure_type": "rule_missing", "count": 2, "description": "d"}],
        "patch": {"reasoning": "because", "edits": edits},
        **extra,
    }
    return json.dumps(body)


def _ids_in(user: str) -> list[str]:
    return re.findall(r"### Trajectory \d+ \(id=([^)]+)\)", user)


def _rows(row, n_fail: int, n_succ: int, n_infra: int = 0):
    rows = [row(f"f{i}", 0.0) for i in range(n_fail)]
    rows += [row(f"s{i}", 1.0 if i % 2 else 0.5) for i in range(n_succ)]
    rows += [row(f"x{i}", 0.0, infra=True) for i in range(n_infra)]
    return rows


# ── minibatches ───────────────────────────────────────────────────────────────────────────


def test_minibatch_composition_and_seeding(row) -> None:
    rows = _rows(row, 10, 5)
    fail, succ = make_minibatches(rows, minibatch_size=4, seed=7)
    assert [len(c) for c in fail] == [4, 4, 2]
    assert [len(c) for c in succ] == [4, 1]
    expected_f = [r.id for r in rows if r.id.startswith("f")]
    random.Random(7).shuffle(expected_f)
    expected_s = [r.id for r in rows if r.id.startswith("s")]
    random.Random(8).shuffle(expected_s)
    assert [r.id for c in fail for r in c] == expected_f
    assert [r.id for c in succ for r in c] == expected_s
    again = make_minibatches(rows, minibatch_size=4, seed=7)
    assert [[r.id for r in c] for c in again[0]] == [[r.id for r in c] for c in fail]
    unshuffled, _ = make_minibatches(rows, minibatch_size=4, seed=None)
    assert [r.id for r in unshuffled[0]] == ["f0", "f1", "f2", "f3"]


def test_failure_only_and_invalid_size(row) -> None:
    fail, succ = make_minibatches(_rows(row, 3, 3), minibatch_size=8, seed=1, failure_only=True)
    assert len(fail) == 1 and succ == []
    with pytest.raises(ValueError):
        make_minibatches([], minibatch_size=0)


def test_infra_rows_are_excluded_from_reflection(row, fake) -> None:
    chat, model = fake(lambda req: _answer())
    result = reflect(
        _rows(row, 3, 2, n_infra=4), SKILL, ReflectParams(env=None, budget=4, seed=3), model=model
    )
    assert result.n_calls == 2 == chat.calls
    seen = [i for k in range(chat.calls) for i in _ids_in(chat.user(k))]
    assert sorted(seen) == ["f0", "f1", "f2", "s0", "s1"]
    assert not any("x" in i for i in seen)
    all_ids = [i for p in result.patches for i in p.ids]
    assert sorted(all_ids) == ["f0", "f1", "f2", "s0", "s1"]


# ── prompts ───────────────────────────────────────────────────────────────────────────────


def test_user_message_section_order_and_budget_text() -> None:
    meta = "- prefer concrete procedures"
    text = analyst_user_message(
        SKILL,
        ["### Trajectory 1 (id=a)\nTask: x", "### Trajectory 2 (id=b)\nTask: y"],
        source_type="failure",
        budget=4,
        step_buffer_text="Avoid X.\n\n### Step 1 — REJECT (1/2 failed)",
        meta_skill_text=meta,
    )
    heads = [
        "## Current Skill\n# Skill",
        "## Edits Budget\nProduce at most L=4 edits.",
        "## Previous Steps in This Epoch\nAvoid X.",
        "## Optimizer Meta Skill\n",
        "## Failed Trajectories (2 total)\n### Trajectory 1 (id=a)",
        "---\n### Trajectory 2 (id=b)",
    ]
    positions = [text.index(h) for h in heads]
    assert positions == sorted(positions)
    assert meta_skill_block(meta) in text
    # A pre-wrapped meta block or a headed step buffer is not doubled.
    again = analyst_user_message(
        SKILL,
        ["t"],
        source_type="success",
        budget=2,
        meta_skill_text=meta_skill_block(meta),
        step_buffer_text="## Previous Steps in This Epoch\nAvoid X.",
    )
    assert again.count("## Optimizer Meta Skill") == 1
    assert again.count("## Previous Steps in This Epoch") == 1
    assert "## Successful Trajectories (1 total)" in again


def test_optional_sections_absent_and_mode_budget_headings() -> None:
    plain = analyst_user_message(SKILL, ["t"], source_type="failure", budget=3)
    assert "## Previous Steps" not in plain and "## Optimizer Meta Skill" not in plain
    rewrite = analyst_user_message(SKILL, ["t"], source_type="failure", budget=3, update_mode="rewrite")
    assert "## Suggestions Budget\nProduce at most L=3 suggestions." in rewrite
    full = analyst_user_message(SKILL, ["t"], source_type="failure", budget=3, update_mode="full_rewrite")
    assert "## Update Format\n" in full and "L=" not in full


def test_reflect_uses_env_prompt_and_task_texts(row, fake) -> None:
    chat, model = fake(lambda req: _answer())
    reflect(
        [row("f0", 0.0)],
        SKILL,
        ReflectParams(env="spreadsheetbench", budget=4, seed=None),
        model=model,
        task_texts={"f0": ("Fill column C", "Cell-Level")},
    )
    assert "spreadsheet" in chat.system()
    assert "Task: Fill column C" in chat.user() and "Task type: Cell-Level" in chat.user()
    assert chat.requests[0].stage == "analyst"
    assert chat.requests[0].max_output_tokens == 16384


# ── parsing ───────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    "wrap",
    [
        lambda s: s,
        lambda s: f"```json\n{s}\n```",
        lambda s: f"Here is my analysis of the failures.\n\n```json\n{s}\n```\nHope this helps!",
        lambda s: f"Sure, the patch is {s} as requested.",
    ],
    ids=["bare", "fenced", "prose-fenced", "prose-bare"],
)
def test_parse_reply_shapes(wrap) -> None:
    patch = parse_analyst_reply(wrap(_answer(2)), source_type="failure", budget=4, chunk_ids=["a", "b", "c"])
    assert [e.content for e in patch.items] == ["- rule 0", "- rule 1"]
    assert patch.reasoning == "because"
    assert patch.failure_summary == ({"failure_type": "rule_missing", "count": 2, "description": "d"},)
    assert patch.batch_size == 2
    assert all(
        isinstance(e, Edit) and e.support_count == 2 and e.source_type == "failure" for e in patch.items
    )


def test_parse_truncates_to_budget_and_drops_malformed() -> None:
    payload = {
        "patch": {
            "edits": [
                {"op": "append", "content": "- a"},
                {"op": "explode"},
                {"op": "replace", "content": "x"},
                {"op": "append", "content": "- b"},
                {"op": "append", "content": "- c"},
            ]
        }
    }
    patch = parse_analyst_reply(json.dumps(payload), source_type="success", budget=2, chunk_ids=["a"])
    assert [e.content for e in patch.items] == ["- a", "- b"]
    reasons = [d.reason for d in patch.dropped_items]
    assert any("unknown op" in r for r in reasons) and any("without a target" in r for r in reasons)
    assert reasons.count("over the edit budget") == 1
    assert patch.batch_size == 1  # default: chunk size; clamped to it


def test_batch_size_clamped_to_chunk_and_full_rewrite_not_truncated() -> None:
    text = json.dumps({"batch_size": 10**400, "patch": {"edits": [{"op": "append", "content": "- a"}]}})
    assert parse_analyst_reply(text, source_type="failure", budget=1, chunk_ids=["a", "b"]).batch_size == 2
    full = json.dumps(
        {"patch": {"skill_candidates": [{"new_skill": "# A"}, {"new_skill": "# B"}, {"title": "no skill"}]}}
    )
    patch = parse_analyst_reply(
        full, source_type="failure", update_mode="full_rewrite", budget=1, chunk_ids=["a"]
    )
    assert [c["new_skill"] for c in patch.items] == ["# A", "# B"]
    assert patch.payload_kind == "skill_candidates"
    assert patch.items[0]["support_count"] == 1 and patch.items[0]["merge_level"] == 0


def test_rewrite_mode_items_are_dicts() -> None:
    text = json.dumps(
        {
            "patch": {
                "revise_suggestions": [
                    {"type": "add_rule", "title": "t", "instruction": "do x"},
                    {"type": "clarify"},
                    "junk",
                ]
            }
        }
    )
    patch = parse_analyst_reply(text, source_type="success", update_mode="rewrite", budget=5, chunk_ids=["a"])
    assert patch.items == (
        {
            "type": "add_rule",
            "title": "t",
            "instruction": "do x",
            "support_count": 1,
            "source_type": "success",
            "merge_level": 0,
        },
    )


@pytest.mark.parametrize(
    "text", ["no json here", '{"reasoning": "x"}', '{"patch": {"edits": "oops"}}', '{"a": 1} {"b": 2}']
)
def test_unusable_replies_raise(text: str) -> None:
    with pytest.raises(AnalystReplyError):
        parse_analyst_reply(text, source_type="failure", budget=4, chunk_ids=["a"])


# ── the stage ─────────────────────────────────────────────────────────────────────────────


def test_failed_chunks_yield_none_and_are_counted(row, fake) -> None:
    def reply(req):
        ids = _ids_in(req.messages[1].content)
        if "f0" in ids:
            return ModelTimeout("slow")
        if "f1" in ids:
            return "I could not decide."
        return _answer()

    _chat, model = fake(reply)
    result = reflect(
        [row("f0", 0.0), row("f1", 0.0), row("f2", 0.0), row("s0", 1.0)],
        SKILL,
        ReflectParams(env=None, budget=4, minibatch_size=1, seed=None),
        model=model,
    )
    assert result.n_chunks == 4 and result.n_calls == 4
    assert result.n_failed_chunks == 2
    assert [p.ids for p in result.failure_patches] == [("f2",)]
    assert [p.ids for p in result.success_patches] == [("s0",)]
    reasons = {f.ids: f.reason for f in result.failures}
    assert "ModelTimeout" in reasons[("f0",)]
    assert "no usable JSON" in reasons[("f1",)]


def test_cache_reuse_and_recompute_on_id_mismatch(row, fake, tmp_path) -> None:
    rows = _rows(row, 5, 3)
    _chat, model = fake(lambda req: _answer())
    first = reflect(
        rows,
        SKILL,
        ReflectParams(env=None, budget=4, minibatch_size=4, seed=11),
        model=model,
        cache=RunDirectory(tmp_path).stage_cache(""),
    )
    assert first.n_calls == 3
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["minibatch_fail_000.json", "minibatch_fail_001.json", "minibatch_succ_000.json"]
    stored = json.loads((tmp_path / "minibatch_fail_000.json").read_text())
    assert stored["ids"] == list(first.failure_patches[0].ids)
    assert "raw_text" in stored and stored["patch"]["edits"][0]["content"] == "- rule 0"
    assert stored["source_type"] == "failure" and stored["batch_size"] == 2

    chat2, model2 = fake([])  # any call would fail the test
    second = reflect(
        rows,
        SKILL,
        ReflectParams(env=None, budget=4, minibatch_size=4, seed=11),
        model=model2,
        cache=RunDirectory(tmp_path).stage_cache(""),
    )
    assert chat2.calls == 0 and second.n_calls == 0 and second.n_cached == 3
    assert second.failure_patches == first.failure_patches
    assert second.success_patches == first.success_patches

    # A file made from other inputs (another chunk, skill or prompt) is recomputed and
    # replaced; the others are reused.
    stored["cache_key"] = "analyst/v1/made-for-another-chunk"
    (tmp_path / "minibatch_fail_000.json").write_text(json.dumps(stored))
    chat3, model3 = fake(lambda req: _answer(2))
    third = reflect(
        rows,
        SKILL,
        ReflectParams(env=None, budget=4, minibatch_size=4, seed=11),
        model=model3,
        cache=RunDirectory(tmp_path).stage_cache(""),
    )
    assert chat3.calls == 1 and third.n_cached == 2
    assert _ids_in(chat3.user()) == list(first.failure_patches[0].ids)
    refreshed = json.loads((tmp_path / "minibatch_fail_000.json").read_text())
    assert refreshed["ids"] == list(first.failure_patches[0].ids)
    assert len(refreshed["patch"]["edits"]) == 2

    # A different seed changes the composition: no stale file is trusted.
    _chat4, model4 = fake(lambda req: _answer())
    fourth = reflect(
        rows,
        SKILL,
        ReflectParams(env=None, budget=4, minibatch_size=4, seed=99),
        model=model4,
        cache=RunDirectory(tmp_path).stage_cache(""),
    )
    for patch in fourth.failure_patches + fourth.success_patches:
        name = f"minibatch_{'fail' if patch.source_type == 'failure' else 'succ'}_{patch.minibatch:03d}.json"
        assert json.loads((tmp_path / name).read_text())["ids"] == list(patch.ids)


def test_corrupt_cache_file_is_recomputed(row, fake, tmp_path) -> None:
    (tmp_path / "minibatch_fail_000.json").write_text("{ not json")
    chat, model = fake(lambda req: _answer())
    result = reflect(
        [row("f0", 0.0)],
        SKILL,
        ReflectParams(env=None, budget=4, seed=0),
        model=model,
        cache=RunDirectory(tmp_path).stage_cache(""),
    )
    assert chat.calls == 1 and len(result.failure_patches) == 1


def test_failed_chunk_is_not_cached(row, fake, tmp_path) -> None:
    _chat, model = fake([ModelError("down")])
    result = reflect(
        [row("f0", 0.0)],
        SKILL,
        ReflectParams(env=None, budget=4, seed=0),
        model=model,
        cache=RunDirectory(tmp_path).stage_cache(""),
    )
    assert result.n_failed_chunks == 1 and not list(tmp_path.iterdir())


def test_raw_patch_round_trip() -> None:
    patch = parse_analyst_reply(
        _answer(2, success_patterns=["p"]), source_type="failure", budget=4, chunk_ids=["a", "b"]
    )
    assert RawPatch.from_dict(json.loads(json.dumps(patch.to_dict()))) == patch
    with pytest.raises(AnalystReplyError):
        RawPatch.from_dict({"nope": 1})


def test_skill_aware_notes_only_batch_keeps_its_notes(row, fake) -> None:
    notes_only = json.dumps(
        {
            "patch": {"reasoning": "lapse", "edits": []},
            "appendix_notes": ["- Re-read the header rule.", {"note": "Check totals."}, "check totals"],
        }
    )
    chat, model = fake([notes_only])
    result = reflect(
        [row("f0", 0.0)], SKILL, ReflectParams(env=None, budget=4, seed=0, skill_aware=True), model=model
    )
    assert "SKILL_DEFECT" in chat.system()
    assert len(result.failure_patches) == 1 and result.failure_patches[0].items == ()
    assert result.appendix_notes == ("Re-read the header rule.", "Check totals.")


def test_notes_ignored_when_skill_aware_off(row, fake) -> None:
    chat, model = fake([_answer(appendix_notes=["n"])])
    result = reflect([row("f0", 0.0)], SKILL, ReflectParams(env=None, budget=4, seed=0), model=model)
    assert result.appendix_notes == () and "SKILL_DEFECT" not in chat.system()


def test_skill_aware_off_prompts_identical_to_baseline(row, fake) -> None:
    rows = _rows(row, 2, 2)
    a_chat, a = fake(lambda req: _answer())
    b_chat, b = fake(lambda req: _answer())
    reflect(rows, SKILL, ReflectParams(env="spreadsheetbench", budget=4, seed=5), model=a)
    reflect(
        rows,
        SKILL,
        ReflectParams(env="spreadsheetbench", budget=4, seed=5, skill_aware=False, skill_aware_source="both"),
        model=b,
    )
    key = lambda r: r.messages[1].content  # noqa: E731
    assert sorted((r.messages[0].content, key(r)) for r in a_chat.requests) == sorted(
        (r.messages[0].content, key(r)) for r in b_chat.requests
    )


def test_bad_params_are_refused_when_built() -> None:
    with pytest.raises(ValueError, match="budget must be >= 0, got -1"):
        ReflectParams(env=None, budget=-1, seed=0)
    with pytest.raises(ValueError, match="minibatch_size must be >= 1, got 0"):
        ReflectParams(env=None, budget=1, seed=0, minibatch_size=0)
    with pytest.raises(ConfigError, match="unknown skill update mode 'nope'"):
        ReflectParams(env=None, budget=1, seed=0, update_mode="nope")
