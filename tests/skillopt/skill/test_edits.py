"""Edit model, payload parsing and apply_edits semantics (reference §6.7 + our improvements)."""

from __future__ import annotations

import random

import pytest

from skillopt.errors import SkillParseError
from skillopt.skill import (
    APPENDIX_END,
    APPENDIX_HEADING,
    APPENDIX_START,
    SLOW_UPDATE_END,
    SLOW_UPDATE_START,
    Edit,
    Patch,
    apply_edits,
    edits_from_payload,
    protected_spans,
)

SU = f"{SLOW_UPDATE_START}\nKeep totals in column F.\n{SLOW_UPDATE_END}"
AP = f"{APPENDIX_START}\n{APPENDIX_HEADING}\n- Re-read the task.\n{APPENDIX_END}"
BODY = "# Skill\n\n## Steps\n- Load the workbook.\n- Write the answer.\n"


def apply_one(text: str, edit: Edit, **kw: bool) -> tuple[str, dict]:
    result = apply_edits(text, [edit], **kw)
    return result.text, result.reports[0].to_dict()


# ── Edit / Patch model ────────────────────────────────────────────────────────────────────


def test_edit_from_dict_tolerates_missing_and_extra_keys() -> None:
    e = Edit.from_dict(
        {"op": " Insert_After ", "target": "t", "content": "c", "extra": 1, "support_count": "3"}
    )
    assert e == Edit("insert_after", "c", "t", support_count=3)
    bare = Edit.from_dict({})
    assert (bare.op, bare.content, bare.target, bare.support_count, bare.source_type, bare.merge_level) == (
        "",
        "",
        "",
        1,
        "failure",
        0,
    )
    odd = Edit.from_dict({"op": "append", "content": None, "support_count": True, "merge_level": "x"})
    assert (odd.content, odd.support_count, odd.merge_level) == ("", 1, 0)


def test_edit_round_trip_and_optional_fields_omitted() -> None:
    e = Edit(
        "replace",
        "new",
        "old",
        support_count=4,
        source_type="success",
        merge_level=2,
        update_origin="step_0002",
    )
    assert Edit.from_dict(e.to_dict()) == e
    d = Edit("append", "x").to_dict()
    assert d == {
        "op": "append",
        "content": "x",
        "support_count": 1,
        "source_type": "failure",
        "merge_level": 0,
    }


def test_edit_op_normalised_in_constructor() -> None:
    assert Edit("  APPEND ").op == "append"
    with pytest.raises(SkillParseError):
        Edit.from_dict(["not", "a", "mapping"])  # type: ignore[arg-type]


def test_patch_round_trip_drops_malformed_items() -> None:
    p = Patch.from_dict(
        {"reasoning": "r", "edits": [{"op": "append", "content": "a"}, "junk"], "ranking_details": {"k": 1}}
    )
    assert p.edits == (Edit("append", "a"),) and p.reasoning == "r" and p.ranking_details == {"k": 1}
    assert Patch.from_dict(p.to_dict()) == p
    assert "ranking_details" not in Patch().to_dict()


def test_edits_from_payload_shapes_and_reasons() -> None:
    items = [
        {"op": "append", "content": "ok"},
        "string item",
        {"content": "no op"},
        {"op": "rewrite", "content": "x"},
        {"op": "replace", "target": "", "content": "x"},
        {"op": "append", "content": f"  {SLOW_UPDATE_START}  "},
        {"op": "delete", "target": ["list"]},
        {"op": "DELETE", "target": "gone"},
        {"op": "insert_after", "content": "no target is fine"},
    ]
    parsed = edits_from_payload({"edits": items})
    assert [e.op for e in parsed.edits] == ["append", "delete", "insert_after"]
    reasons = {r.index: r.reason for r in parsed.rejected}
    assert set(reasons) == {1, 2, 3, 4, 5, 6}
    assert "not an object" in reasons[1]
    assert reasons[2] == "missing op"
    assert "unknown op 'rewrite'" in reasons[3]
    assert reasons[4] == "replace without a target"
    assert reasons[5] == "append without content"
    assert "target is not a string" in reasons[6]
    assert edits_from_payload(items[:1]).edits == (Edit("append", "ok"),)
    assert edits_from_payload({"patch": {"edits": items[:1]}}).edits == (Edit("append", "ok"),)


