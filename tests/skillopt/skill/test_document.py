"""Protected regions, slow-update helpers and appendix notes."""

from __future__ import annotations

from skillopt.skill import (
    APPENDIX_END,
    APPENDIX_HEADING,
    APPENDIX_START,
    SLOW_UPDATE_END,
    SLOW_UPDATE_START,
    appendix_notes,
    dedup_notes,
    extract_slow_update_field,
    inject_empty_slow_update_field,
    merge_appendix_notes,
    note_key,
    protected_spans,
    replace_slow_update_field,
    strip_protected_regions,
)

SU = f"{SLOW_UPDATE_START}\nold guidance\n{SLOW_UPDATE_END}"
AP = f"{APPENDIX_START}\n{APPENDIX_HEADING}\n- note one\n{APPENDIX_END}"


# ── protected spans ───────────────────────────────────────────────────────────────────────


def test_protected_spans_cover_both_blocks_with_markers() -> None:
    text = f"# Skill\n\n{SU}\n\n{AP}\n"
    spans = protected_spans(text)
    assert [text[a:b] for a, b in spans] == [SU, AP]


def test_unclosed_start_protects_to_end_and_stray_end_protects_marker() -> None:
    text = f"body\n{SLOW_UPDATE_END}\nmore\n{APPENDIX_START}\ntail"
    spans = protected_spans(text)
    assert [text[a:b] for a, b in spans] == [SLOW_UPDATE_END, f"{APPENDIX_START}\ntail"]


def test_overlapping_blocks_merge() -> None:
    text = f"{SLOW_UPDATE_START} a {APPENDIX_START} b {SLOW_UPDATE_END} c {APPENDIX_END} d"
    assert protected_spans(text) == ((0, len(text) - 2),)


def test_no_markers_no_spans() -> None:
    assert protected_spans("# plain\n") == ()


def test_strip_protected_regions_removes_blocks_and_collapses_seams() -> None:
    text = f"# Skill\n\nRule.\n\n{SU}\n\n\n{AP}\n"
    assert strip_protected_regions(text) == "# Skill\n\nRule.\n"
    assert strip_protected_regions(f"{SU}\n# Top\n") == "# Top\n"
    assert strip_protected_regions("no markers") == "no markers"


# ── slow update ───────────────────────────────────────────────────────────────────────────


def test_inject_empty_appends_after_blank_line() -> None:
    out = inject_empty_slow_update_field("# Skill\n- a\n")
    assert out == f"# Skill\n- a\n\n{SLOW_UPDATE_START}\n{SLOW_UPDATE_END}\n"
    assert extract_slow_update_field(out) == ""


def test_inject_empty_on_blank_skill() -> None:
    assert inject_empty_slow_update_field("") == f"{SLOW_UPDATE_START}\n{SLOW_UPDATE_END}\n"


def test_inject_is_idempotent_and_keeps_existing_guidance() -> None:
    text = f"# Skill\n\n{SU}\n"
    assert inject_empty_slow_update_field(text) == text


def test_inject_normalises_broken_markers() -> None:
    out = inject_empty_slow_update_field(f"# Skill\n{SLOW_UPDATE_END}\nbody\n")
    assert out.count(SLOW_UPDATE_START) == 1 and out.count(SLOW_UPDATE_END) == 1
    assert out.startswith("# Skill\n\nbody\n")


def test_extract_takes_first_start_to_first_end_after_it() -> None:
    text = f"{SLOW_UPDATE_END}\nx\n{SLOW_UPDATE_START}\n  first  \n{SLOW_UPDATE_END}\n{SLOW_UPDATE_START}\nsecond\n{SLOW_UPDATE_END}"
    assert extract_slow_update_field(text) == "first"
    assert extract_slow_update_field("no block") == ""
    assert extract_slow_update_field(f"{SLOW_UPDATE_START} unclosed") == ""


def test_replace_strips_all_blocks_and_orphans_and_appends_one() -> None:
    text = (
        f"# Skill\n\n{SU}\n\nmiddle\n\n\n{SLOW_UPDATE_START}\nsecond\n{SLOW_UPDATE_END}\n"
        f"{SLOW_UPDATE_END}\ntail\n{SLOW_UPDATE_START}\n"
    )
    out = replace_slow_update_field(text, "  new guidance  ")
    assert out.count(SLOW_UPDATE_START) == 1 and out.count(SLOW_UPDATE_END) == 1
    assert out == f"# Skill\n\nmiddle\n\ntail\n\n{SLOW_UPDATE_START}\nnew guidance\n{SLOW_UPDATE_END}\n"
    assert "\n\n\n" not in out
    assert extract_slow_update_field(out) == "new guidance"


