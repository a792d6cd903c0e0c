"""Answer-position parsing, with every quirk that occurs in the real data."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from skillopt.envs.spreadsheetbench.evaluator import grade_case
from skillopt.envs.spreadsheetbench.positions import (
    RangeRef,
    cell_coordinates,
    find_sheet,
    parse_answer_position,
    parse_range_piece,
    resolve_bounds,
    resolve_default_sheet,
    split_sheet_list,
)


def refs(pos: str) -> list[tuple[str | None, str]]:
    return [(r.sheet, r.ref) for r in parse_answer_position(pos)]


@pytest.mark.parametrize(
    ("pos", "expected"),
    [
        ("'Sheet1'!A1:F14", [("Sheet1", "A1:F14")]),
        ("Sheet1'!A1:F14", [("Sheet1", "A1:F14")]),  # 262-17: one stray quote
        (
            "'Sheet1!'A1:A50,'Sheet2!'A1:E20,'Sheet3!'A1:A50'",  # 170-13: quote after the bang
            [("Sheet1", "A1:A50"), ("Sheet2", "A1:E20"), ("Sheet3", "A1:A50")],
        ),
        ("D1,D5,D9", [(None, "D1"), (None, "D5"), (None, "D9")]),  # 51249
        ("  'Items Older than 30 days' ! A1:I2 ", [("Items Older than 30 days", "A1:I2")]),
        ("'Sub CO's'!B4:B11", [("Sub CO's", "B4:B11")]),  # 49782: apostrophe in the name
        ("'Sub CO''s'!B4", [("Sub CO's", "B4")]),  # Excel's escaped form
        ("'b2b, sez, de'!A1:B2,C3", [("b2b, sez, de", "A1:B2"), (None, "C3")]),  # 130-9 style
        ("'A1, B2'!C3", [("A1, B2", "C3")]),  # a name piece that looks like a cell
        ("A:G", [(None, "A:G")]),  # 283-32 style whole columns
        ("'S'!B:B", [("S", "B:B")]),
        ("2:5", [(None, "2:5")]),
        ("$A$1:$b$3", [(None, "A1:B3")]),
        ("c5:a1", [(None, "A1:C5")]),  # corners reordered
        ("'工作表1'!I2:J7", [("工作表1", "I2:J7")]),
        ("A1,,B2,", [(None, "A1"), (None, "B2")]),
        ("'2022'!B5:M8", [("2022", "B5:M8")]),
    ],
)
def test_parse_quirks(pos: str, expected: list[tuple[str | None, str]]) -> None:
    assert refs(pos) == expected


@pytest.mark.parametrize("pos", ["BD2:308", "A1:B", "Sheet1!", "", " , ", "XFE1", "A0", "'unterminated, A1"])
def test_bad_positions_raise_value_error_naming_the_piece(pos: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_answer_position(pos)
    text = str(info.value)
    assert pos.strip(" ,") in text or "names no range" in text


def test_error_names_the_bad_piece_not_the_whole_position() -> None:
    with pytest.raises(ValueError, match=r"piece 'BD2:308'"):
        parse_answer_position("A1:B2,BD2:308")


def test_range_ref_kind_bounds_and_str() -> None:
    assert RangeRef(None, "D1").kind == "cell"
    assert RangeRef("S", "A1:C3").bounds == (1, 1, 3, 3)
    assert RangeRef(None, "A:G").bounds == (1, None, 7, None)
    assert RangeRef(None, "2:5").bounds == (None, 2, None, 5)
    assert str(RangeRef("Sub CO's", "B4")) == "'Sub CO''s'!B4"
    with pytest.raises(ValueError, match="canonical"):
        RangeRef(None, "$a$1")
    assert parse_range_piece("'x'!a1") == RangeRef("x", "A1")


def test_cell_coordinates_are_column_major() -> None:
    assert cell_coordinates(RangeRef(None, "A1:B2")) == ["A1", "A2", "B1", "B2"]
    assert cell_coordinates(RangeRef(None, "D5")) == ["D5"]
    assert cell_coordinates(RangeRef(None, "A:B"), used_max_row=2) == ["A1", "A2", "B1", "B2"]
    assert cell_coordinates(RangeRef(None, "2:3"), used_max_col=2) == ["A2", "A3", "B2", "B3"]
    # An open side never shrinks below row/column 1 (empty sheets still check A1).
    assert resolve_bounds(RangeRef(None, "A:A"), used_max_row=0, used_max_col=0) == (1, 1, 1, 1)


def test_find_sheet_exact_then_case_insensitive() -> None:
    names = ["Sheet1", "Data "]
    assert find_sheet("Sheet1", names) == "Sheet1"
    assert find_sheet("sheet1", names) == "Sheet1"
    assert find_sheet("data", names) == "Data "
    assert find_sheet("Other", names) is None
    assert find_sheet("a", ["A", "a "]) is None  # ambiguous after folding → no guess


def test_answer_sheet_lists() -> None:
    assert split_sheet_list("'Sheet1','Sheet2'") == ["Sheet1", "Sheet2"]
    assert split_sheet_list("Sheet1,Sheet2,Sheet3") == ["Sheet1", "Sheet2", "Sheet3"]
    assert split_sheet_list("b2b, sez, de", ["b2b, sez, de"]) == ["b2b, sez, de"]
    assert split_sheet_list("") == []


def test_default_sheet_rule() -> None:
    gold = ["First", "Answer"]
    assert resolve_default_sheet(gold) == "First"  # the official rule
    assert resolve_default_sheet(gold, "Answer") == "Answer"  # one existing sheet named
    assert resolve_default_sheet(gold, "answer") == "Answer"
    assert resolve_default_sheet(gold, "'First','Answer'") == "First"  # several: official rule
    assert resolve_default_sheet(gold, "Missing") == "First"  # unknown: official rule
    with pytest.raises(ValueError):
        resolve_default_sheet([])


# -- the positions in the grader, against real workbooks --------------------------------------


def test_sheet_with_commas_is_graded(make_xlsx: Callable[..., Path]) -> None:
    cells = {"A1": 1, "A2": 2, "B1": 3, "B2": 4}
    gold = make_xlsx({"First": {"C3": "x"}, "b2b, sez, de": cells})
    good = make_xlsx({"First": {"C3": "x"}, "b2b, sez, de": cells})
    bad = make_xlsx({"First": {"C3": "y"}, "b2b, sez, de": cells})
    pos = "'b2b, sez, de'!A1:B2,C3"
    v = grade_case(good, gold, pos)
    assert v.ok and v.n_cells == 5
    v = grade_case(bad, gold, pos)
    assert not v.ok and v.reason == "value@First!C3: gt='x' pred='y'"


def test_whole_column_expands_to_used_rows_of_both_sheets(make_xlsx: Callable[..., Path]) -> None:
    gold = make_xlsx({"S": {"A1": "h", "A3": 1, "G2": 7}})
    same = make_xlsx({"S": {"A1": "h", "A3": 1, "G2": 7}})
    v = grade_case(same, gold, "A:G")
    assert v.ok and v.n_cells == 7 * 3
    # A value below the gold's last row is still checked: rows expand to the prediction's too.
    extra = make_xlsx({"S": {"A1": "h", "A3": 1, "G2": 7, "C9": "stray"}})
    v = grade_case(extra, gold, "'S'!A:G")
    assert not v.ok and v.n_cells == 7 * 9
    assert v.reason == "value@S!C9: gt=None pred='stray'"


def test_whole_row_expands_to_used_columns(make_xlsx: Callable[..., Path]) -> None:
    gold = make_xlsx({"S": {"A2": 1, "D3": 2}})
    pred = make_xlsx({"S": {"A2": 1, "D3": 2, "F2": 5}})
    v = grade_case(pred, gold, "2:3")
    assert not v.ok and v.n_cells == 6 * 2 and v.reason == "value@S!F2: gt=None pred=5.0"


def test_absolute_lowercase_and_sheetless_refs(make_xlsx: Callable[..., Path]) -> None:
    gold = make_xlsx({"Main": {"B2": 10}, "Other": {"B2": 99}})
    pred = make_xlsx({"Main": {"B2": 10}, "Other": {"B2": 0}})
    assert grade_case(pred, gold, "$b$2").ok  # no sheet → the gold's first sheet
    assert grade_case(pred, gold, "b2", answer_sheet="Main,Other").ok  # a list: first sheet
    v = grade_case(pred, gold, "B2", answer_sheet="Other")  # exactly one existing sheet
    assert not v.ok and v.reason.startswith("value@Other!B2")