@pytest.mark.parametrize("payload", [None, "text", {"no_edits": []}, {"edits": "nope"}, 3])
def test_edits_from_payload_rejects_wrong_shapes(payload: object) -> None:
    with pytest.raises(SkillParseError):
        edits_from_payload(payload)


# ── append ────────────────────────────────────────────────────────────────────────────────


def test_append_at_end() -> None:
    out, rep = apply_one(BODY, Edit("append", "  ## Tips\n- Check types.  "))
    assert out == BODY.rstrip() + "\n\n## Tips\n- Check types.\n"
    assert rep["status"] == "applied_append" and rep["matched"] is None


def test_append_on_empty_skill() -> None:
    out, rep = apply_one("", Edit("append", "first"))
    assert (out, rep["status"]) == ("first\n", "applied_append")


def test_append_goes_before_earliest_protected_region() -> None:
    text = f"{BODY}\n{SU}\n\n{AP}\n"
    out, rep = apply_one(text, Edit("append", "- New rule."))
    assert rep["status"] == "applied_append_before_protected_region"
    assert out == f"{BODY.rstrip()}\n\n- New rule.\n\n{SU}\n\n{AP}\n"


def test_append_goes_to_end_of_body_when_block_is_not_at_the_end() -> None:
    # The reference would insert above the body, before the leading block.
    out, rep = apply_one(f"{SU}\n\n{BODY}", Edit("append", "- New rule."))
    assert rep["status"] == "applied_append"
    assert out == f"{SU}\n\n{BODY.rstrip()}\n\n- New rule.\n"
    out, rep = apply_one(f"{SU}\n\n{BODY}\n{AP}\n", Edit("append", "- New rule."))
    assert rep["status"] == "applied_append_before_protected_region"
    assert out == f"{SU}\n\n{BODY.rstrip()}\n\n- New rule.\n\n{AP}\n"


def test_append_ignores_target_even_if_protected() -> None:
    _, rep = apply_one(f"{BODY}\n{SU}\n", Edit("append", "x", target="Keep totals"))
    assert rep["status"] == "applied_append_before_protected_region"


def test_empty_content_is_skipped_not_whitespace_churn() -> None:
    for op in ("append", "insert_after"):
        out, rep = apply_one(BODY, Edit(op, "   ", target="Load"))
        assert (out, rep["status"]) == (BODY, "skipped_empty_content")


def test_markers_in_content_are_removed() -> None:
    out, rep = apply_one(BODY, Edit("append", f"{SLOW_UPDATE_START}\nsneaky\n{SLOW_UPDATE_END}"))
    assert rep["status"] == "applied_append"
    assert SLOW_UPDATE_START not in out and SLOW_UPDATE_END not in out and out.endswith("\n\nsneaky\n")
    assert rep["content_preview"] == "sneaky"


# ── insert_after ──────────────────────────────────────────────────────────────────────────


def test_insert_after_goes_on_new_line_after_end_of_line() -> None:
    out, rep = apply_one(BODY, Edit("insert_after", "- Check the sheet name.", target="Load the"))
    assert rep["status"] == "applied_insert_after" and rep["matched"] == "exact"
    assert out == "# Skill\n\n## Steps\n- Load the workbook.\n- Check the sheet name.\n- Write the answer.\n"


def test_insert_after_last_line_without_newline() -> None:
    out, _ = apply_one("# A\nlast", Edit("insert_after", "new", target="last"))
    assert out == "# A\nlast\nnew\n"


def test_insert_after_target_ending_with_newline_does_not_skip_a_line() -> None:
    out, _ = apply_one("a\nb\nc\n", Edit("insert_after", "X", target="a\n"))
    assert out == "a\nX\nb\nc\n"


def test_insert_after_multiline_target_uses_line_of_its_end() -> None:
    out, _ = apply_one("a\nb tail\nc\n", Edit("insert_after", "X", target="a\nb"))
    assert out == "a\nb tail\nX\nc\n"


def test_insert_after_uses_first_occurrence() -> None:
    out, _ = apply_one("- x\n- x\n", Edit("insert_after", "N", target="x"))
    assert out == "- x\nN\n- x\n"


