"""Prompt loading, the JSON schema each prompt states, and the skill-aware toggle."""

from __future__ import annotations

import json
import re

import pytest

from skillopt.reflection.prompts import GENERIC_PROMPTS, analyst_system_prompt, load_prompt

GENERIC = {
    "analyst_error": ["batch_size", "failure_summary", "patch", "edits"],
    "analyst_success": ["batch_size", "success_patterns", "patch", "edits"],
    "analyst_error_rewrite": ["failure_summary", "revise_suggestions", "priority_hint"],
    "analyst_success_rewrite": ["success_patterns", "revise_suggestions"],
    "analyst_error_full_rewrite": ["failure_summary", "skill_candidates", "new_skill"],
    "analyst_success_full_rewrite": ["success_patterns", "skill_candidates", "new_skill"],
    "merge_failure": ["edits", "support_count", "source_type"],
    "merge_success": ["edits", "support_count"],
    "merge_final": ["edits", "source_type"],
    "merge_failure_rewrite": ["revise_suggestions"],
    "merge_success_rewrite": ["revise_suggestions"],
    "merge_final_rewrite": ["revise_suggestions"],
    "merge_failure_full_rewrite": ["skill_candidates", "new_skill"],
    "merge_success_full_rewrite": ["skill_candidates", "new_skill"],
    "merge_final_full_rewrite": ["skill_candidates", "new_skill"],
    "ranking": ["selected_indices"],
    "ranking_rewrite": ["selected_indices"],
    "rewrite_skill": ["change_summary", "new_skill"],
    "lr_autonomous": ["learning_rate", "confidence", "risk_notes"],
    "slow_update": ["slow_update_content"],
    "meta_skill": ["meta_skill_content"],
    "probe_diagnostic": ["diagnostic_instruction"],
    "analyst_probe": ["failure_summary", "edits"],
    "analyst_probe_rewrite": ["revise_suggestions"],
    "skill_aware_failure": ["appendix_notes"],
    "skill_aware_success": ["appendix_notes"],
    "appendix_consolidate": ["notes"],
}


def _json_blocks(text: str) -> list[str]:
    return re.findall(r"```json\n(.*?)```", text, re.S)


@pytest.mark.parametrize("name", sorted(GENERIC))
def test_every_prompt_states_its_json_schema(name: str) -> None:
    text = load_prompt(name)
    blocks = _json_blocks(text)
    assert blocks, f"{name} shows no ```json schema"
    for key in GENERIC[name]:
        assert f'"{key}"' in text, f"{name} does not name {key}"
    for block in blocks:  # the schema examples are themselves valid JSON
        json.loads(block)


def test_no_unexpected_prompt_files() -> None:
    assert {p.stem for p in GENERIC_PROMPTS.glob("*.md")} == set(GENERIC)


def test_env_prompt_wins_over_generic_and_falls_back() -> None:
    env = load_prompt("analyst_error", "spreadsheetbench")
    assert env != load_prompt("analyst_error")
    assert "spreadsheet" in env
    # No env-specific rewrite variant: the generic text is used.
    assert load_prompt("analyst_error_rewrite", "spreadsheetbench") == load_prompt("analyst_error_rewrite")
    assert load_prompt("ranking", "no_such_env") == load_prompt("ranking")


def test_missing_prompt_names_both_paths() -> None:
    with pytest.raises(FileNotFoundError) as err:
        load_prompt("does_not_exist", "spreadsheetbench")
    message = str(err.value)
    assert "envs/spreadsheetbench/prompts/does_not_exist.md" in message
    assert "skillopt/prompts/does_not_exist.md" in message


@pytest.mark.parametrize("name", ["../secret", "a/b", "", "Analyst"])
def test_prompt_names_are_plain_identifiers(name: str) -> None:
    with pytest.raises(ValueError):
        load_prompt(name)
    with pytest.raises(ValueError):
        load_prompt("ranking", env=name or "/x")


@pytest.mark.parametrize("name", ["analyst_error", "analyst_success"])
def test_spreadsheetbench_prompts_forbid_copying_gold_values(name: str) -> None:
    text = load_prompt(name, "spreadsheetbench")
    assert "Never hard-code file paths" in text or "never copy" in text.lower()
    assert "```json" in text
    json.loads(_json_blocks(text)[0])


def test_spreadsheetbench_failure_types_and_exploration() -> None:
    text = load_prompt("analyst_error", "spreadsheetbench")
    for failure_type in (
        "rule_missing",
        "rule_wrong",
        "rule_ignored",
        "data_exploration",
        "code_error",
        "other",
    ):
        assert f"`{failure_type}`" in text
    assert "EXPECTED" in text and "Never copy expected values" in text
    assert "explore more broadly" in text
    # The prompt itself carries no task specifics (no cell addresses or xlsx file names).
    assert not re.search(r"\b[A-Z]{1,2}\d{1,4}\b", text.replace("L edits", ""))
    assert ".xlsx" not in text


@pytest.mark.parametrize("mode", ["patch", "rewrite", "full_rewrite"])
@pytest.mark.parametrize("kind", ["failure", "success"])
@pytest.mark.parametrize("env", [None, "spreadsheetbench"])
def test_skill_aware_off_is_byte_identical(mode: str, kind: str, env: str | None) -> None:
    base = analyst_system_prompt(kind, env=env, update_mode=mode)  # type: ignore[arg-type]
    off = analyst_system_prompt(kind, env=env, update_mode=mode, skill_aware=False, skill_aware_source="both")  # type: ignore[arg-type]
    suffix = {"patch": "", "rewrite": "_rewrite", "full_rewrite": "_full_rewrite"}[mode]
    name = ("analyst_error" if kind == "failure" else "analyst_success") + suffix
    assert base == off == load_prompt(name, env)
    assert "SKILL_DEFECT" not in off and "DISCOVERY" not in off


def test_skill_aware_on_adds_sections() -> None:
    base = analyst_system_prompt("failure", env="spreadsheetbench")
    on = analyst_system_prompt("failure", env="spreadsheetbench", skill_aware=True)
    assert on.startswith(base) and "SKILL_DEFECT" in on and "EXECUTION_LAPSE" in on
    # Success analysts get their section only when notes come from both sources.
    assert analyst_system_prompt("success", env=None, skill_aware=True) == load_prompt("analyst_success")
    both = analyst_system_prompt("success", env=None, skill_aware=True, skill_aware_source="both")
    assert "DISCOVERY" in both and "OPTIMIZATION" in both
