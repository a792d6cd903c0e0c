"""Deep-reflect probe: picking items, the diagnostic instruction, reflecting on the re-runs."""

from __future__ import annotations

import json
import re

import pytest

from skillopt.errors import ConfigError, ModelError
from skillopt.reflection.probe import (
    MAX_DIAGNOSTIC_CHARS,
    diagnostic_instruction,
    pick_probe_items,
    reflect_on_probe,
)
from skillopt.trainer.rundir import RunDirectory
from skillopt.types import Message

SKILL = "# Skill\n- read the header row\n"
DIAG = "Before writing code, print the sheet names and the first non-empty row of each sheet."


def _rows(row):
    rows = [row(f"e{i}", 0.0, fail_reason="exec-error: boom") for i in range(4)]
    rows += [row(f"m{i}", 0.0, fail_reason="eval-mismatch: x") for i in range(2)]
    rows += [row("o0", 0.0, fail_reason="output-not-found")]
    rows += [row(f"s{i}", 1.0) for i in range(3)]
    rows += [row("x0", 0.0, infra=True, fail_reason="oom: killed")] * 5
    return rows


def test_pick_representative_and_deterministic(row) -> None:
    rows = _rows(row)
    picked = pick_probe_items(rows, n_failures=3, n_successes=1, seed=5)
    ids = [r.id for r in picked]
    assert (
        ids[0].startswith("e") and ids[1].startswith("m") and ids[2] == "o0"
    )  # one per group, largest first
    assert ids[3].startswith("s")
    assert [r.id for r in pick_probe_items(rows, n_failures=3, n_successes=1, seed=5)] == ids
    assert not any(r.infra_error for r in picked)
    fill = [r.id for r in pick_probe_items(rows, n_failures=5, n_successes=0, seed=1)]
    assert len(fill) == len(set(fill)) == 5 and fill[2] == "o0"
    plain = [r.id for r in pick_probe_items(rows, n_failures=2, n_successes=2, seed=None)]
    assert plain == ["e0", "m0", "s0", "s1"]
    assert pick_probe_items([], seed=1) == []


def test_diagnostic_instruction(row, fake) -> None:
    chat, model = fake([json.dumps({"reasoning": "layout?", "diagnostic_instruction": f"  {DIAG}  "})])
    probe_rows = pick_probe_items(_rows(row), seed=0)
    assert (
        diagnostic_instruction(SKILL, probe_rows, model=model, task_texts={"e0": ("Fill C", "cell")}) == DIAG
    )
    assert chat.requests[0].stage == "probe"
    assert chat.system().startswith("You design a diagnostic probe")
    assert f"## Trajectories to Probe ({len(probe_rows)} total)" in chat.user()


@pytest.mark.parametrize("reply", [ModelError("x"), "prose", '{"diagnostic_instruction": ""}'])
def test_diagnostic_failures_give_none(row, fake, reply) -> None:
    _, model = fake([reply])
    assert diagnostic_instruction(SKILL, [row("a", 0.0)], model=model) is None


def test_diagnostic_is_capped_and_needs_rows(row, fake) -> None:
    chat, model = fake([json.dumps({"diagnostic_instruction": "x" * 5000})])
    assert len(diagnostic_instruction(SKILL, [row("a", 0.0)], model=model) or "") == MAX_DIAGNOSTIC_CHARS
    assert diagnostic_instruction(SKILL, [row("b", 0.0, infra=True)], model=model) is None
    assert chat.calls == 1


def _answer(*contents: str) -> str:
    return json.dumps(
        {
            "batch_size": 2,
            "failure_summary": [
                {"failure_type": "data_exploration", "count": 2, "description": "wrong header row"}
            ],
            "patch": {
                "reasoning": "the probe shows the header is on row 3",
                "edits": [{"op": "append", "content": c} for c in contents],
            },
        }
    )


def test_probe_flow_side_by_side(row, fake) -> None:
    originals = [row("a", 0.0), row("b", 0.0), row("c", 1.0)]
    reruns = [
        row("a", 0.0, messages=[Message(role="assistant", content="sheets: Data; header row 3")]),
        row("c", 1.0, messages=[Message(role="assistant", content="sheets: S")]),
        row("b", 0.0, infra=True),  # an infra re-run is left out
    ]
    chat, model = fake(
        [
            _answer(
                "- Locate the header row by content, not by position.",
                f"- Always: {DIAG.lower()}",  # quotes the diagnostic instruction → dropped
                "- Check value types.",
                "- Fourth edit over budget.",
            )
        ]
    )
    patch = reflect_on_probe(
        originals,
        reruns,
        SKILL,
        model=model,
        budget=2,
        diagnostic_text=DIAG,
        step_buffer_text="Avoid X.",
        meta_skill_text="- lesson",
    )
    assert patch is not None and patch.source_type == "probe"
    assert patch.ids == ("a", "c")
    assert [e.content for e in patch.items] == [
        "- Locate the header row by content, not by position.",
        "- Check value types.",
    ]
    assert all(e.source_type == "probe" for e in patch.items)
    assert any(d.reason == "quotes the diagnostic instruction" for d in patch.dropped_items)
    assert patch.failure_summary[0]["failure_type"] == "data_exploration"
    user = chat.user()
    heads = [
        "## Current Skill",
        "## Edits Budget\nProduce at most L=2 edits.",
        "## Previous Steps in This Epoch",
        "## Optimizer Meta Skill",
        "## Diagnostic Instruction Used",
        "## Probed Items (2 total)",
        "### Probe 1 (id=a)",
        "#### Original run",
        "#### Diagnostic re-run",
        "header row 3",
        "### Probe 2 (id=c)",
    ]
    positions = [user.index(h) for h in heads]
    assert positions == sorted(positions)
    assert re.search(r"##### Trajectory 1 \(id=a\)", user)
    assert chat.requests[0].stage == "probe" and chat.system().startswith("You are the probe analyst")


def test_probe_reflect_failures_and_cache(row, fake, tmp_path) -> None:
    originals, reruns = [row("a", 0.0)], [row("a", 0.0)]
    _, model = fake([ModelError("x"), "prose"])
    assert reflect_on_probe(originals, reruns, SKILL, model=model, budget=2) is None
    assert reflect_on_probe(originals, reruns, SKILL, model=model, budget=2) is None
    assert reflect_on_probe(originals, [row("z", 0.0)], SKILL, model=model, budget=2) is None
    cache = RunDirectory(tmp_path).slot("probe", "probe_patch.json")
    _chat, model = fake([_answer("- one")])
    first = reflect_on_probe(
        originals, reruns, SKILL, model=model, budget=2, diagnostic_text=DIAG, cache=cache
    )
    again_chat, again = fake([])
    second = reflect_on_probe(
        originals, reruns, SKILL, model=again, budget=2, diagnostic_text=DIAG, cache=cache
    )
    assert (tmp_path / "probe" / "probe_patch.json").exists()
    assert again_chat.calls == 0 and second == first
    with pytest.raises(ConfigError):
        reflect_on_probe(originals, reruns, SKILL, model=model, budget=2, update_mode="full_rewrite")


def test_probe_rewrite_mode(row, fake) -> None:
    reply = json.dumps(
        {"patch": {"revise_suggestions": [{"type": "add_rule", "title": "t", "instruction": "find headers"}]}}
    )
    chat, model = fake([reply])
    patch = reflect_on_probe(
        [row("a", 0.0)], [row("a", 0.0)], SKILL, model=model, budget=1, update_mode="rewrite"
    )
    assert patch is not None and patch.items[0]["source_type"] == "probe"
    assert "revise_suggestions" in chat.system()