@pytest.mark.parametrize("target", ["", "   ", "not in the skill"])
def test_insert_after_fallback_append(target: str) -> None:
    out, rep = apply_one(BODY, Edit("insert_after", "tail", target=target))
    assert rep["status"] == "applied_insert_after_fallback_append"
    assert out == BODY.rstrip() + "\n\ntail\n"


def test_insert_after_fallback_before_protected_region() -> None:
    text = f"{BODY}\n{SU}\n"
    out, rep = apply_one(text, Edit("insert_after", "tail", target="missing"))
    assert rep["status"] == "applied_insert_after_fallback_before_protected_region"
    assert out == f"{BODY.rstrip()}\n\ntail\n\n{SU}\n"


def test_insert_after_line_running_into_marker_inserts_before_region() -> None:
    text = f"intro rule {SLOW_UPDATE_START}\ng\n{SLOW_UPDATE_END}\n"
    out, rep = apply_one(text, Edit("insert_after", "X", target="intro rule"))
    assert rep["status"] == "applied_insert_after"
    assert out == f"intro rule \nX\n{SLOW_UPDATE_START}\ng\n{SLOW_UPDATE_END}\n"


# ── replace / delete ──────────────────────────────────────────────────────────────────────


def test_replace_first_occurrence() -> None:
    out, rep = apply_one("a b a", Edit("replace", "Z", target="a"))
    assert (out, rep["status"], rep["matched"]) == ("Z b a", "applied_replace", "exact")


def test_replace_keeps_whitespace_framing_the_target() -> None:
    out, _ = apply_one("- one\n- two\n", Edit("replace", "- uno", target="- one\n"))
    assert out == "- uno\n- two\n"


def test_replace_with_empty_content_removes_line() -> None:
    out, rep = apply_one("- one\n- two\n- three\n", Edit("replace", "", target="- two"))
    assert (out, rep["status"]) == ("- one\n- three\n", "applied_replace")


@pytest.mark.parametrize(
    ("op", "target", "status"),
    [
        ("replace", "", "skipped_replace_missing_target"),
        ("replace", "nowhere", "skipped_replace_target_not_found"),
        ("delete", "", "skipped_delete_missing_target"),
        ("delete", "nowhere", "skipped_delete_target_not_found"),
        ("rewrite", "Load", "skipped_unknown_op"),
    ],
)
def test_skip_statuses(op: str, target: str, status: str) -> None:
    out, rep = apply_one(BODY, Edit(op, "x", target=target))
    assert (out, rep["status"]) == (BODY, status)


def test_delete_whole_line_takes_its_newline() -> None:
    out, rep = apply_one(BODY, Edit("delete", target="- Load the workbook."))
    assert rep["status"] == "applied_delete"
    assert out == "# Skill\n\n## Steps\n- Write the answer.\n"


def test_delete_collapses_blank_lines_at_seam() -> None:
    out, _ = apply_one("p1\n\nGONE\n\np2\n", Edit("delete", target="GONE"))
    assert out == "p1\n\np2\n"


def test_delete_inline_fragment() -> None:
    out, _ = apply_one("keep this, not that\n", Edit("delete", target=", not that"))
    assert out == "keep this\n"


# ── protected regions ─────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize("op", ["replace", "delete", "insert_after"])
@pytest.mark.parametrize("target", ["Keep totals in column F.", "Re-read the task.", SLOW_UPDATE_START])
def test_targets_only_inside_protected_regions_are_refused(op: str, target: str) -> None:
    text = f"{BODY}\n{SU}\n\n{AP}\n"
    out, rep = apply_one(text, Edit(op, "x", target=target))
    assert (out, rep["status"], rep["matched"]) == (text, "skipped_protected_region", None)


def test_target_straddling_a_marker_is_refused() -> None:
    text = f"{BODY}\n{SU}\n"
    _, rep = apply_one(text, Edit("replace", "x", target=f"answer.\n\n{SLOW_UPDATE_START}"))
    assert rep["status"] == "skipped_protected_region"


def test_first_occurrence_outside_protected_region_is_used() -> None:
    # The reference refuses here because the first occurrence overall is protected.
    text = f"{SLOW_UPDATE_START}\nUse column F.\n{SLOW_UPDATE_END}\n\n# Skill\nUse column F.\n"
    out, rep = apply_one(text, Edit("replace", "Use column G.", target="Use column F."))
    assert rep["status"] == "applied_replace"
    assert out == f"{SLOW_UPDATE_START}\nUse column F.\n{SLOW_UPDATE_END}\n\n# Skill\nUse column G.\n"