def test_replace_removes_markers_from_guidance() -> None:
    out = replace_slow_update_field("# S\n", f"a {SLOW_UPDATE_END} b")
    assert extract_slow_update_field(out) == "a  b"
    assert out.count(SLOW_UPDATE_END) == 1


def test_replace_keeps_appendix_block_intact() -> None:
    text = f"# S\n\n{AP}\n\n{SU}\n"
    out = replace_slow_update_field(text, "g")
    assert AP in out and appendix_notes(out) == ["note one"]
    assert out.endswith(f"{SLOW_UPDATE_START}\ng\n{SLOW_UPDATE_END}\n")


def test_replace_with_empty_content_gives_empty_block() -> None:
    out = replace_slow_update_field(f"# S\n\n{SU}\n", "")
    assert out == f"# S\n\n{SLOW_UPDATE_START}\n{SLOW_UPDATE_END}\n"


# ── appendix ──────────────────────────────────────────────────────────────────────────────


def test_note_key_casefolds_and_drops_trailing_punctuation() -> None:
    assert note_key("  Check   the TOTALS. ") == note_key("check the totals") == "check the totals"
    assert note_key("Use ISO dates;:,_-") == "use iso dates"
    assert note_key("- bullet note") == "bullet note"


def test_dedup_notes_is_order_preserving_and_collapses_whitespace() -> None:
    notes = ["Read the header.", "  read the\n header ", "", "Second  note", "SECOND NOTE!"]
    assert dedup_notes(notes) == ["Read the header.", "Second note", "SECOND NOTE!"]


def test_merge_creates_block_after_body() -> None:
    out = merge_appendix_notes("# Skill\n", ["Check totals.", "check totals"])
    assert out == f"# Skill\n\n{APPENDIX_START}\n{APPENDIX_HEADING}\n- Check totals.\n{APPENDIX_END}\n"
    assert appendix_notes(out) == ["Check totals."]


def test_merge_appends_only_new_notes_in_place() -> None:
    text = f"# Skill\n\n{AP}\n\n{SU}\n"
    out = merge_appendix_notes(text, ["Note One.", "note two"])
    assert appendix_notes(out) == ["note one", "note two"]
    assert out.index(APPENDIX_START) < out.index(SLOW_UPDATE_START)  # rewritten in place
    assert extract_slow_update_field(out) == "old guidance"


def test_merge_without_new_notes_returns_text_unchanged() -> None:
    text = f"# Skill\n\n{AP}\n"
    assert merge_appendix_notes(text, ["NOTE ONE;"]) is text
    assert merge_appendix_notes("# Skill\n", []) == "# Skill\n"


def test_merge_sanitises_notes() -> None:
    out = merge_appendix_notes("# S\n", [f"multi\nline {APPENDIX_END} note", "- bulleted"])
    assert appendix_notes(out) == ["multi line note", "bulleted"]
    assert out.count(APPENDIX_END) == 1


def test_merge_repairs_duplicate_blocks() -> None:
    text = f"# S\n\n{AP}\n\nbody\n\n{APPENDIX_START}\n{APPENDIX_HEADING}\n- two\n{APPENDIX_END}\n{APPENDIX_END}\n"
    out = merge_appendix_notes(text, ["three"])
    assert out.count(APPENDIX_START) == 1 and out.count(APPENDIX_END) == 1
    assert appendix_notes(out) == ["note one", "two", "three"]
    assert out.startswith("# S\n\nbody\n\n")


def test_the_helpers_compose_and_never_change_their_input() -> None:
    text = "# Skill\n"
    a = inject_empty_slow_update_field(text)
    b = replace_slow_update_field(a, "guide")
    c = merge_appendix_notes(b, ["n1"])
    assert text == "# Skill\n"
    assert extract_slow_update_field(a) == ""
    assert extract_slow_update_field(b) == "guide"
    assert appendix_notes(c) == ["n1"] and extract_slow_update_field(c) == "guide"
    assert strip_protected_regions(c) == "# Skill\n"
    assert len(protected_spans(c)) == 2


def test_package_exports_every_public_name_of_its_modules() -> None:
    import skillopt.skill as pkg
    from skillopt.skill import document, edits, schedule
    from skillopt.skill.edits import _apply, _model

    exported = set(pkg.__all__)
    for module in (document, edits, _model, _apply, schedule):
        assert set(module.__all__) <= exported, module.__name__
        defined = {
            name
            for name, value in vars(module).items()
            if not name.startswith("_") and getattr(value, "__module__", None) == module.__name__
        }
        assert defined <= set(module.__all__), (module.__name__, defined - set(module.__all__))
    assert all(hasattr(pkg, name) for name in exported)
