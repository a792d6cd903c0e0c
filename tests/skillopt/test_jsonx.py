"""JSON extraction from LLM output: fences, scanning, ambiguity, repair, arrays, linear time."""

from __future__ import annotations

import pytest

from skillopt.jsonx import extract_json_array, extract_json_object, extraction_error

# ── objects: fences ───────────────────────────────────────────────────────────────────────


def test_json_fence() -> None:
    text = 'Here you go:\n```json\n{"edits": [{"op": "append"}]}\n```\nThanks.'
    assert extract_json_object(text) == {"edits": [{"op": "append"}]}
    assert extraction_error(text) == ""


def test_bare_and_uppercase_fences() -> None:
    assert extract_json_object('```\n{"a": 1}\n```') == {"a": 1}
    assert extract_json_object('```JSON\n{"a": 1}\n```') == {"a": 1}
    assert extract_json_object('````json\n{"a": 1}\n````') == {"a": 1}
    assert extract_json_object('inline ```{"a": 1}``` done') == {"a": 1}


def test_fence_takes_precedence_over_prose_objects() -> None:
    text = 'Example {"op": "x"} shape.\n```json\n{"real": true}\n```\nAlso {"other": 2}.'
    assert extract_json_object(text) == {"real": True}


def test_first_valid_json_fence_wins() -> None:
    text = '```json\n{"first": 1}\n```\n```json\n{"second": 2}\n```'
    assert extract_json_object(text) == {"first": 1}


def test_non_json_fences_are_not_preferred() -> None:
    text = '```python\nx = {"py": 1}\n```\n```json\n{"js": 2}\n```'
    assert extract_json_object(text) == {"js": 2}


def test_fence_holding_an_array_is_skipped_for_objects() -> None:
    text = '```json\n[1, 2]\n```\nand {"obj": 1}'
    assert extract_json_object(text) == {"obj": 1}
    assert extract_json_array(text) == [1, 2]


def test_fence_with_prose_inside_disambiguates() -> None:
    text = 'Not this: {"draft": 1}\n```json\nFinal answer: {"final": 2}\n```'
    assert extract_json_object(text) == {"final": 2}


# ── objects: bare text ────────────────────────────────────────────────────────────────────


def test_bare_object_in_prose() -> None:
    assert extract_json_object('The patch is {"reasoning": "r", "edits": []} as requested.') == {
        "reasoning": "r",
        "edits": [],
    }
    assert extract_json_object("{}") == {}


def test_nested_objects_and_escaped_quotes() -> None:
    text = 'x {"a": {"b": {"c": "say \\"hi\\" {"}}, "d": "\\\\"} y'
    assert extract_json_object(text) == {"a": {"b": {"c": 'say "hi" {'}}, "d": "\\"}


def test_braces_inside_strings_are_ignored() -> None:
    text = 'Result: {"content": "use {name} and } or {{"} end'
    assert extract_json_object(text) == {"content": "use {name} and } or {{"}


def test_braces_in_quoted_prose_are_ignored() -> None:
    text = 'Write "{placeholder}" literally, then {"a": 1}. Keep "}" too.'
    assert extract_json_object(text) == {"a": 1}


@pytest.mark.parametrize("text", ["{not json}", "use {x} here", "{ name: 1 }", "set {'a': 1}"])
def test_prose_pseudo_json_is_rejected(text: str) -> None:
    assert extract_json_object(text) is None
    assert "no JSON object" in extraction_error(text)


def test_two_different_objects_are_ambiguous() -> None:
    text = 'First {"a": 1} then {"b": 2}'
    assert extract_json_object(text) is None
    assert "ambiguous" in extraction_error(text)


def test_repeated_identical_object_is_not_ambiguous() -> None:
    assert extract_json_object('{"a": 1}\nAgain: {"a": 1}') == {"a": 1}


def test_valid_plus_broken_object_is_ambiguous() -> None:
    text = 'Draft {"a": 1} final {"b": 2,,}'
    assert extract_json_object(text) is None
    assert "ambiguous" in extraction_error(text)


@pytest.mark.parametrize("text", ["", "   ", "no json here at all"])
def test_nothing_to_extract(text: str) -> None:
    assert extract_json_object(text) is None
    assert extraction_error(text)


def test_non_string_input() -> None:
    assert extract_json_object(None) is None  # type: ignore[arg-type]
    assert "not a string" in extraction_error(None)  # type: ignore[arg-type]


# ── objects: repair ───────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1,}', {"a": 1}),
        ('{"a": [1, 2, ], "b": {"c": 3 , } , }', {"a": [1, 2], "b": {"c": 3}}),
        ('Answer: {"a": {"b": [1, 2', {"a": {"b": [1, 2]}}),
        ('{"a": [1, 2,\n', {"a": [1, 2]}),
        ('{"note": "truncated mid-str', {"note": "truncated mid-str"}),
        ('{"note": "ends with backslash \\', {"note": "ends with backslash "}),
        ('{"a": "line one\nline two"}', {"a": "line one\nline two"}),
        ('{"a": [1, 2}', {"a": [1, 2]}),
        (
            '```json\n{"edits": [{"op": "append", "content": "x"},]}\n```',
            {"edits": [{"op": "append", "content": "x"}]},
        ),
        ('```json\n{"a": 1,\n', {"a": 1}),  # unclosed fence (truncated reply)
    ],
)
def test_repairs_common_breakage(text: str, expected: dict) -> None:
    assert extract_json_object(text) == expected