def test_unclosed_start_protects_everything_after_it() -> None:
    text = f"# S\nrule\n{SLOW_UPDATE_START}\nrule below\n"
    _, rep = apply_one(text, Edit("delete", target="rule below"))
    assert rep["status"] == "skipped_protected_region"
    out, rep = apply_one(text, Edit("delete", target="rule"))
    assert rep["status"] == "applied_delete" and out == f"# S\n{SLOW_UPDATE_START}\nrule below\n"


def test_edit_that_would_forge_a_marker_is_rolled_back() -> None:
    text = "# S\n<!-- SLOW_UPDATE_XSTART -->\n"
    out, rep = apply_one(text, Edit("delete", target="X"))
    assert (out, rep["status"]) == (text, "skipped_protected_region")


# ── sequential application, reports and summary ───────────────────────────────────────────


def test_edits_apply_sequentially_to_evolving_text() -> None:
    edits = [
        Edit("append", "- Step three."),
        Edit("insert_after", "- Step four.", target="- Step three."),
        Edit("replace", "- Step 3.", target="- Step three."),
        Edit("delete", target="- Write the answer."),
    ]
    result = apply_edits(BODY, edits)
    assert [r.status for r in result.reports] == [
        "applied_append",
        "applied_insert_after",
        "applied_replace",
        "applied_delete",
    ]
    assert result.text == "# Skill\n\n## Steps\n- Load the workbook.\n\n- Step 3.\n- Step four.\n"
    assert result.changed


def test_reports_and_summary() -> None:
    doc = f"{BODY}\n{SU}\n"
    edits = [
        Edit("append", "a"),
        {"op": "replace", "target": "missing", "content": "x"},
        Edit("insert_after", "b", target="also missing"),
        Edit("insert_after", "c", target=""),
        Edit("delete", target="Keep totals"),
        Edit("frobnicate", "x"),
        {"op": "append", "content": 5},  # coerced to "5": dicts are read leniently
    ]
    result = apply_edits(doc, edits)
    statuses = [r.status for r in result.reports]
    assert statuses == [
        "applied_append_before_protected_region",
        "skipped_replace_target_not_found",
        "applied_insert_after_fallback_before_protected_region",
        "applied_insert_after_fallback_before_protected_region",
        "skipped_protected_region",
        "skipped_unknown_op",
        "applied_append_before_protected_region",
    ]
    assert [r.index for r in result.reports] == list(range(1, 8))
    assert result.summary.to_dict() == {"total": 7, "applied": 4, "skipped": 3, "errors": 0, "unmatched": 2}
    first = result.reports[1].to_dict()
    assert set(first) == {
        "index", "op", "target", "content_preview", "status", "matched", "content", "full_target", "file",
    }  # fmt: skip
    assert first["file"] == "SKILL.md"


def test_report_truncates_target_and_preview_and_keeps_the_whole_edit() -> None:
    result = apply_edits("x", [Edit("replace", "c" * 500, target="t" * 500)])
    rep = result.reports[0]
    assert len(rep.target) == 200 and len(rep.content_preview) == 200
    assert rep.content == "c" * 500 and rep.full_target == "t" * 500  # the WebUI shows these


def test_exception_gives_error_status_and_keeps_text() -> None:
    result = apply_edits(BODY, [["not", "an", "edit"], Edit("append", "ok")])  # type: ignore[list-item]
    assert result.reports[0].status == "error" and "SkillParseError" in result.reports[0].error
    assert result.reports[0].to_dict()["error"]
    assert result.reports[1].status == "applied_append"
    assert result.summary.errors == 1 and result.summary.applied == 1


def test_unchanged_document_reports_not_changed() -> None:
    result = apply_edits(BODY, [Edit("delete", target="nowhere")])
    assert not result.changed and result.text == BODY


def test_append_to_a_text_without_a_final_newline() -> None:
    assert apply_edits("a", [Edit("append", "b")]).text == "a\n\nb\n"


# ── whitespace-tolerant matching ──────────────────────────────────────────────────────────

WRAPPED = "# Skill\n- Always check the header\n  row before writing.\n- Next.\n"


