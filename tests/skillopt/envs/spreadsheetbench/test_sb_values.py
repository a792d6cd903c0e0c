"""Value semantics of the grader (the official transform_value / compare_cell_value), both as
functions and through real workbooks written by openpyxl."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from skillopt.envs.spreadsheetbench.evaluator import compare_values, grade_case, transform_value


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, 1.0),
        (False, 0.0),
        (3, 3.0),
        (2.346, 2.35),
        (1.004, 1.0),
        ("12", 12.0),
        (" 7.126 ", 7.13),
        ("abc", "abc"),
        ("", ""),
        (None, None),
        (dt.time(12, 30), "12:30"),
        (dt.datetime(2024, 1, 1), 45292.0),
        (dt.datetime(2024, 1, 1, 18, 0), 45293.0),  # serial 45292.75 rounds to the nearest day
        (dt.date(2024, 1, 1), 45292.0),
        (dt.datetime(2024, 1, 1, tzinfo=dt.UTC), 45292.0),  # a zone is dropped, not an error
        (dt.timedelta(hours=1), dt.timedelta(hours=1)),  # other types unchanged
    ],
)
def test_transform_value(value: Any, expected: Any) -> None:
    got = transform_value(value)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize(
    ("gold", "pred", "same"),
    [
        (1, 1.0, True),  # int vs float
        (1, 1.001, True),  # 2-decimal quantisation
        (1, 1.01, False),
        (0.125, 0.13, False),  # 0.125 is exact in binary and round() goes half-even: 0.12
        ("", None, True),
        (None, "", True),
        (None, None, True),
        ("3.50", 3.5, True),  # numeric strings compare as numbers
        ("3,50", 3.5, False),
        (True, 1, True),  # bool → 1.0
        ("abc", "abc", True),
        ("abc", "ABC", False),
        ("x", None, False),
        (" ", None, False),  # whitespace is not empty
        (dt.datetime(2024, 3, 1), 45352, True),  # a date equals its serial number
        (dt.datetime(2024, 3, 1), "2024-03-01", False),  # different types after transform
        (dt.time(9, 5), "09:05", True),  # str(time)[:-3] is '09:05', a non-numeric string
        ("nan", "nan", True),  # deliberate deviation: NaN equals NaN
    ],
)
def test_compare_values(gold: Any, pred: Any, same: bool) -> None:
    assert compare_values(gold, pred) is same


def test_values_through_workbooks(make_xlsx: Callable[..., Path]) -> None:
    cells = {
        "A1": 1,
        "A2": 2.5,
        "A3": dt.datetime(2023, 5, 17),
        "A4": "text",
        "A5": True,
        "A6": dt.time(8, 15),
        "A7": 0.3333,
    }
    gold = make_xlsx({"S": cells})
    pred = make_xlsx(
        {
            "S": {
                "A1": 1.0,  # float for int
                "A2": "2.50",  # numeric string
                "A3": 45063,  # the serial of 2023-05-17
                "A4": "text",
                "A5": 1,  # 1 for True
                "A6": dt.time(8, 15, 0),
                "A7": 0.331,  # rounds to 0.33 as well
            }
        }
    )
    v = grade_case(pred, gold, "A1:A7")
    assert v.ok, v.reason
    assert v.n_cells == 7 and v.n_mismatches == 0


def test_type_mismatch_and_rounding_fail(make_xlsx: Callable[..., Path]) -> None:
    gold = make_xlsx({"S": {"A1": 10, "B1": "10 kg", "C1": 1.234}})
    pred = make_xlsx({"S": {"A1": "ten", "B1": 10, "C1": 1.236}})
    v = grade_case(pred, gold, "A1:C1")
    assert not v.ok
    assert v.reason == "value@S!A1: gt=10.0 pred='ten'"
    assert [(m.cell, m.expected, m.got) for m in v.mismatches] == [
        ("A1", 10.0, "ten"),
        ("B1", "10 kg", 10.0),
        ("C1", 1.23, 1.24),
    ]


def test_empty_string_equals_missing_cell(make_xlsx: Callable[..., Path]) -> None:
    gold = make_xlsx({"S": {"A1": "", "A2": None, "A3": "v"}})
    pred = make_xlsx({"S": {"A3": "v"}})
    v = grade_case(pred, gold, "A1:A3")
    assert v.ok and v.n_empty_both == 2 and len(v.cells) == 1