def test_repair_keeps_commas_inside_strings() -> None:
    assert extract_json_object('{"a": "x, ]", }') == {"a": "x, ]"}


@pytest.mark.parametrize("text", ['{"a": 1, "b"', '{"a": }', '{"a": 1]]', "{\u201ca\u201d: 1}"])
def test_unrepairable_stays_none_with_reason(text: str) -> None:
    assert extract_json_object(text) is None
    assert extraction_error(text)


def test_backticks_inside_json_strings_do_not_cut_the_fence() -> None:
    text = '```json\n{"edits": [{"op": "append", "content": "Use:\\n```python\\nx = 1\\n```"}]}\n```'
    assert extract_json_object(text) == {
        "edits": [{"op": "append", "content": "Use:\n```python\nx = 1\n```"}]
    }


def test_fence_cut_inside_a_broken_string_is_not_truncated() -> None:
    # Raw newlines make the string invalid JSON, and a line-start ``` inside it closes the
    # fence early. Repairing the fence part would silently drop "y"; the whole value wins.
    text = '```json\n{"a": "x\n```\ny"}\n'
    assert extract_json_object(text) == {"a": "x\n```\ny"}


def test_inline_backticks_inside_fenced_string() -> None:
    text = 'Answer:\n```\n{"a": "code ```x``` here"}\n```'
    assert extract_json_object(text) == {"a": "code ```x``` here"}


def test_missing_final_brace_inside_closed_fence_is_repaired() -> None:
    assert extract_json_object('```json\n{"a": [1, 2]\n```\nDone.') == {"a": [1, 2]}


def test_repair_only_for_single_candidate() -> None:
    assert extract_json_object('{"a": 1,} and {"b": 2,}') is None


def test_broken_fence_repaired_before_prose_objects() -> None:
    text = 'Example {"x": 0}\n```json\n{"real": [1, 2,]}\n```'
    assert extract_json_object(text) == {"real": [1, 2]}


# ── arrays ────────────────────────────────────────────────────────────────────────────────


def test_array_fence_and_bare() -> None:
    assert extract_json_array('```json\n["a", "b"]\n```') == ["a", "b"]
    assert extract_json_array('Notes: ["one", "two"] done') == ["one", "two"]
    assert extract_json_array("[]") == []
    assert extract_json_array('[{"a": [1]}, [2]]') == [{"a": [1]}, [2]]


def test_arrays_inside_objects_are_not_top_level() -> None:
    assert extract_json_array('{"edits": [1, 2]}') is None
    assert extract_json_array('{"edits": [1, 2]} and [3]') == [3]


def test_prose_brackets_are_ignored() -> None:
    assert extract_json_array('See [the docs] and [not json], then ["x"]') == ["x"]
    assert extract_json_array("- [x] done\n- [y] todo") is None
    assert extract_json_array("- [ ] todo") == []  # an empty checkbox is valid JSON: not guessed away


def test_two_different_arrays_are_ambiguous() -> None:
    text = "[1] and [2]"
    assert extract_json_array(text) is None
    assert "ambiguous" in extraction_error(text, "array")


def test_array_repair() -> None:
    assert extract_json_array('["a", "b",]') == ["a", "b"]
    assert extract_json_array('Result: ["a", {"b": 1') == ["a", {"b": 1}]


def test_array_braces_inside_strings() -> None:
    assert extract_json_array('["[", "]", "{"]') == ["[", "]", "{"]


# ── adversarial input stays linear ────────────────────────────────────────────────────────


@pytest.mark.timeout(10)
@pytest.mark.parametrize(
    "text",
    [
        "{" * 100_000,
        "[" * 100_000,
        '{"' * 100_000,
        '{"a":' * 100_000,
        "```" * 100_000,
        "{ " * 100_000 + "}",
        '{"a": 1} ' * 20_000 + '{"b": 2}',
        '{"a": [' + "1," * 100_000,
        "\\" * 100_000 + '"{',
    ],
)
def test_adversarial_inputs_complete(text: str) -> None:
    extract_json_object(text)
    extract_json_array(text)
    assert isinstance(extraction_error(text), str)


@pytest.mark.timeout(10)
def test_many_unmatched_braces_then_valid_object_is_still_found() -> None:
    text = "{ x " * 50_000 + '{"ok": true}'
    assert extract_json_object(text) == {"ok": True}


@pytest.mark.timeout(10)
def test_deep_nesting_is_unparseable_not_a_crash() -> None:
    text = '{"a": ' + "[" * 100_000
    assert extract_json_object(text) is None
    assert "nested too deeply" in extraction_error(text)