def test_whitespace_difference_unmatched_by_default() -> None:
    out, rep = apply_one(WRAPPED, Edit("replace", "X", target="check the header row"))
    assert (out, rep["status"]) == (WRAPPED, "skipped_replace_target_not_found")


def test_whitespace_tolerant_maps_back_to_exact_span() -> None:
    out, rep = apply_one(
        WRAPPED,
        Edit("replace", "verify the header row", target="check  the header row"),
        whitespace_tolerant=True,
    )
    assert rep["status"] == "applied_replace" and rep["matched"] == "whitespace"
    assert out == "# Skill\n- Always verify the header row before writing.\n- Next.\n"


def test_whitespace_tolerant_prefers_exact_match() -> None:
    text = "a  b\na b\n"
    out, rep = apply_one(text, Edit("replace", "X", target="a b"), whitespace_tolerant=True)
    assert (out, rep["matched"]) == ("a  b\nX\n", "exact")


def test_whitespace_tolerant_insert_after_and_delete() -> None:
    out, rep = apply_one(
        WRAPPED, Edit("insert_after", "- Inserted.", target="header row before"), whitespace_tolerant=True
    )
    assert rep["matched"] == "whitespace"
    assert out == "# Skill\n- Always check the header\n  row before writing.\n- Inserted.\n- Next.\n"
    out, rep = apply_one(
        "keep\n\tdrop   me\nkeep2\n", Edit("delete", target="drop me"), whitespace_tolerant=True
    )
    assert (out, rep["status"]) == ("keep\nkeep2\n", "applied_delete")


def test_whitespace_tolerant_still_refuses_protected_matches() -> None:
    text = f"{BODY}\n{SLOW_UPDATE_START}\nKeep   totals\nin F.\n{SLOW_UPDATE_END}\n"
    out, rep = apply_one(text, Edit("delete", target="Keep totals in F."), whitespace_tolerant=True)
    assert (out, rep["status"]) == (text, "skipped_protected_region")


def test_whitespace_tolerant_uses_unprotected_occurrence() -> None:
    text = f"{SLOW_UPDATE_START}\nuse  F\n{SLOW_UPDATE_END}\nuse\nF\n"
    out, rep = apply_one(text, Edit("replace", "use G", target="use F"), whitespace_tolerant=True)
    assert rep["matched"] == "whitespace"
    assert out == f"{SLOW_UPDATE_START}\nuse  F\n{SLOW_UPDATE_END}\nuse G\n"


def test_whitespace_tolerant_insert_after_fallback_counts_unmatched() -> None:
    result = apply_edits(BODY, [Edit("insert_after", "x", target="no such words")], whitespace_tolerant=True)
    assert result.reports[0].status == "applied_insert_after_fallback_append"
    assert result.summary.unmatched == 1


@pytest.mark.timeout(10)
def test_whitespace_tolerant_is_fast_on_repetitive_text() -> None:
    text = "a " * 50_000
    target = "a " * 2_000 + "b"
    result = apply_edits(text, [Edit("delete", target=target)], whitespace_tolerant=True)
    assert result.reports[0].status == "skipped_delete_target_not_found"


# ── invariant under random edits ──────────────────────────────────────────────────────────


def test_random_edits_never_touch_protected_regions() -> None:
    rng = random.Random(1234)
    words = ["alpha", "beta", "- gamma", "## delta", "  eps", "", "zeta.", "<!--", "-->", "START"]
    for _ in range(300):
        lines = [rng.choice(words) for _ in range(rng.randint(0, 8))]
        blocks = [SU, AP][: rng.randint(0, 2)]
        pieces = lines + blocks
        rng.shuffle(pieces)
        text = "\n".join(pieces) + rng.choice(["", "\n", "\n\n"])
        before = [text[a:b] for a, b in protected_spans(text)]
        edits = []
        for _ in range(rng.randint(1, 4)):
            lo = rng.randrange(len(text) + 1)
            target = text[lo : lo + rng.randint(0, 30)]
            content = rng.choice(["new line", "", f"x {SLOW_UPDATE_END} y", "- item\n- item2", target])
            edits.append(Edit(rng.choice(["append", "insert_after", "replace", "delete"]), content, target))
        result = apply_edits(text, edits, whitespace_tolerant=rng.random() < 0.5)
        out = result.text
        assert [out[a:b] for a, b in protected_spans(out)] == before, (text, edits)
        assert result.summary.errors == 0
