"""The text of a skill file and its machine-managed (protected) regions.

A skill is free-form Markdown. Two regions of it belong to the trainer, not to step-level
edits (reference §7.8):

* the **slow-update block**, owned by the end-of-epoch slow update::

      <!-- SLOW_UPDATE_START -->
      guidance addressed to the target
      <!-- SLOW_UPDATE_END -->

* the **appendix block**, owned by skill-aware reflection::

      <!-- APPENDIX_START -->
      ## Execution Notes Appendix
      - note
      <!-- APPENDIX_END -->

Everything here is a pure function of strings (no I/O): the text of one file of a skill (its
SKILL.md, the optimizer's packed text of a version), never the version itself
(:class:`skillopt.types.SkillVersion`).

Usage::

    text = inject_empty_slow_update_field("# Skill\\n")
    text = replace_slow_update_field(text, "Check the header row first.")
    assert extract_slow_update_field(text) == "Check the header row first."
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = [
    "APPENDIX_END",
    "APPENDIX_HEADING",
    "APPENDIX_START",
    "FILE_END",
    "FILE_START_RE",
    "PROTECTED_MARKERS",
    "SLOW_UPDATE_END",
    "SLOW_UPDATE_START",
    "appendix_notes",
    "dedup_notes",
    "extract_slow_update_field",
    "file_spans",
    "inject_empty_slow_update_field",
    "merge_appendix_notes",
    "normalize_note",
    "note_key",
    "protected_spans",
    "remove_protected_markers",
    "replace_slow_update_field",
    "split_front_matter",
    "strip_protected_regions",
]

SLOW_UPDATE_START = "<!-- SLOW_UPDATE_START -->"
SLOW_UPDATE_END = "<!-- SLOW_UPDATE_END -->"
APPENDIX_START = "<!-- APPENDIX_START -->"
APPENDIX_END = "<!-- APPENDIX_END -->"
APPENDIX_HEADING = "## Execution Notes Appendix"

PROTECTED_MARKERS: tuple[str, ...] = (SLOW_UPDATE_START, SLOW_UPDATE_END, APPENDIX_START, APPENDIX_END)

#: A package file inside a version's packed text (:mod:`skillopt.skill.packed`): a line
#: ``<!-- SKILL_FILE path="scripts/x.py" executable -->``, the file, ``<!-- SKILL_FILE_END -->``.
#: Step-level edits of SKILL.md never reach into one (edits name the file instead).
FILE_START_RE = re.compile(r'^<!-- SKILL_FILE path=("(?:[^"\\\n]|\\.)*")((?: [a-z-]+)*) -->[ \t]*$', re.M)
FILE_END = "<!-- SKILL_FILE_END -->"
_FILE_END_RE = re.compile(r"^<!-- SKILL_FILE_END -->[ \t]*$", re.M)

_MARKER_RE = re.compile("|".join(re.escape(m) for m in PROTECTED_MARKERS))
_ANY_MARKER_RE = re.compile(
    "|".join(
        [
            *(re.escape(m) for m in PROTECTED_MARKERS),
            r"<!-- SKILL_FILE_END -->",
            r"<!-- SKILL_FILE path=[^\n]*?-->",
        ]
    )
)
_LEADING_BLANK_LINES_RE = re.compile(r"\A(?:[ \t]*\n)+")
# Characters dropped from the end of a note's dedup key, so "Check totals." == "check totals".
_NOTE_KEY_TRAILING = " .;:,_-"
_BULLET_RE = re.compile(r"\A(?:[-*+]|\d+[.)])\s+")

Span = tuple[int, int]


# ── the front matter ──────────────────────────────────────────────────────────────────────


def split_front_matter(content: str) -> tuple[str, str]:
    """``(head, body)`` of a SKILL.md text, with ``head + body == content``: the head is the
    front matter block verbatim with the blank lines after it (``""`` when there is none)."""
    head = ""
    if content.startswith("---"):
        match = re.match(r"---[^\n]*\n.*?^---[ \t]*(?:\n[ \t]*)*(?:\n|\Z)", content, re.S | re.M)
        if match:
            head = match.group(0)
    return head, content[len(head) :]


# ── protected regions ─────────────────────────────────────────────────────────────────────


def _block_spans(text: str, start: str, end: str) -> tuple[list[Span], list[Span], Span | None]:
    """Find the blocks of one marker pair.

    Returns:
        ``(blocks, stray_ends, open_start)``: well-formed ``start…end`` spans (markers
        included), spans of END markers with no START before them, and the span of a final
        START that is never closed (or ``None``). A START inside an open block is part of it.
    """
    blocks: list[Span] = []
    stray: list[Span] = []
    open_at: int | None = None
    for m in _MARKER_RE.finditer(text):
        marker = m.group(0)
        if marker == start and open_at is None:
            open_at = m.start()
        elif marker == end:
            if open_at is None:
                stray.append((m.start(), m.end()))
            else:
                blocks.append((open_at, m.end()))
                open_at = None
    open_span = None if open_at is None else (open_at, open_at + len(start))
    return blocks, stray, open_span


def file_spans(text: str) -> list[Span]:
    """Spans of the package-file sections of ``text``, markers included: each from its start
    line to the end of the first end line after it (a section never closed runs to the end)."""
    spans: list[Span] = []
    pos = 0
    while (start := FILE_START_RE.search(text, pos)) is not None:
        end = _FILE_END_RE.search(text, start.end())
        stop = end.end() if end is not None else len(text)
        spans.append((start.start(), stop))
        pos = stop
    return spans


def _merge_spans(spans: Iterable[Span]) -> list[Span]:
    merged: list[Span] = []
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def protected_spans(text: str) -> tuple[Span, ...]:
    """Character spans of ``text`` that step-level edits must never touch.

    A well-formed block is protected from its START to the end of its END marker. A START that
    is never closed protects everything after it (we cannot know where the owner's text ends,
    so we refuse rather than guess), and a stray END protects the marker itself.

    Args:
        text: The skill text.

    Returns:
        Sorted, non-overlapping ``(start, end)`` half-open spans.
    """
    spans: list[Span] = file_spans(text) if "<!-- SKILL_FILE" in text else []
    for start, end in ((SLOW_UPDATE_START, SLOW_UPDATE_END), (APPENDIX_START, APPENDIX_END)):
        blocks, stray, open_span = _block_spans(text, start, end)
        spans += blocks + stray
        if open_span is not None:
            spans.append((open_span[0], len(text)))
    return tuple(_merge_spans(spans))


def _join(left: str, right: str) -> str:
    """Join two pieces left over around a removed region with exactly one blank line."""
    left = left.rstrip()
    right = _LEADING_BLANK_LINES_RE.sub("", right)
    if not left:
        return right
    if not right.strip():
        return left + "\n"
    return left + "\n\n" + right


def _remove_spans(text: str, spans: Iterable[Span]) -> str:
    """Remove ``spans`` from ``text``; blank lines at each seam collapse to one."""
    out = ""
    pos = 0
    removed = False
    for a, b in _merge_spans(spans):
        out = _join(out, text[pos:a]) if removed else text[pos:a]
        pos = b
        removed = True
    if not removed:
        return text
    return _join(out, text[pos:])


def remove_protected_markers(text: str) -> str:
    """Remove every protected-region and package-file marker from ``text`` (used on edit
    content and notes: a marker in proposed text would forge a region or a file)."""
    return _ANY_MARKER_RE.sub("", text)


def strip_protected_regions(text: str) -> str:
    """The skill without its protected regions (what semantic density is computed on).

    Args:
        text: The skill text.

    Returns:
        ``text`` with every span of :func:`protected_spans` removed.
    """
    return _remove_spans(text, protected_spans(text))


# ── slow-update block ─────────────────────────────────────────────────────────────────────


def _slow_update_block(content: str) -> str:
    body = remove_protected_markers(content).strip()
    inner = f"{body}\n" if body else ""
    return f"{SLOW_UPDATE_START}\n{inner}{SLOW_UPDATE_END}"


def _append_block(text: str, block: str) -> str:
    base = text.rstrip()
    return f"{base}\n\n{block}\n" if base else f"{block}\n"


def extract_slow_update_field(text: str) -> str:
    """The guidance inside the slow-update block, stripped; ``""`` when there is none.

    Takes the text between the first START and the first END *after it*. (The reference takes
    the first END anywhere, which returns nonsense when a stray END precedes the block.)

    Args:
        text: The skill text.

    Returns:
        The stripped guidance, or ``""`` when no closed block exists.
    """
    start = text.find(SLOW_UPDATE_START)
    if start == -1:
        return ""
    begin = start + len(SLOW_UPDATE_START)
    end = text.find(SLOW_UPDATE_END, begin)
    if end == -1:
        return ""
    return text[begin:end].strip()


def replace_slow_update_field(text: str, content: str) -> str:
    """Replace the slow-update guidance: strip every block, then append exactly one.

    Every well-formed block is removed, and so is every orphan START or stray END marker (only
    the marker: text after an unclosed START is kept, since dropping body text would be worse
    than keeping stale guidance). Blank lines at each seam collapse to one; the rest of the
    body is left byte-for-byte alone. The new block goes at the end, after a blank line.

    Args:
        text: The skill text.
        content: The new guidance (markers inside it are removed; stripped).

    Returns:
        The new skill text, ending with a newline.
    """
    blocks, stray, open_span = _block_spans(text, SLOW_UPDATE_START, SLOW_UPDATE_END)
    # An unclosed START may be followed by more STARTs; remove them all as bare markers.
    orphans = [
        (m.start(), m.end())
        for m in _MARKER_RE.finditer(text)
        if m.group(0) == SLOW_UPDATE_START and open_span is not None and m.start() >= open_span[0]
    ]
    body = _remove_spans(text, blocks + stray + orphans)
    return _append_block(body, _slow_update_block(content))


def inject_empty_slow_update_field(text: str) -> str:
    """Add an empty slow-update block after the skill (epoch 1 of the slow update).

    Idempotent: a skill that already has a well-formed block is returned unchanged; one with
    only broken markers is normalised to a single empty block.

    Args:
        text: The skill text.

    Returns:
        The skill with exactly one slow-update block.
    """
    blocks, stray, open_span = _block_spans(text, SLOW_UPDATE_START, SLOW_UPDATE_END)
    if len(blocks) == 1 and not stray and open_span is None:
        return text
    if blocks or stray or open_span is not None:
        return replace_slow_update_field(text, extract_slow_update_field(text))
    return _append_block(text, _slow_update_block(""))


# ── appendix notes ────────────────────────────────────────────────────────────────────────


def normalize_note(note: str) -> str:
    """One appendix note as stored: markers removed, whitespace collapsed, bullet dropped.

    Args:
        note: A note as the analyst wrote it (may start with ``- `` and span lines).

    Returns:
        A single-line note, possibly ``""``.
    """
    text = " ".join(remove_protected_markers(str(note)).split())
    return _BULLET_RE.sub("", text, count=1).strip()


def note_key(note: str) -> str:
    """Dedup key of a note: normalised, case-folded, trailing `` .;:,_-`` removed."""
    return normalize_note(note).casefold().rstrip(_NOTE_KEY_TRAILING)


def dedup_notes(notes: Iterable[str]) -> list[str]:
    """Normalise notes and drop empty ones and repeats, keeping the first of each.

    Args:
        notes: Notes in order of arrival.

    Returns:
        The normalised notes, first occurrence order.
    """
    seen: set[str] = set()
    out: list[str] = []
    for note in notes:
        key = note_key(note)
        if key and key not in seen:
            seen.add(key)
            out.append(normalize_note(note))
    return out


def appendix_notes(text: str) -> list[str]:
    """The notes in the skill's appendix block(s), deduplicated, in order.

    Lines of a block other than its ``#`` heading are read as notes (bullets or not), so a
    hand-edited block still parses.

    Args:
        text: The skill text.

    Returns:
        The notes (possibly empty).
    """
    blocks, _, _ = _block_spans(text, APPENDIX_START, APPENDIX_END)
    lines: list[str] = []
    for a, b in blocks:
        inner = text[a + len(APPENDIX_START) : b - len(APPENDIX_END)]
        lines += [ln for ln in inner.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    return dedup_notes(lines)


def _appendix_block(notes: list[str]) -> str:
    bullets = "".join(f"- {n}\n" for n in notes)
    return f"{APPENDIX_START}\n{APPENDIX_HEADING}\n{bullets}{APPENDIX_END}"


def merge_appendix_notes(text: str, notes: Iterable[str]) -> str:
    """Merge execution notes into the appendix block (order-preserving dedup).

    Existing notes come first, then new ones not already present (see :func:`note_key`). When
    nothing new is added and the block is well-formed, ``text`` is returned unchanged, so the
    skill hash (and the gate cache) is not disturbed. A single well-formed block is rewritten
    in place; broken or repeated blocks are stripped and one block is appended at the end.

    Args:
        text: The skill text.
        notes: New notes (strings; bullets, line breaks and markers are normalised away).

    Returns:
        The new skill text.
    """
    existing = appendix_notes(text)
    merged = dedup_notes([*existing, *notes])
    blocks, stray, open_span = _block_spans(text, APPENDIX_START, APPENDIX_END)
    has_markers = bool(blocks or stray or open_span)
    well_formed = len(blocks) == 1 and not stray and open_span is None
    if (well_formed and merged == existing) or not (merged or has_markers):
        return text
    block = _appendix_block(merged)
    if well_formed:
        a, b = blocks[0]
        return text[:a] + block + text[b:]
    # Broken or repeated blocks: their notes were read above; remove them and every stray
    # appendix marker, then write one canonical block (none if there is nothing to keep).
    markers = [
        (m.start(), m.end())
        for m in _MARKER_RE.finditer(text)
        if m.group(0) in (APPENDIX_START, APPENDIX_END)
    ]
    body = _remove_spans(text, blocks + markers)
    return _append_block(body, block) if merged else body
