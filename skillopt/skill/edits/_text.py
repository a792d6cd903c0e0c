"""Where an edit lands in a text, and the four changes a text edit makes there.

:func:`locate` finds a target outside the protected regions (exactly, or ignoring differences
in whitespace when asked); :func:`append_to_body`, :func:`insert_after_line`,
:func:`replace_span` and :func:`remove_span` make the change and keep the text's line breaks
tidy. Positions are character offsets into the text; a :data:`Span` is ``(start, end)``.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "Located",
    "MatchKind",
    "Span",
    "append_to_body",
    "insert_after_line",
    "locate",
    "remove_span",
    "replace_span",
]

#: How a target matched: exactly, or ignoring differences in runs of whitespace.
MatchKind = Literal["exact", "whitespace"]
#: ``(start, end)`` character offsets into a text, ``end`` excluded.
Span = tuple[int, int]


def _segments(length: int, spans: Sequence[Span]) -> list[Span]:
    """The complement of ``spans`` in ``[0, length)``: where edits may match."""
    out: list[Span] = []
    pos = 0
    for a, b in spans:
        if a > pos:
            out.append((pos, a))
        pos = max(pos, b)
    if pos < length:
        out.append((pos, length))
    return out


_NONSPACE_RE = re.compile(r"\S+")


def _find_whitespace_tolerant(text: str, target: str, lo: int, hi: int) -> Span | None:
    """First match of ``target`` in ``text[lo:hi]`` ignoring differences in whitespace runs.

    Both sides are reduced to their non-space tokens joined by single spaces, searched with
    ``str.find`` and mapped back to exact spans of ``text``. This is linear in the segment;
    the obvious regex (tokens joined by ``\\s+``) backtracks to O(n·m) on repetitive text.
    """
    tokens = target.split()
    if not tokens:
        return None
    needle = " ".join(tokens)
    starts_norm: list[int] = []  # normalised start of each token
    starts_orig: list[int] = []  # original start of each token
    parts: list[str] = []
    pos = 0
    for m in _NONSPACE_RE.finditer(text, lo, hi):
        starts_norm.append(pos)
        starts_orig.append(m.start())
        parts.append(m.group(0))
        pos += len(m.group(0)) + 1
    found = " ".join(parts).find(needle)
    if found == -1:
        return None
    last = found + len(needle) - 1  # normalised index of the match's last character (non-space)
    i = bisect.bisect_right(starts_norm, found) - 1
    j = bisect.bisect_right(starts_norm, last) - 1
    return starts_orig[i] + (found - starts_norm[i]), starts_orig[j] + (last - starts_norm[j]) + 1


@dataclass(frozen=True, slots=True)
class Located:
    """Where :func:`locate` found a target: its span and how it matched (both ``None`` when it
    was not found), or ``protected`` when it was found only where edits may not go."""

    span: Span | None = None
    kind: MatchKind | None = None
    protected: bool = False  # found, but only where edits may not go


def locate(text: str, target: str, spans: Sequence[Span], whitespace_tolerant: bool) -> Located:
    """First occurrence of ``target`` outside protected regions, exact first.

    We search the unprotected segments only, so an occurrence inside (or straddling) a
    protected block never shadows a later editable one. The reference refuses the edit
    whenever the *first* occurrence is protected, which loses valid edits of text that the
    slow update happened to quote.
    """
    segments = _segments(len(text), spans)
    for lo, hi in segments:
        at = text.find(target, lo, hi)
        if at != -1:
            return Located(span=(at, at + len(target)), kind="exact")
    if whitespace_tolerant:
        for lo, hi in segments:
            found = _find_whitespace_tolerant(text, target, lo, hi)
            if found is not None:
                return Located(span=found, kind="whitespace")
    anywhere = target in text or (
        whitespace_tolerant and _find_whitespace_tolerant(text, target, 0, len(text)) is not None
    )
    return Located(protected=anywhere)


# ── text operations ───────────────────────────────────────────────────────────────────────


def append_to_body(text: str, content: str, spans: Sequence[Span]) -> tuple[str, bool]:
    """Append at the end of the body, i.e. before the protected regions that end the text.

    With the usual layout (body, then the slow-update and appendix blocks) this is the
    reference's "before the earliest protected marker, blank lines around". We anchor on the
    trailing run of protected regions instead of the earliest marker so that a block sitting
    at the top or in the middle of a hand-edited skill does not pull appended text away from
    the end of the body.

    Returns:
        The new text and whether it went before a protected region.
    """
    tail = len(text)
    for a, b in reversed(spans):
        if text[b:tail].strip():
            break
        tail = a
    if tail < len(text) and spans:
        before = text[:tail].rstrip()
        head = f"{before}\n\n" if before else ""
        return f"{head}{content}\n\n{text[tail:]}", True
    base = text.rstrip()
    return (f"{base}\n\n{content}\n" if base else f"{content}\n"), False


def insert_after_line(text: str, content: str, span: Span, spans: Sequence[Span]) -> str:
    """Insert ``content`` as new line(s) right after the line holding the end of ``span``."""
    start, end = span
    if end > start and text[end - 1] == "\n":
        at = end  # the target already ends its line; the reference would skip a whole line
    else:
        newline = text.find("\n", end)
        at = newline + 1 if newline != -1 else len(text)
    for a, b in spans:
        # The line runs on into a protected marker: insert before the region, not inside it.
        if a < at <= b:
            at = a
            break
    lead = "" if at == 0 or text[at - 1] == "\n" else "\n"
    return f"{text[:at]}{lead}{content}\n{text[at:]}"


def remove_span(text: str, span: Span) -> str:
    """Remove ``span``; a removed whole line takes its line break, and blank lines collapse."""
    start, end = span
    left, right = text[:start], text[end:]
    line_start = left.rfind("\n") + 1
    line_end = right.find("\n")
    rest_of_line = right if line_end == -1 else right[:line_end]
    if not left[line_start:].strip() and not rest_of_line.strip() and not text[start:end].endswith("\n"):
        # The match was the whole line (up to indentation): drop the line, not just its text.
        left = left[:line_start]
        right = "" if line_end == -1 else right[line_end + 1 :]
    if not left:
        right = right.lstrip("\n")  # no blank lines left dangling at the top
    newlines = (len(left) - len(left.rstrip("\n"))) + (len(right) - len(right.lstrip("\n")))
    if newlines > 2:
        # Keep one blank line at the seam instead of the 2+ the removal left behind.
        left, right = left.rstrip("\n"), right.lstrip("\n")
        if left and right:
            return f"{left}\n\n{right}"
        return f"{left}\n" if left else right
    return left + right


def replace_span(text: str, content: str, span: Span) -> str:
    """Replace ``span`` with ``content``, keeping the whitespace that framed the target.

    Content arrives stripped, so without this a target ending in a line break would glue the
    replacement onto the next line.
    """
    if not content:
        return remove_span(text, span)
    matched = text[span[0] : span[1]]
    lead = matched[: len(matched) - len(matched.lstrip())]
    trail = matched[len(matched.rstrip()) :] if matched.strip() else ""
    return f"{text[: span[0]]}{lead}{content}{trail}{text[span[1] :]}"
