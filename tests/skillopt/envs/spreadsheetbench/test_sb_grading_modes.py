"""``grading.mode``: ``official`` reproduces the official grader's verdicts (its errors too);
``corrected`` (the default) fixes each of them. One hand-made workbook pair per difference."""

from __future__ import annotations

import io

import openpyxl
import pytest

from skillopt.config import load_config
from skillopt.envs.registry import get_env, load_env_data
from skillopt.envs.spreadsheetbench.evaluator import grade_case
from skillopt.errors import ConfigError, InvalidRequest
from skillopt.types import ModelSpec, RolloutRequest, SkillVersion


def book(sheets: dict[str, dict[str, object]]) -> bytes:
    wb = openpyxl.Workbook()
    wb.remove(wb.active)
    for title, cells in sheets.items():
        ws = wb.create_sheet(title)
        for coord, value in cells.items():
            ws[coord] = value
    buf = io.BytesIO()
    wb.save(buf)
    return buf.getvalue()


def both(pred: bytes, gold: bytes, position: str, answer_sheet: str | None = None) -> tuple[bool, bool]:
    official = grade_case(pred, gold, position, answer_sheet, mode="official")
    corrected = grade_case(pred, gold, position, answer_sheet, mode="corrected")
    return official.ok, corrected.ok


def test_identical_workbooks_pass_in_both_modes():
    gold = book({"Sheet1": {"A1": 1, "B2": "x", "C3": 2.5}})
    assert both(gold, gold, "'Sheet1'!A1:C3") == (True, True)
    wrong = book({"Sheet1": {"A1": 1, "B2": "y", "C3": 2.5}})
    assert both(wrong, gold, "'Sheet1'!A1:C3") == (False, False)


def test_whole_column_range_crashes_the_official_grader():  # task 283-32: 'A:G'
    gold = book({"Sheet1": {"A1": 1, "G5": 7}})
    assert both(gold, gold, "A:G") == (False, True)
    verdict = grade_case(gold, gold, "A:G", mode="official")
    assert verdict.reason.startswith("official-grader-error:")


def test_a_comma_in_a_sheet_name_breaks_the_official_split():  # task 130-9: 'b2b, sez, de'
    gold = book({"b2b, sez, de": {"A1": 1, "B2": 2}})
    assert both(gold, gold, "'b2b, sez, de'!A1:B2") == (False, True)


def test_lower_case_column_letters_widen_the_official_range():  # K4:k35, E4:j11
    # 'k' is column 43 (AQ) to the official arithmetic: K4:k5 covers K..AQ, so a difference in
    # M4 (outside column K) fails it; the corrected grader reads K4:K5.
    gold = book({"Sheet1": {"K4": 1, "K5": 2, "M4": "gold only"}})
    pred = book({"Sheet1": {"K4": 1, "K5": 2, "M4": "changed"}})
    assert both(pred, gold, "'Sheet1'!K4:k5") == (False, True)
    assert both(gold, gold, "'Sheet1'!K4:k5") == (True, True)


def test_a_range_without_a_sheet_is_the_first_sheet_officially_not_answer_sheet():
    gold = book({"Notes": {"A1": "read me"}, "Data": {"A1": 10, "A2": 20}})
    pred = book({"Notes": {"A1": "scribbled over"}, "Data": {"A1": 10, "A2": 20}})
    assert both(pred, gold, "A1:A2", answer_sheet="Data") == (False, True)


def test_sheet_names_match_case_insensitively_only_when_corrected():  # the deliberate difference
    gold = book({"Sheet1": {"A1": 5}})
    pred = book({"sheet1": {"A1": 5}})
    assert both(pred, gold, "'Sheet1'!A1") == (False, True)
    assert grade_case(pred, gold, "'Sheet1'!A1", mode="official").reason == "worksheet not found: Sheet1"


def test_a_reversed_range_is_empty_to_the_official_grader():
    gold = book({"Sheet1": {"A1": 1, "B5": 2}})
    pred = book({"Sheet1": {"A1": 9, "B5": 9}})
    official, corrected = both(pred, gold, "'Sheet1'!B5:A1")
    assert official is True and corrected is False


def test_official_value_rules_match_the_corrected_ones_on_ordinary_cells():
    gold = book({"S": {"A1": 1.004, "A2": "12", "A3": None, "A4": "", "A5": True}})
    pred = book({"S": {"A1": 1.0, "A2": 12, "A3": "", "A4": None, "A5": 1}})
    assert both(pred, gold, "'S'!A1:A5") == (True, True)
    text = book({"S": {"A1": "1.0", "A2": "twelve", "A3": None, "A4": None, "A5": 1}})
    assert both(text, gold, "'S'!A1:A5") == (False, False)


def test_the_mode_is_an_env_option_carried_to_the_grader_and_checked():
    cfg = load_config("spreadsheetbench", ["env.options.grading.mode=official"])
    assert cfg.env.options == {"grading": {"mode": "official"}, "sample": "benchmark"}
    assert load_config("spreadsheetbench").env.options == {
        "grading": {"mode": "corrected"},
        "sample": "benchmark",
    }
    with pytest.raises(ConfigError, match=r"env\.options\.grading\.mode"):
        load_config("spreadsheetbench", ["env.options.grading.mode=lenient"])
    data = load_env_data("spreadsheetbench", options=cfg.env.options)
    item = data.split("val")[0]
    assert item.grading.attributes["grading_mode"] == "official"
    assert data.describe()["grading_mode"] == "official"
    bad = RolloutRequest(
        rollout_id="modes/bad",
        env="spreadsheetbench",
        agent="codegen_single",
        task=item.task,
        grading=type(item.grading)(
            attributes={**item.grading.attributes, "grading_mode": "lenient"}, cases=item.grading.cases
        ),
        skill=SkillVersion(),
        model=ModelSpec(provider="p", model="m"),
    )
    with pytest.raises(InvalidRequest, match="grading_mode must be one of official, corrected"):
        get_env("spreadsheetbench").validate(bad)
